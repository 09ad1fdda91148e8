#![no_main]
//! See `gpu_parquet::fuzzing::hybrid`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_parquet::fuzzing::hybrid(data));
