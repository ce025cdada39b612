//! The floor plan, enforced: every `crate::…` path in src/ must point to its
//! own stage or a stage below it (docs/architecture.md, "Import rules"). A
//! new module must be given a stage here before the suite is green again.
//!
//! Stages, lowest first; stages on one line may not import each other:
//!
//! ```text
//! core                leaf helpers
//! model               typed data, size rules, moments
//! input | timeline    bytes → model | model → one timeline
//! sim                 the what-if allocator model
//! analysis            findings
//! synth               synthetic snapshots
//! pipeline | render   the stages run in order | findings → bytes
//! cli                 arguments → pipeline → render → files
//! ```
//!
//! Also checked: render never imports input, pipeline or synth; no file
//! outside the loader, output writing and cli opens files; no mutable
//! statics; no source file over 800 lines.

use crate::util::root;
use std::path::{Path, PathBuf};

/// (stage, rank); equal ranks may not import each other.
const STAGES: &[(&str, u32)] = &[
    ("core", 0),
    ("model", 1),
    ("input", 2),
    ("timeline", 2),
    ("sim", 3),
    ("analysis", 4),
    ("synth", 5),
    ("pipeline", 6),
    ("render", 6),
    ("cli", 7),
];

/// Files that may touch the file system: the loader, the output writer
/// and the commands.
const FS_ALLOWED: &[&str] = &["src/input/load.rs", "src/cli/"];

const MAX_LINES: usize = 800;

fn rank(stage: &str) -> Option<u32> {
    STAGES.iter().find(|(s, _)| *s == stage).map(|&(_, r)| r)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src/ readable") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The stage a file belongs to: its first folder under src/, or its stem
/// for a file at the top (`pipeline.rs`).
fn stage_of(rel: &str) -> String {
    let rest = rel.strip_prefix("src/").expect("under src/");
    match rest.split_once('/') {
        Some((dir, _)) => dir.to_string(),
        None => rest.trim_end_matches(".rs").to_string(),
    }
}

/// Source text without comments and string literals, so that a path named
/// in a doc comment or a message is not read as an import.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i + 1 < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r' && (b[i + 1..].starts_with(b"\"") || b[i + 1..].starts_with(b"#")) {
            // raw string r"…" or r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // a char literal such as '"' or '\n' (lifetimes have no closing quote)
            let mut j = i + 1;
            if b[j] == b'\\' {
                j += 2;
            } else {
                j += 1;
            }
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            i = j + 1;
            out.push_str("' '");
        } else {
            let ch = src[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Every stage named by a `crate::STAGE` path in the code, with its line.
fn imports(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `$crate::` inside a macro names this crate too.
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() {
                found.push((n + 1, name));
            }
            rest = after;
        }
    }
    found
}

fn violations() -> Vec<String> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(root())
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&f).expect("readable source");
        let lines = text.lines().count();
        if lines > MAX_LINES {
            bad.push(format!("{rel}: {lines} lines (at most {MAX_LINES})"));
        }
        if rel == "src/lib.rs" {
            continue;
        }
        let code = code_only(&text);
        if rel == "src/main.rs" {
            for line in code.lines() {
                if let Some(at) = line.find("fragscope::") {
                    let name = &line[at + "fragscope::".len()..];
                    if !(name.starts_with("cli") || name.starts_with("core::alloc")) {
                        bad.push(format!("{rel}: main uses fragscope::{name}"));
                    }
                }
            }
            continue;
        }
        let from = stage_of(&rel);
        let Some(from_rank) = rank(&from) else {
            bad.push(format!(
                "{rel}: the stage `{from}` has no place in the layers"
            ));
            continue;
        };
        for (line, to) in imports(&code) {
            if to == from {
                continue;
            }
            let Some(to_rank) = rank(&to) else {
                bad.push(format!("{rel}:{line}: crate::{to} is not a stage"));
                continue;
            };
            let render_forbidden = from == "render" && matches!(to.as_str(), "input" | "synth");
            if to_rank >= from_rank || render_forbidden {
                bad.push(format!("{rel}:{line}: {from} imports {to}"));
            }
        }
        let fs_ok = FS_ALLOWED.iter().any(|p| rel.starts_with(p));
        if !fs_ok {
            for (n, line) in code.lines().enumerate() {
                for needle in [
                    "std::fs",
                    "fs::File",
                    "File::open",
                    "File::create",
                    "fs::read",
                ] {
                    if line.contains(needle) && !is_test_code(&code, n) {
                        bad.push(format!("{rel}:{}: file-system access ({needle})", n + 1));
                    }
                }
            }
        }
        for (n, line) in code.lines().enumerate() {
            let t = line.trim_start();
            let is_static = t.starts_with("static ")
                || t.starts_with("pub static ")
                || t.starts_with("pub(crate) static ");
            let mutable = ["static mut", "Atomic", "Mutex", "RwLock", "Cell<"]
                .iter()
                .any(|m| t.contains(m));
            // The process's allocator is a static by necessity; it holds no state.
            if is_static && mutable && !rel.starts_with("src/core/alloc.rs") {
                bad.push(format!("{rel}:{}: mutable static", n + 1));
            }
        }
    }
    bad
}

/// Whether line `n` lies after a `#[cfg(test)]` module's start (tests may
/// write temporary files).
fn is_test_code(code: &str, n: usize) -> bool {
    code.lines()
        .take(n)
        .any(|l| l.trim_start().starts_with("#[cfg(test)]"))
}

#[test]
fn every_import_points_down_the_layers() {
    let bad = violations();
    assert!(
        bad.is_empty(),
        "{} breaches of the layering (docs/architecture.md):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_reader_sees_paths_only_in_code() {
    let code = code_only(
        "// crate::cli in a comment\nlet s = \"crate::cli\"; let c = '\"'; use crate::model::X;\n/* crate::render */ r#\"crate::cli\"#;",
    );
    let found = imports(&code);
    assert_eq!(found, vec![(2, "model".to_string())]);
}
