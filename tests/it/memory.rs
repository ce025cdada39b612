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
