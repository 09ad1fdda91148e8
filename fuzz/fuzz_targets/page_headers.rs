#![no_main]
//! See `gpu_parquet::fuzzing::page_headers`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_parquet::fuzzing::page_headers(data));
