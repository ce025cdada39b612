//! The JSON reader (snapshots; profiler traces once their reader lands).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fragscope_fuzz::check_json(data));
