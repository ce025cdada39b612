//! The `check` configuration parser (fragscope.toml).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fragscope_fuzz::check_config(data));
