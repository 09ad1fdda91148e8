//! Decoding fetched column-chunk bytes into Arrow arrays.
//!
//! [`host`] decodes on the CPU with arrow-rs, from the fetched bytes only; it is also the oracle other
//! decoders are checked against. [`decompress`] decompresses pages on the host, for every codec
//! arrow-rs reads (the fallback where nvCOMP cannot). [`layout`] holds the descriptors the GPU
//! kernels (`kernels/*.cu`) and their host implementations ([`host_kernels`]) share.

pub mod decompress;
pub mod exec;
pub mod exec_device;
pub mod gpu;
pub mod host;
pub mod host_headers;
pub mod host_kernels;
pub mod kernels;
pub mod layout;
pub mod pipeline;
pub mod row_filter;
pub mod snappy_route;
pub mod table;

pub use host::{DecodedTable, decode_fetched};
