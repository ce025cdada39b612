//! `fragscope convert`: reading the output back yields the identical model,
//! for every fixture and every real snapshot, through JSON and MessagePack.

mod util;
use fragscope::input::{LoadOptions, load_snapshot};
use util::*;

fn roundtrip(path: &str) {
    let opts = LoadOptions::default();
    let (orig, _) = load_snapshot(path, &opts).unwrap();
    let d = tempfile::tempdir().unwrap();
    for ext in ["json", "msgpack"] {
        let out = d
            .path()
            .join(format!("out.{ext}"))
            .to_string_lossy()
            .into_owned();
        run(["convert", path, "-o", &out]).expect_code(0);
        let (back, l) = load_snapshot(&out, &opts).unwrap();
        assert_eq!(back, orig, "{path} via {ext} ({})", l.format);
    }
}

#[test]
fn fixtures_round_trip() {
    for f in [
        "worked_example_proto2.pickle",
        "fragmented.json",
        "legacy_history_list_proto3.pickle",
        "pools_pending_proto4.pickle",
        "expandable_oom_proto5.pickle",
        "cpp_frames_2_0_proto0.pickle",
        "memory_viz_page.html",
        "pickle_named.json.gz",
    ] {
        roundtrip(&fixture(f));
    }
}

/// In memory through the library (the command itself is covered above).
#[test]
fn real_snapshots_round_trip() {
    use fragscope::encode::{to_json_bytes, to_msgpack_bytes};
    use fragscope::input::{Content, load_bytes};
    let opts = LoadOptions::default();
    for f in real_files(&[".pickle", ".pkl"]) {
        let path = f.to_string_lossy().into_owned();
        let (orig, _) = load_snapshot(&path, &opts).unwrap();
        for bytes in [to_json_bytes(&orig), to_msgpack_bytes(&orig)] {
            let Content::Snapshot(back) = load_bytes(&bytes, "round trip").unwrap().content else {
                panic!("{path}: not read back as a snapshot");
            };
            assert!(back == orig, "{path}: round trip changed the model");
        }
    }
}

#[test]
fn refuses_to_overwrite_its_input_and_unknown_extension() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snap.json");
    std::fs::copy(fixture("fragmented.json"), &p).unwrap();
    let before = std::fs::read(&p).unwrap();
    let ps = p.to_string_lossy().into_owned();
    let r = run(["convert", &ps, "-o", &ps]);
    r.expect_code(2);
    assert!(
        r.stderr().contains("refusing to write over an input"),
        "{}",
        r.stderr()
    );
    assert_eq!(std::fs::read(&p).unwrap(), before, "input untouched");
    let r = run([
        "convert",
        &ps,
        "-o",
        &d.path().join("x.bin").to_string_lossy(),
    ]);
    r.expect_code(2);
}
