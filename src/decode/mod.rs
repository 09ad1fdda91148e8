//! Decoding fetched column-chunk bytes into Arrow arrays.
//!
//! [`host`] decodes on the CPU with arrow-rs, from the fetched bytes only; it is also the oracle other
//! decoders are checked against.

pub mod host;

pub use host::{DecodedTable, decode_fetched};
