//! docs/json-schema.md against the JSON the commands print: every key a
//! table lists exists in the output, and every key of a level a table
//! spells out (the top level, or the children of a listed object) is listed.
//! Keys described in a row's meaning column (deeper levels) are not checked.

use crate::util::{fixture, real_dir, run as fragscope};
use serde_json::Value;
use std::collections::BTreeSet;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json-schema.md");

/// Key paths listed in the first column of `schema`'s table (`a[].b`;
/// `.c` after `a[].b` in one cell means `a[].c`).
fn documented(schema: &str) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(DOC).unwrap();
    let head = format!("## `{schema}`");
    let start = doc
        .find(&head)
        .unwrap_or_else(|| panic!("docs/json-schema.md has no section {head}"));
    let section = &doc[start + head.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut out = BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = line[1..].split(" | ").next().unwrap();
        let mut parent = String::new();
        for name in cell.split(", ").map(|n| n.trim().trim_matches('`')) {
            let path = match name.strip_prefix('.') {
                Some(rest) => format!("{parent}{rest}"),
                None => name.to_string(),
            };
            parent = match path.rfind('.') {
                Some(i) => path[..=i].to_string(),
                None => String::new(),
            };
            out.insert(path);
        }
    }
    assert!(!out.is_empty(), "{schema}: no rows");
    out
}

/// Every key path of a JSON value (arrays as `[]`).
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn parent(p: &str) -> &str {
    p.rfind('.').map_or("", |i| &p[..i])
}

fn check(schema: &str, json: &str) {
    let v: Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["schema"], schema);
    let doc = documented(schema);
    let mut have = BTreeSet::new();
    paths(&v, "", &mut have);
    for d in &doc {
        assert!(
            have.contains(d),
            "{schema}: docs list `{d}`, the output has no such key"
        );
    }
    let spelled_out: BTreeSet<&str> = doc.iter().map(|d| parent(d)).collect();
    for p in &have {
        if !spelled_out.contains(parent(p)) {
            continue;
        }
        assert!(
            doc.contains(p) || doc.iter().any(|d| d.starts_with(&format!("{p}."))),
            "{schema}: the output has `{p}`, which docs/json-schema.md does not list"
        );
    }
}

#[test]
fn snapshot_commands_match_the_docs() {
    let oom = fixture("expandable_oom_proto5.pickle");
    let culprits = fixture("culprits/pinned-segments.json");
    let frag = fixture("fragmented.json");
    let worked = fixture("worked_example_proto2.pickle");
    let out = |args: &[&str]| fragscope(args).expect_code(0).stdout();
    check(
        "fragscope.timeline/1",
        &out(&["timeline", "--json", "--max-points", "8", &oom]),
    );
    check("fragscope.oom/1", &out(&["oom", "--json", &oom]));
    check("fragscope.events/1", &out(&["events", "--json", &oom]));
    check(
        "fragscope.culprits/1",
        &out(&["culprits", "--json", &culprits]),
    );
    check("fragscope.simulate/1", &out(&["simulate", "--json", &oom]));
    check(
        "fragscope.diff/1",
        &out(&["diff", "--json", &worked, &frag]),
    );
    let r = fragscope([
        "check",
        "--no-config",
        "--format",
        "json",
        "--baseline",
        &worked,
        "--max-regression",
        "peak_reserved=5%",
        &frag,
    ]);
    check("fragscope.check/1", &r.stdout());
}

#[test]
fn explain_matches_the_docs() {
    let msg = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 6.75 MiB is free. Including non-PyTorch memory, this process has 79.13 GiB memory in use. Of the allocated memory 77.89 GiB is allocated by PyTorch, and 755.33 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
    let r = fragscope(["explain", "--json", msg])
        .expect_code(0)
        .stdout();
    check("fragscope.explain/1", &r);
}

#[test]
fn profiler_stats_match_the_docs() {
    let Some(dir) = real_dir() else { return };
    let trace = dir.join("tracelens_h100_bert-small_profile-memory.json.gz");
    let timeline = dir.join("hta_memory_timeline.raw.json.gz");
    let out = |p: &std::path::Path| {
        fragscope(["stats", "--json", &p.to_string_lossy()])
            .expect_code(0)
            .stdout()
    };
    check("fragscope.trace-stats/1", &out(&trace));
    check("fragscope.timeline-stats/1", &out(&timeline));
}
