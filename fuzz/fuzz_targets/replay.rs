//! The replay stage on every model the loader decodes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fragscope_fuzz::check_replay(data));
