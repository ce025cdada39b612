//! Peak memory of the commands that replay a whole trace, measured per
//! child by GNU time ([`peak_rss`]): bounds, never timings. `stats` holds
//! the decoded model and nothing of its size beside it, so it is the
//! yardstick; a command that kept a figure per event in its expanded form
//! (a `Sample` is 112 bytes, the replay's compact series about 10) would
//! pass it by most of the file's size.

use crate::util::*;

/// `check` reads its figures off the compact series, and `diff` drops the
/// first run's trace once its call sites are read: both stay within a
/// quarter of the file's size above `stats`. They used to expand the series
/// of every event (`check` 0.8 times the file above `stats`) and `diff` held
/// both traces and both expanded series (1.3 times the file above it).
#[test]
fn check_and_diff_keep_no_expanded_series() {
    let d = tempfile::tempdir().unwrap();
    // 150 000 events: about 21 MB.
    let (input, size) = generated_snapshot(d.path(), 150_000);
    let f = input.as_os_str();
    let (code, stats) = peak_rss(["stats".as_ref(), f]);
    assert_eq!(code, 0);
    let bound = stats + size / 4;
    for (name, args) in [
        ("check", vec!["check".as_ref(), f, "--no-config".as_ref()]),
        ("diff", vec!["diff".as_ref(), f, f]),
    ] {
        let (code, rss) = peak_rss(args);
        assert!(code == 0 || code == 1, "{name} exited with {code}");
        assert!(
            rss <= bound,
            "{name}: peak RSS {rss} bytes over {bound} (stats {stats}, a {size}-byte input)"
        );
    }
}

/// `view -o` writes its page as the data is serialized and replays only to
/// the key moments (no state checkpoints): its peak stays within the
/// input's size plus 80 MiB (the process and the page's script, buffers,
/// and the key moments' segment maps). On the fragmented shape, whose
/// states hold thousands of segments, it was the data document built whole
/// as a `serde_json::Value` and the checkpoints of every 4096 events:
/// 2.3 times a 300 MB file, and 338 MiB for the 48 MB input of this test
/// (108 MiB now, release build).
#[test]
fn view_page_within_the_input_size() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("fragmented.pickle");
    let o = fragscope::synth::SynthOptions {
        events: 250_000,
        shape: fragscope::synth::Shape::Fragmented,
        ..Default::default()
    };
    std::fs::write(&input, synthetic_pickle(&o)).unwrap();
    let size = std::fs::metadata(&input).unwrap().len();
    let page = d.path().join("page.html");
    let (code, rss) = peak_rss([
        "view".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(code, 0);
    assert!(std::fs::metadata(&page).unwrap().len() > 0);
    let bound = size + (80 << 20);
    assert!(
        rss <= bound,
        "view -o: peak RSS {rss} bytes over {bound} (a {size}-byte input)"
    );
}
