//! The fuzz targets' invariants (fuzz/src/lib.rs), replayed on the committed
//! synthetic seeds, on every input a fuzzer ever found (fuzz/regressions/)
//! and on the real files of ../shared/real, so that `cargo test` on a stable
//! toolchain keeps what the fuzzers established.

#[path = "../../fuzz/src/lib.rs"]
mod invariants;

use std::path::{Path, PathBuf};

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `check` on one input and names the input when an invariant breaks.
fn replay(what: &str, path: &Path, bytes: &[u8], check: fn(&[u8])) {
    if let Err(e) = std::panic::catch_unwind(|| check(bytes)) {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{what} invariant broken on {}: {msg}", path.display());
    }
}

fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return None;
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

fn check_all(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "toml") {
        replay("check_config", path, &bytes, invariants::check_config);
        return;
    }
    let plain = gunzip(&bytes);
    let text = plain.as_deref().unwrap_or(&bytes);
    replay("pickle", path, text, invariants::check_pickle);
    if matches!(text.first(), Some(b'{') | Some(b'[')) {
        replay("json", path, text, invariants::check_json);
    }
    if bytes.len() as u64 <= invariants::FUZZ_MAX_INPUT {
        replay("load_bytes", path, &bytes, invariants::check_load_bytes);
        replay("replay", path, &bytes, invariants::check_replay);
    }
}

#[test]
fn synthetic_seeds_keep_every_invariant() {
    let seeds = files_in(&root().join("fuzz/seeds"));
    assert!(seeds.len() >= 10, "fuzz/seeds is missing");
    for p in &seeds {
        check_all(p);
    }
}

#[test]
fn fixtures_keep_every_invariant() {
    for dir in ["fixtures", "fixtures/culprits"] {
        for p in files_in(&root().join(dir)) {
            check_all(&p);
        }
    }
}

#[test]
fn inputs_the_fuzzers_found_stay_fixed() {
    for target in [
        "pickle",
        "json",
        "profiler",
        "load_bytes",
        "check_config",
        "replay",
    ] {
        let check: fn(&[u8]) = match target {
            "pickle" => invariants::check_pickle,
            "json" | "profiler" => invariants::check_json,
            "check_config" => invariants::check_config,
            "replay" => invariants::check_replay,
            _ => invariants::check_load_bytes,
        };
        for p in files_in(&root().join("fuzz/regressions").join(target)) {
            let bytes = std::fs::read(&p).unwrap();
            replay(target, &p, &bytes, check);
        }
    }
}

/// Real files above this size only have to decode in a debug build (their
/// round trips take minutes there); `FRAGSCOPE_FULL_ROUNDTRIP=1` checks
/// every file in full.
const ROUND_TRIP_MAX: u64 = 1 << 20;

#[test]
fn real_snapshots_round_trip_through_json_and_messagepack() {
    let real = root().join("../shared/real");
    if !real.is_dir() {
        eprintln!("note: ../shared/real is absent; skipping the real-file round trips");
        return;
    }
    let full = std::env::var_os("FRAGSCOPE_FULL_ROUNDTRIP").is_some_and(|v| v == "1");
    let mut n = 0;
    for p in files_in(&real) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".md") || name.ends_with(".txt") {
            continue;
        }
        if full || std::fs::metadata(&p).unwrap().len() <= ROUND_TRIP_MAX {
            check_all(&p);
        }
        if name.ends_with(".pickle") || name.ends_with(".pkl") {
            // Every real snapshot decodes: the invariants above ran on a
            // model, not on an error.
            let bytes = std::fs::read(&p).unwrap();
            fragscope::input::load_bytes(&bytes, &name).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 20, "only {n} real snapshots found");
}
