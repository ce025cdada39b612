//! The pickle VM and the schema layer, with the round trips.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fragscope_fuzz::check_pickle(data));
