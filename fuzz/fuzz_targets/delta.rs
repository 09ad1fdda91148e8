#![no_main]
//! See `gpu_parquet::fuzzing::delta`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_parquet::fuzzing::delta(data));
