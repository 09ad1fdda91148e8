//! # gpu-parquet
//!
//! Loads Parquet columns onto NVIDIA GPUs, and says honestly how every byte got there.
//!
//! The pipeline, one module per stage:
//! 1. [`metadata`]: open a file, read its footer with `parquet`, validate every column chunk's byte
//!    range against the file size.
//! 2. [`plan`]: pure planning, metadata in and byte ranges out: the column chunks a projection and
//!    row-group selection need, coalesced into spans and split into I/O tasks.
//! 3. [`io`]: backends that execute a plan (host `pread`s; on a GPU machine cuFile and a staged
//!    pinned-buffer path), each logging the path every read took and why.
//! 4. [`report`]: per-column and per-column-chunk counters (bytes, reads, time, GB/s by path) as a
//!    table or JSON.
//! 5. [`decode`]: decoding the fetched bytes into Arrow arrays.
#![warn(missing_docs)]

pub mod bench;
pub mod check;
pub mod decode;
pub mod error;
pub mod gpu;
pub mod inspect;
pub mod io;
pub mod metadata;
pub mod panic_guard;
pub mod plan;
pub mod report;

pub use error::{Error, Location, Result};
pub use metadata::ParquetSource;
pub use plan::{PlanOptions, Projection, ReadPlan, RowGroupSelection};
