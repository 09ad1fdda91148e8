//! Decoding fetched column-chunk bytes into Arrow arrays.

pub mod host;
