//! What the timing examples share (each uses some of it).
#![allow(dead_code)]

use fragscope::input::{self, LoadOptions, Loaded};
use fragscope::model::Snapshot;

/// User + system CPU seconds of this process so far (Linux; 0 elsewhere).
pub fn cpu() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line, in clock ticks (100 per second on
    // every Linux this runs on).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f
        .get(11..13)
        .map(|t| t.iter().filter_map(|x| x.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    ticks / 100.0
}

/// `FILE [ROUNDS]` of `name`'s command line (3 rounds when not given).
pub fn file_and_rounds(name: &str) -> (String, usize) {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| panic!("usage: {name} FILE [ROUNDS]"));
    let rounds = args
        .next()
        .map_or(3, |r| r.parse().expect("a number of rounds"));
    (path, rounds)
}

/// The snapshot in `path`, decoded whole.
pub fn load(path: &str) -> Loaded {
    input::load(path, &LoadOptions::default()).expect("a readable snapshot")
}

/// The snapshot `l` holds.
pub fn snapshot<'a>(l: &'a Loaded, path: &str) -> &'a Snapshot {
    match &l.content {
        input::Content::Snapshot(s) => s,
        _ => panic!("{path}: not a snapshot"),
    }
}
