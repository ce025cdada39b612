//! Peak memory of the commands that replay a whole trace, measured per
//! child by GNU time ([`peak_rss`]): bounds, never timings. `stats` holds
//! the decoded model and nothing of its size beside it, so it is the
//! yardstick; a command that kept a figure per event in its expanded form
//! (a `Sample` is 112 bytes, the replay's compact series about 10) would
//! pass it by most of the file's size.

use crate::util::*;

/// `check` reads its figures off the compact series: it stays within a
/// quarter of the file's size above `stats` (it used to expand the series
/// of every event, 0.8 times the file above `stats`). `diff` loads its two
/// inputs at once, one on each core, and drops each run's trace once its
/// call sites are read: it stays within the sum of the two inputs' sizes
/// (it used to hold both traces and both expanded series).
#[test]
fn check_and_diff_keep_no_expanded_series() {
    let d = tempfile::tempdir().unwrap();
    // 150 000 events: about 21 MB.
    let (input, size) = generated_snapshot(d.path(), 150_000);
    let f = input.as_os_str();
    let (code, stats) = peak_rss(["stats".as_ref(), f]);
    assert_eq!(code, 0);
    for (name, args, bound) in [
        (
            "check",
            vec!["check".as_ref(), f, "--no-config".as_ref()],
            stats + size / 4,
        ),
        ("diff", vec!["diff".as_ref(), f, f], size + size),
    ] {
        let (code, rss) = peak_rss(args);
        assert!(code == 0 || code == 1, "{name} exited with {code}");
        assert!(
            rss <= bound,
            "{name}: peak RSS {rss} bytes over {bound} (stats {stats}, a {size}-byte input)"
        );
    }
}
