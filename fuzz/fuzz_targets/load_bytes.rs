//! Everything `fragscope` does with a file's bytes: bounded decompression, sniffing, every decoder, `stats`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fragscope_fuzz::check_load_bytes(data));
