//! The JSON reader with a corpus of profiler Chrome traces and memory-timeline
//! exports (the `json` target's corpus is snapshots): same invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fragscope_fuzz::check_json(data));
