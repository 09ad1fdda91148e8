#![no_main]
//! See `gpu_parquet::fuzzing::whole_file`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_parquet::fuzzing::whole_file(data));
