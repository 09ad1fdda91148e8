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
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, StringArray};
//! use arrow::record_batch::RecordBatch;
//! use gpu_parquet::io::{IoBackend, host::HostBackend};
//! use gpu_parquet::{ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
//!
//! // A small file with two columns and two row groups.
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("small.parquet");
//! let batch = RecordBatch::try_from_iter([
//!     ("id", Arc::new(Int64Array::from_iter_values(0..100)) as _),
//!     ("name", Arc::new(StringArray::from_iter_values((0..100).map(|i| format!("n{i}")))) as _),
//! ])?;
//! let props = parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(50)).build();
//! let mut writer = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path)?, batch.schema(), Some(props))?;
//! writer.write(&batch)?;
//! writer.close()?;
//!
//! // Plan the bytes of column `id` in row group 1, fetch exactly them, decode them.
//! let source = ParquetSource::open(&path)?;
//! let plan = ReadPlan::build(
//!     &source,
//!     &Projection::Names(vec!["id".into()]),
//!     &RowGroupSelection::Indices(vec![1]),
//!     PlanOptions::default(),
//! )?;
//! assert_eq!(plan.chunks.len(), 1);
//! let fetched = HostBackend::new(2)?.fetch(&source, &plan)?;
//! let report = gpu_parquet::report::ReadReport::build("small.parquet", &plan, &fetched.log);
//! assert_eq!(report.useful_bytes, plan.chunks[0].len);
//! let table = gpu_parquet::decode::host::decode_fetched(&source, &plan, &fetched.buffer, 2)?;
//! let ids = table.concat()?;
//! assert_eq!(ids.num_rows(), 50);
//! let first = ids.column(0).as_any().downcast_ref::<Int64Array>().map(|a| a.value(0));
//! assert_eq!(first, Some(50));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod bench;
pub mod check;
pub mod decode;
pub mod error;
pub mod gpu;
pub mod inspect;
pub mod io;
pub mod ipc_file;
pub mod metadata;
pub mod panic_guard;
pub mod plan;
pub mod report;

pub use error::{Error, Location, Result};
pub use metadata::ParquetSource;
pub use plan::{PlanOptions, Projection, ReadPlan, RowGroupSelection};
