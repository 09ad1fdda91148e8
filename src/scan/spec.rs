//! What a scan reads: the [`Reader`]'s fields (the file's open source, its plan, the backend, the
//! budget and the decode asked for). The builder and the read methods are in `reader.rs` and
//! `device_read.rs`; the struct lives here, below them, so that the scan's GPU steps can take it.

use std::sync::Arc;

use crate::config::{IoPolicy, Tuning};
use crate::decode::gpu::{DecoderOptions, GpuDecoder};
use crate::io::select::AnyBackend;
use crate::metadata::ParquetSource;
use crate::plan::{Projection, ReadPlan};
use crate::scan::Decode;
use crate::scan::progress::ProgressHook;

/// A file opened and planned for reading. Cheap to share across threads (`&Reader` reads are
/// independent; the backend's threads and buffers are shared).
#[derive(Debug)]
pub struct Reader {
    pub(crate) source: ParquetSource,
    pub(crate) plan: Arc<ReadPlan>,
    pub(crate) columns: Projection,
    pub(crate) io: Arc<AnyBackend>,
    pub(crate) policy: IoPolicy,
    pub(crate) memory_limit: Option<u64>,
    pub(crate) decoder: DecoderOptions,
    pub(crate) decode_steps: Option<usize>,
    pub(crate) decode_threads: Option<usize>,
    pub(crate) progress: Option<ProgressHook>,
    /// Developer tuning, written in the report ([`crate::ReaderBuilder::with_tuning`]).
    pub(crate) tuning: Tuning,
    pub(crate) decode: Decode,
    pub(crate) gpu_decoder: std::sync::OnceLock<std::result::Result<Arc<GpuDecoder>, String>>,
    /// Issue 43's filter hook ([`crate::ReaderBuilder::with_filter`]).
    pub(crate) filter: crate::filter::SharedFilter,
    /// [`ReaderBuilder::with_filter_mode`](crate::ReaderBuilder::with_filter_mode).
    pub(crate) filter_mode: crate::filter::FilterMode,
    /// [`ReaderBuilder::with_filter_passes`](crate::ReaderBuilder::with_filter_passes).
    pub(crate) filter_passes: crate::filter::FilterPasses,
}
