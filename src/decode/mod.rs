//! Decoding fetched column-chunk bytes into Arrow arrays.
//!
//! [`host`] decodes on the CPU with arrow-rs, from the fetched bytes only; it is also the oracle other
//! decoders are checked against. [`decompress`] decompresses pages on the host, for every codec
//! arrow-rs reads (the fallback where nvCOMP cannot). [`layout`] holds the descriptors the GPU
//! kernels (`kernels/*.cu`) and their host implementations ([`host_kernels`]) share.

pub mod decompress;
pub(crate) mod exec;
pub(crate) mod exec_device;
pub mod gpu;
pub mod host;
#[doc(hidden)] // public for the integration tests only (docs/architecture.md)
pub mod host_headers;
#[doc(hidden)] // public for the integration tests only (docs/architecture.md)
pub mod host_kernels;
#[doc(hidden)] // public for the integration tests only (docs/architecture.md)
pub mod kernels;
#[doc(hidden)] // public for the integration tests only (docs/architecture.md)
pub mod layout;
#[doc(hidden)] // public for the integration tests only (docs/architecture.md)
pub mod pipeline;
pub mod row_filter;
pub(crate) mod snappy_route;
pub mod table;

pub use host::{DecodedTable, decode_fetched};
