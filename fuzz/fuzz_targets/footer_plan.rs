#![no_main]
//! See `gpu_parquet::fuzzing::footer_plan`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_parquet::fuzzing::footer_plan(data));
