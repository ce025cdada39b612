//! Bad input: a one-line error naming the file and where, exit code 2, no
//! panic. One case per kind of damage.

use crate::util::*;

fn write_tmp(d: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let p = d.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

fn expect_error(path: &str, needle: &str) {
    let r = run(["stats", path]);
    r.expect_code(2);
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("fragscope: error: "), "{err}");
    assert!(err.contains(path), "names the file: {err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn truncated_pickle_names_the_byte_offset() {
    let d = tempfile::tempdir().unwrap();
    let full = std::fs::read(fixture("pools_pending_proto4.pickle")).unwrap();
    let p = write_tmp(&d, "t.pickle", &full[..full.len() / 2]);
    expect_error(&p, "byte ");
}

#[test]
fn not_a_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let p = write_tmp(&d, "notes.txt", b"hello, this is not a snapshot\n");
    expect_error(&p, "not a memory snapshot");
    let p = write_tmp(&d, "other.json", br#"{"hello": 1}"#);
    expect_error(&p, "not a memory snapshot");
}

#[test]
fn wrong_type_names_the_record_path() {
    let d = tempfile::tempdir().unwrap();
    let p = write_tmp(
        &d,
        "bad.json",
        br#"{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 2, "stream": 0},
            {"action": "alloc", "addr": "0x10", "size": 2, "stream": 0}]]}"#,
    );
    expect_error(&p, "device_traces[0][1].addr: expected an int, found str");
}

#[test]
fn length_prefix_beyond_the_end() {
    let d = tempfile::tempdir().unwrap();
    // BINUNICODE claiming 4 GiB − 1 bytes.
    let p = write_tmp(
        &d,
        "len.pickle",
        b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00X\xff\xff\xff\xffabc",
    );
    expect_error(&p, "runs past the end");
}

#[test]
fn absurd_nesting() {
    let d = tempfile::tempdir().unwrap();
    let mut json = "[".repeat(100_000);
    json.push_str(&"]".repeat(100_000));
    let p = write_tmp(&d, "deep.json", json.as_bytes());
    expect_error(&p, "recursion limit");
    let mut pk = vec![0x80, 4];
    pk.extend(std::iter::repeat_n(b']', 100_000));
    pk.extend(std::iter::repeat_n(b'a', 99_999));
    pk.push(b'.');
    let p = write_tmp(&d, "deep.pickle", &pk);
    expect_error(&p, "[0]: expected a dict, found list");
}

#[test]
fn code_execution_opcode_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = write_tmp(
        &d,
        "evil.pickle",
        b"\x80\x04\x8c\x05posix\x8c\x06system\x93\x8c\x02id\x85R.",
    );
    expect_error(&p, "refused opcode STACK_GLOBAL");
}

#[test]
fn missing_file() {
    expect_error("/nonexistent/snap.pickle", "cannot read");
}

#[test]
fn several_inputs_with_one_unreadable() {
    let r = run([
        "stats",
        &fixture("fragmented.json"),
        "/nonexistent/x.pickle",
    ]);
    r.expect_code(2);
    assert!(
        r.stdout().contains("fragmented.json"),
        "readable file reported: {}",
        r.stdout()
    );
    assert!(
        r.stderr().contains("/nonexistent/x.pickle"),
        "unreadable named: {}",
        r.stderr()
    );
}

/// `export_memory_timeline("x.html")` writes a page with the plot as a PNG
/// (fixtures/memory_timeline_image.html): recognised, refused as an image
/// with no data, and the files fragscope reads are named instead. A page
/// with neither a snapshot nor that image keeps the general refusal.
#[test]
fn memory_timeline_image_page_names_the_export_to_use() {
    let p = fixture("memory_timeline_image.html");
    expect_error(&p, "an export_memory_timeline HTML page");
    expect_error(&p, "PNG image, with no memory data to read");
    expect_error(&p, "export_memory_timeline(\"x.raw.json.gz\")");
    expect_error(&p, "(or \"x.json\")");
    // Not taken for a memory_viz page without its pickle.
    let err = run(["stats", p.as_str()]).stderr();
    assert!(!err.contains("without an embedded snapshot"), "{err}");
    // Every command that loads a file refuses it the same way.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.html").to_string_lossy().into_owned();
    for args in [
        vec!["report", p.as_str(), "-o", out.as_str()],
        vec!["check", "--no-config", p.as_str()],
        vec!["timeline", p.as_str()],
    ] {
        let r = run(&args);
        r.expect_code(2);
        let e = r.stderr();
        assert_eq!(e.lines().count(), 1, "{}: {e}", r.cmd);
        assert!(
            e.contains(&p) && e.contains("no memory data"),
            "{}: {e}",
            r.cmd
        );
    }
    let d = tempfile::tempdir().unwrap();
    let other = write_tmp(
        &d,
        "plain.html",
        b"<html><head><title>notes</title></head><body><img src='logo.svg'></body></html>",
    );
    expect_error(&other, "without an embedded snapshot");
}
