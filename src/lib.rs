//! # gpu-parquet
//!
//! Loads Parquet columns onto NVIDIA GPUs, and says honestly how every byte got there.
//!
//! Most users need only the [`Reader`]:
//!
//! ```
//! use gpu_parquet::{BackendKind, Reader};
//!
//! let reader = Reader::builder("testdata/flat_snappy_dict.parquet")
//!     .with_columns(["id", "f64"])
//!     .with_backend(BackendKind::Host) // leave at Auto to load onto the GPU where there is one
//!     .build()?;
//! let chunks = reader.read()?; // column chunks in (device) memory, and the per-column path report
//! for column in &chunks.report().columns {
//!     println!("{}: {} bytes", column.column_path, column.counts.total_bytes());
//! }
//! let table = chunks.decode()?; // Arrow record batches on the host
//! assert_eq!(table.num_rows(), 2400);
//! // `arrow` is re-exported: no arrow dependency of your own to keep in step.
//! let first: &gpu_parquet::arrow::record_batch::RecordBatch = &table.batches[0];
//! assert_eq!(first.num_columns(), 2);
//! # Ok::<(), gpu_parquet::Error>(())
//! ```
//!
//! The layers, each pointing only down:
//! - [`gpu`]: the device layer (contexts, streams, owned device and pinned memory, cuFile); knows
//!   nothing of Parquet.
//! - [`metadata`] and [`plan`]: the validated footer, and pure planning (metadata in, byte ranges out).
//! - [`io`]: backends executing a plan (host, staged, cuFile, and the `auto` decorator), each logging
//!   the path every read took and why.
//! - [`report`] (per-column counters by path) and [`decode`] (fetched bytes into Arrow arrays).
//! - [`scan`]: the one driver of reads (steps under a memory budget, fetched ahead, each ending in
//!   raw chunks, host batches or device columns); [`reader`]: the builder and scan spec over it.
//!   [`config`] holds the policy and the one environment read.
#![warn(missing_docs)]
// Doc comments name internals for maintainers (`cargo doc --document-private-items` links them).
#![allow(rustdoc::private_intra_doc_links)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod bench;
pub mod byte_size;
pub mod check;
pub mod config;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod dataset;
pub mod decode;
pub mod device_ffi;
pub mod device_read;
pub mod error;
pub mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)] // the fuzz targets' hooks
pub mod fuzzing;
pub mod gpu;
pub mod inspect;
pub mod io;
pub mod ipc_file;
pub mod metadata;
pub mod multi_device;
pub mod panic_guard;
pub mod plan;
pub mod reader;
pub mod report;
pub mod scan;
pub(crate) mod shares;
pub(crate) mod trace;

/// The `arrow` crate this one is built on (its types are those of every decoded table), so that a user
/// needs no version of their own in step with ours.
pub use arrow;
pub use byte_size::ByteSize;
pub use config::{BackendKind, CompatMode, IoPolicy, Settings, SnappyDecoders, Tuning, ZstdDecoders};
pub use error::{Error, Location, Result};
pub use metadata::ParquetSource;
pub use plan::{PlanOptions, Projection, ReadPlan, RowGroupSelection};
pub use reader::{ChunkStream, ColumnChunks, HostRead, Progress, Reader, ReaderBuilder};
pub use scan::{Decode, MemoryBudget, Scan, StepOutput};

/// Says why a test skips, on stderr past the test harness's capture (which takes `print!`/`eprint!`
/// only), so the reason shows in a plain `cargo test` run, as on CI.
/// Test support: writes `batch` to a Parquet file at `path` with arrow-rs (`props`, or its defaults).
#[cfg(test)]
pub(crate) fn write_test_file(
    path: &std::path::Path,
    batch: &arrow::record_batch::RecordBatch,
    props: Option<parquet::file::properties::WriterProperties>,
) {
    let file = std::fs::File::create(path).expect("create");
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), props).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
}

#[cfg(test)]
pub(crate) fn test_skip(reason: &str) {
    use std::io::Write;
    let test = std::thread::current()
        .name()
        .map(|n| format!("{n}: "))
        .unwrap_or_default();
    let _ = writeln!(std::io::stderr(), "{test}skipped: {reason}");
}
