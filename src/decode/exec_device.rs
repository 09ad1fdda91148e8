//! The GPU executor: device memory on one stream, the NVRTC-compiled kernels, nvCOMP.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytemuck::Pod;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use parquet::basic::Compression;
use rayon::prelude::*;

use crate::config::{SnappyDecoders, ZstdDecoders};
use crate::decode::exec::{Decompress, DecompressedOn, Executor, Kernel, PageKernel, PageShape};
use crate::decode::layout::{
    UnsnapItem, VALIDATE_WARPS, ValidateItem, WsnapItem, snappy_literals, validate_codec, validate_segments,
    validate_status, wsnap,
};
use crate::error::{Error, Result};
use crate::gpu::nvcomp::{BatchTransfers, Codec, CopyEngineTransfers, DecompressItem, Nvcomp};
use crate::gpu::nvrtc::KernelModule;
use crate::gpu::{DeviceBuffer, Event, MappedStaging, Stream, cuda_err, guard};

/// Threads per block of the page kernels (a block per page, or several: [`page_kernel_slices`]).
const PAGE_BLOCK: u32 = 256;
/// Level entries a block of the slot scan takes (`SLOT_TILE` in nested.cu).
const SLOT_TILE: u64 = 4096;

/// Bytes of mapped host memory an executor moves its descriptors and small results through. A step
/// of the whole plain benchmark file moves under 1 MiB at once; anything larger (host-decoded columns,
/// bodies read back for the host decompressor) goes through the copy engines, where bandwidth matters.
pub(crate) const STAGING_BYTES: usize = 4 << 20;

/// Mapped host memory put aside by finished executors, for the next ones (allocating page-locked
/// memory costs far more than a step's transfers).
pub(crate) type StagingPool = Arc<Mutex<Vec<MappedStaging>>>;

/// Blocks for the transfer kernels: enough to keep PCIe and memory busy, few enough to launch at once.
fn transfer_grid(bytes: u64) -> u32 {
    bytes.div_ceil(256 * 16).clamp(1, 1024) as u32
}

/// A step's fetched chunks as its executor holds them.
#[derive(Debug)]
pub(crate) enum StepChunks<'a> {
    /// None (the row filter's executors), or freed once read no more.
    None,
    /// Lent by their owner, which frees them (bench's decode alone, a two-pass read's first pass).
    Borrowed(&'a DeviceBuffer<u8>),
    /// Handed over by a read's step: freed as soon as the step reads them no more.
    Owned(DeviceBuffer<u8>),
}

impl StepChunks<'_> {
    pub(crate) fn buffer(&self) -> Option<&DeviceBuffer<u8>> {
        match self {
            StepChunks::None => None,
            StepChunks::Borrowed(b) => Some(b),
            StepChunks::Owned(b) => Some(b),
        }
    }
}

/// Runs a decode step on one GPU.
#[derive(Debug)]
pub(crate) struct DeviceExecutor<'a> {
    stream: Stream,
    kernels: Arc<KernelModule>,
    nvcomp: std::result::Result<Arc<Nvcomp>, String>,
    /// The fetched chunks (read-only here).
    chunks: StepChunks<'a>,
    owned: BTreeMap<u64, DeviceBuffer<u8>>,
    live_bytes: u64,
    peak_bytes: u64,
    /// Whether bodies are checked before nvCOMP sees them.
    precheck: bool,
    /// Mapped host memory for small transfers (`None`: they go through the copy engines), and the pool
    /// it returns to.
    staging: Option<(MappedStaging, StagingPool)>,
    /// Which GPU decoders take Snappy bodies.
    snappy: SnappyDecoders,
    zstd: ZstdDecoders,
    /// The count of steps its decoder is decoding at once, and this step's values (rows times leaf
    /// columns), for the Snappy route; `None`: routed as a step alone.
    side_by_side: Option<(&'a AtomicUsize, u64)>,
    /// The most device memory one nvCOMP batch of the step held beside the step's own allocations:
    /// the aligned copies of its inputs and the temporary memory nvCOMP asked for.
    nvcomp_scratch: u64,
}

impl<'a> DeviceExecutor<'a> {
    /// An executor on `stream` with `kernels` loaded, reading fetched chunks from `chunks`, using nvCOMP
    /// where it loaded (`Err`: why not, for the report).
    pub fn new(
        stream: Stream,
        kernels: Arc<KernelModule>,
        nvcomp: std::result::Result<Arc<Nvcomp>, String>,
        chunks: StepChunks<'a>,
    ) -> Self {
        DeviceExecutor {
            stream,
            kernels,
            nvcomp,
            chunks,
            owned: BTreeMap::new(),
            live_bytes: 0,
            peak_bytes: 0,
            precheck: true,
            staging: None,
            snappy: SnappyDecoders::default(),
            zstd: ZstdDecoders::default(),
            side_by_side: None,
            nvcomp_scratch: 0,
        }
    }

    /// Which GPU decoder takes Zstd bodies (default [`ZstdDecoders::Nvcomp`]).
    pub(crate) fn with_zstd(mut self, zstd: ZstdDecoders) -> Self {
        self.zstd = zstd;
        self
    }

    /// Which GPU decoders take Snappy bodies (default [`SnappyDecoders::Auto`]).
    pub(crate) fn with_snappy(mut self, snappy: SnappyDecoders) -> Self {
        self.snappy = snappy;
        self
    }

    /// Routes Snappy bodies knowing how many steps `decoding` counts at the time (this one among them),
    /// this one decoding `values` values.
    pub(crate) fn with_side_by_side(mut self, decoding: &'a AtomicUsize, values: u64) -> Self {
        self.side_by_side = Some((decoding, values));
        self
    }

    /// Moves descriptors and small results through mapped host memory from `pool` (or new), with the
    /// executor's own copy kernel, instead of the copy engines; put back into `pool` on drop. Stays on
    /// the copy engines where no mapped memory can be had.
    pub(crate) fn with_staging(mut self, pool: &StagingPool) -> Self {
        let reused = pool.lock().ok().and_then(|mut p| p.pop());
        let staging = match reused {
            Some(mut m) => m.reuse().ok().map(|_| m),
            None => MappedStaging::new(self.stream.context(), STAGING_BYTES).ok(),
        };
        self.staging = staging.map(|m| (m, pool.clone()));
        self
    }

    /// Queues `gp_copy_bytes(src, dst, n)`.
    fn copy_kernel(&self, src: u64, dst: u64, n: u64) -> Result<()> {
        self.launch_raw(
            "gp_copy_bytes",
            transfer_grid(n),
            256,
            &[Arg::U64(src), Arg::U64(dst), Arg::U64(n)],
        )
    }

    /// Writes `bytes` at `addr` through the mapped memory (staged there, copied by the SMs, in
    /// stream order). `false`, with nothing done, without mapped memory, when they exceed it, or when
    /// `addr` is not inside an owned allocation (the copy-engine path then says why).
    fn write_staged(&mut self, addr: u64, bytes: &[u8]) -> Result<bool> {
        let inside = self.owned.range(..=addr).next_back().is_some_and(|(&base, b)| {
            (addr - base)
                .checked_add(bytes.len() as u64)
                .is_some_and(|e| e <= b.len() as u64)
        });
        if bytes.is_empty() || !inside {
            return Ok(false);
        }
        let Some((mut staging, pool)) = self.staging.take() else {
            return Ok(false);
        };
        let done = staging.stage(&self.stream, bytes).and_then(|src| match src {
            Some(src) => self.copy_kernel(src, addr, bytes.len() as u64).map(|_| true),
            None => Ok(false),
        });
        self.staging = Some((staging, pool));
        done
    }

    /// `len` bytes at `addr` through the mapped memory: copied there by the SMs, read once the stream
    /// has finished. `None` without mapped memory, when they exceed it, or when the range is not inside
    /// an allocation of the step (the copy-engine path then says why).
    fn read_staged(&mut self, addr: u64, len: u64) -> Result<Option<Vec<u8>>> {
        if len == 0 || self.find(addr, len).is_none() {
            return Ok(None);
        }
        let Some((mut staging, pool)) = self.staging.take() else {
            return Ok(None);
        };
        let read = (|| {
            let Some((at, dst)) = staging.reserve(&self.stream, len as usize)? else {
                return Ok(None);
            };
            self.copy_kernel(addr, dst, len)?;
            staging.read_and_recycle(&self.stream, at, len as usize).map(Some)
        })();
        self.staging = Some((staging, pool));
        read
    }

    /// Whether compressed bodies are checked on the GPU before nvCOMP sees them (default: yes).
    pub(crate) fn with_precheck(mut self, on: bool) -> Self {
        self.precheck = on;
        self
    }

    /// Most bytes this executor held at once (outputs handed over included).
    pub(crate) fn peak_bytes(&self) -> u64 {
        self.peak_bytes
    }

    /// The allocation holding `[addr, addr + len)`, and the offset of `addr` in it.
    fn find(&self, addr: u64, len: u64) -> Option<(&DeviceBuffer<u8>, usize)> {
        let inside = |b: &DeviceBuffer<u8>| {
            let base = b.device_address();
            (addr >= base && addr.checked_add(len)? <= base + b.len() as u64).then_some((addr - base) as usize)
        };
        if let Some((_, b)) = self.owned.range(..=addr).next_back()
            && let Some(off) = inside(b)
        {
            return Some((b, off));
        }
        self.chunks.buffer().and_then(|b| inside(b).map(|off| (b, off)))
    }

    fn outside(addr: u64, len: u64) -> Error {
        Error::device(
            "GPU decoder",
            format!("{len} bytes at {addr:#x} lie outside every allocation of the step"),
        )
    }

    /// A new allocation of `bytes` bytes (at least 1: every address handed out is a real one), not
    /// zeroed.
    fn alloc_raw(&mut self, bytes: usize) -> Result<u64> {
        let b = DeviceBuffer::<u8>::alloc_pooled(&self.stream, bytes.max(1))?;
        let addr = b.device_address();
        self.live_bytes += b.len() as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
        self.owned.insert(addr, b);
        Ok(addr)
    }

    fn launch_raw(&self, name: &str, grid: u32, block: u32, args: &[Arg]) -> Result<()> {
        self.launch_on(&self.stream, name, grid, block, args)
    }

    /// [`Self::launch_raw`] on `stream`: the step's, or a side stream ordered after the step's work
    /// that made the arguments' buffers ([`Self::wide_unsnap_start`]).
    fn launch_on(&self, stream: &Stream, name: &str, grid: u32, block: u32, args: &[Arg]) -> Result<()> {
        if grid == 0 {
            return Ok(());
        }
        let f = self.kernels.function(name)?;
        guard("launching a kernel", || {
            stream.context().bind()?;
            let cuda = stream.cuda();
            let mut b = cuda.launch_builder(&f);
            for a in args {
                match a {
                    Arg::U32(v) => b.arg(v),
                    Arg::U64(v) => b.arg(v),
                };
            }
            let cfg = LaunchConfig {
                grid_dim: (grid, 1, 1),
                block_dim: (block, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: every address argument is inside an allocation of this executor or the borrowed
            // chunk buffer (the pipeline made them here), all of which outlive the stream's work
            // (dropping a buffer synchronises its stream first; a side stream's launches wait for the
            // step's work that made their buffers, and it is joined to the step's stream, or waited
            // for, before those are freed: `wide_unsnap_batch`, `WideInFlight`); the kernels bound
            // every access by the lengths in the descriptors, which the pipeline sized to those
            // allocations; the argument list matches the kernel's parameter list in kernels/*.cu.
            unsafe { b.launch(cfg) }
                .map(|_| ())
                .map_err(cuda_err(format!("launching {name}")))
        })
    }
}

impl BatchTransfers for DeviceExecutor<'_> {
    fn upload_words(&mut self, words: &[u64]) -> Result<u64> {
        self.upload(words)
    }

    fn read_words(&mut self, addr: u64, count: usize) -> Result<Vec<u64>> {
        self.read(addr, count)
    }

    fn release(&mut self, addr: u64) {
        self.free(addr);
    }
}

impl Drop for DeviceExecutor<'_> {
    fn drop(&mut self) {
        // The mapped memory goes back behind the work queued on it (the next user waits for that).
        if let Some((mut staging, pool)) = self.staging.take() {
            if staging.set_aside(&self.stream).is_err() {
                // No event behind the work: wait for the stream itself before anyone reuses or frees it.
                let _ = self.stream.synchronize();
            }
            if let Ok(mut p) = pool.lock() {
                p.push(staging);
            }
        }
    }
}

enum Arg {
    U32(u32),
    U64(u64),
}

fn page_kernel_names(kind: PageKernel) -> &'static [&'static str] {
    match kind {
        PageKernel::Setup => &["gp_page_setup"],
        PageKernel::Levels => &["gp_levels"],
        PageKernel::DictIndices => &["gp_dict_indices"],
        PageKernel::DeltaBinaryPacked => &["gp_delta_binary_packed"],
        PageKernel::ByteStreamSplit => &["gp_byte_stream_split"],
        PageKernel::GatherFixed => &["gp_gather_fixed"],
        // Launched with its chains, apart.
        PageKernel::ByteArrayValues => &[],
        PageKernel::DeltaLengthByteArray => &["gp_delta_length_byte_array"],
        PageKernel::DeltaByteArrayLengths => &["gp_delta_byte_array_lengths"],
        PageKernel::DeltaByteArrayFixed => &["gp_delta_byte_array_fixed"],
        PageKernel::StringOffsets => &[],
        PageKernel::CopyStrings => &["gp_copy_strings"],
        PageKernel::DeltaByteArrayCopy => &["gp_delta_byte_array_copy"],
    }
}

/// Blocks a page kernel gives each page (`page_slice` in `kernels/core_util.cuh`), as many as the
/// largest string page can use: one a page for most. `gp_copy_strings` with one block a page took as
/// long as one thread's way through a page's rows, value after value (0.35 ms a step of the plain
/// benchmark file, 20,000-row pages, in ncu); a page's blocks take its rows 256 at a time, round robin,
/// about [`COPY_ROWS_PER_BLOCK`] each. Every other page's blocks end at once, so no more than needed.
fn page_kernel_slices(kind: PageKernel, largest_strings: PageShape) -> u32 {
    match kind {
        PageKernel::CopyStrings => largest_strings.rows.div_ceil(COPY_ROWS_PER_BLOCK).clamp(1, 16),
        PageKernel::ByteArrayValues => byte_array_values_slices(largest_strings),
        _ => 1,
    }
}

/// Rows of a string page one block of `gp_copy_strings` takes (see [`page_kernel_slices`]).
const COPY_ROWS_PER_BLOCK: u32 = 2048;

/// Blocks `gp_byte_array_values` gives each page: one per 128 KiB tile of the largest plain page's
/// walk, which they walk side by side (the blocks past a smaller page's last tile end at once), or one
/// per 8,192 values of a dictionary page; eight at most. One block walked its tiles one after the
/// other: 0.77 ms a step of the plain benchmark file (330 KB pages, 3 tiles), in ncu, the longest
/// kernel of the step.
fn byte_array_values_slices(largest_strings: PageShape) -> u32 {
    let tiles = largest_strings.bytes.div_ceil(WALK_TILE_BYTES);
    let values = u64::from(largest_strings.rows).div_ceil(8192);
    tiles.max(values).clamp(1, 8) as u32
}

/// Bytes of one tile of the plain byte-array walk (`WALK_TILE` ranges of `WALK_RANGE` bytes in
/// `kernels/strings.cu`, which asserts this value).
const WALK_TILE_BYTES: u64 = 256 * 512;

/// Bytes of a `WalkChain` (`kernels/strings.cu`, which asserts this size).
const WALK_CHAIN_BYTES: usize = 32;

/// The pre-check's codec number, for the codecs it checks.
fn validate_codec_of(codec: Compression) -> Option<u32> {
    Some(match codec {
        Compression::SNAPPY => validate_codec::SNAPPY,
        Compression::ZSTD(_) => validate_codec::ZSTD,
        Compression::LZ4_RAW => validate_codec::LZ4_RAW,
        Compression::GZIP(_) => validate_codec::GZIP,
        _ => return None,
    })
}

/// Scratch of one batch of the wide Snappy decoder: 5 bytes per output byte and an eighth of the
/// input, so about 50 MB of output a batch; a step's batches are held at once, until the join. It is
/// not in the step model's estimate; a step's measured peak includes it.
const WSNAP_BATCH_SCRATCH: u64 = 256 << 20;

/// The wide Snappy decoder's batches running on a side stream ([`DeviceExecutor::wide_unsnap_start`]).
/// Until joined to the step's stream it must end before the executor's buffers do: dropped unjoined
/// (an error on the way), it waits for the side stream.
struct WideInFlight {
    side: Stream,
    /// Recorded on `side` after the last batch's kernels.
    done: Event,
    batches: Vec<WideBatch>,
    joined: bool,
}

/// One batch in flight: its bodies (indices of the step's items) and its buffers, freed once it ended:
/// its descriptors (read back first), flags and scratch.
struct WideBatch {
    bodies: Vec<usize>,
    buffers: [u64; 3],
    /// `gp_unzstd_blocks`' batch (its items `UnsnapItem`s), not the wide Snappy decoder's.
    zstd: bool,
}

impl WideInFlight {
    fn new(ctx: &Arc<crate::gpu::GpuContext>) -> Result<Self> {
        Ok(WideInFlight {
            side: Stream::new(ctx)?,
            done: Event::new(ctx)?,
            batches: Vec::new(),
            joined: false,
        })
    }

    /// Makes what is launched on the side stream from now on wait for the work queued on `step` so far.
    fn follow(&self, step: &Stream) -> Result<()> {
        let ready = Event::new(step.context())?;
        step.record(&ready)?;
        self.side.wait(&ready)
    }
}

impl Drop for WideInFlight {
    fn drop(&mut self) {
        if !self.joined {
            // Nothing to report it to; the executor's buffers are freed after this returns.
            let _ = self.side.synchronize();
        }
    }
}

/// What a body refused on the GPU is checked against on the host ([`DeviceExecutor::describe_failures`]).
#[derive(Debug, Clone, Copy)]
enum HostCheck {
    /// The pre-check's host twin (`host_kernels::validate`): our Snappy decoders and the pre-check.
    Precheck,
    /// libzstd (`host_kernels::unzstd`): `gp_unzstd`.
    Libzstd,
}

/// Whether a body and its output are under 2 GiB: the offsets of our Snappy kernels are 32-bit.
fn offsets_fit_u31(d: &Decompress) -> bool {
    (d.src_len as u64) < 1 << 31 && (d.dst_len as u64) < 1 << 31
}

/// `items[todo]` as `gp_unsnap` and `gp_snappy_literals` take them.
fn unsnap_items(items: &[Decompress], todo: &[usize]) -> Vec<UnsnapItem> {
    todo.iter()
        .map(|&i| UnsnapItem {
            src: items[i].src,
            src_len: items[i].src_len as u64,
            dst: items[i].dst,
            dst_len: items[i].dst_len as u64,
            status: u32::MAX,
            block0: 0,
        })
        .collect()
}

/// The bodies of `todo`, in order, that `failed` (a check's or decoder's refusals) does not name.
fn passing(todo: &[usize], failed: &[(usize, u32)]) -> Vec<usize> {
    let refused: std::collections::BTreeSet<usize> = failed.iter().map(|&(i, _)| i).collect();
    todo.iter().copied().filter(|i| !refused.contains(i)).collect()
}

/// Orders page bodies longest first. A body's decoder (ours, the pre-check's walk, nvCOMP's) is a warp
/// or a block following one chain through it, so the step's time is at least its longest body's; the
/// blocks of a launch start in order, so the longest bodies go first rather than in a later wave.
fn longest_first(todo: &mut [usize], items: &[Decompress]) {
    todo.sort_by_key(|&i| std::cmp::Reverse(items[i].src_len));
}

impl DeviceExecutor<'_> {
    /// The Snappy bodies of `items` still without a result that the wide decoder takes: the longest
    /// where that shortens the batch (given the decoder the others go to), or every one when chosen.
    fn wide_snappy_bodies(
        &self,
        items: &[Decompress],
        results: &[Option<std::result::Result<usize, String>>],
        own_snappy: bool,
    ) -> Vec<usize> {
        use crate::config::WideSnappy;
        use crate::decode::snappy_route as route;
        let open: Vec<usize> = (0..items.len())
            .filter(|&i| results[i].is_none() && offsets_fit_u31(&items[i]))
            .collect();
        match self.snappy.wide() {
            WideSnappy::Off => Vec::new(),
            WideSnappy::All => open,
            WideSnappy::Longest => {
                let chain = if own_snappy {
                    route::CHAIN_NS_PER_BYTE_UNSNAP
                } else if self.precheck {
                    route::CHAIN_NS_PER_BYTE_PRECHECKED
                } else {
                    route::CHAIN_NS_PER_BYTE_NVCOMP
                };
                let bodies: Vec<(usize, usize)> = open.iter().map(|&i| (items[i].src_len, items[i].dst_len)).collect();
                let beside = self
                    .side_by_side
                    .map_or(route::SideBySide::ALONE, |(decoding, values)| {
                        route::SideBySide::new(decoding.load(Ordering::Relaxed).max(1), values)
                    });
                let wide = route::wide_bodies(&bodies, chain, beside);
                open.into_iter().zip(wide).filter(|&(_, w)| w).map(|(i, _)| i).collect()
            }
        }
    }

    /// Launches `gp_validate_compressed` over `items[todo]`: the items' address, for
    /// [`Self::body_statuses`] to read their statuses from, or the statuses at once where nothing is
    /// launched (no body; a codec the check does not know: every body fails).
    fn validate_launch(
        &mut self,
        codec: Compression,
        items: &[Decompress],
        todo: &[usize],
    ) -> Result<std::result::Result<u64, Vec<(usize, u32)>>> {
        let Some(id) = validate_codec_of(codec) else {
            return Ok(Err(todo.iter().map(|&i| (i, validate_status::BAD_HEADER)).collect()));
        };
        if todo.is_empty() {
            return Ok(Err(Vec::new()));
        }
        let mut v: Vec<ValidateItem> = todo
            .iter()
            .map(|&i| ValidateItem {
                src: items[i].src,
                src_len: items[i].src_len as u64,
                dst_len: items[i].dst_len as u64,
                codec: id,
                status: u32::MAX,
            })
            .collect();
        let g = validate_segments::PRODUCTION;
        let segs = validate_segments::plan(&mut v, g);
        // One buffer: the items (read back by body_statuses), the segments, their outs and their join
        // words (zero).
        let mut buf: Vec<u8> = bytemuck::cast_slice(&v).to_vec();
        let segs_at = buf.len() as u64;
        buf.extend_from_slice(bytemuck::cast_slice(&segs));
        let outs_at = buf.len() as u64;
        buf.resize(buf.len() + segs.len() * size_of::<validate_segments::SegmentOut>(), 0);
        let joins_at = buf.len() as u64;
        buf.resize(buf.len() + segs.len() * 4, 0);
        let addr = self.upload(&buf)?;
        // A lane per segment, then a warp per body, VALIDATE_WARPS warps a block.
        let warps = validate_segments::launch_warps(v.len(), segs.len());
        let args = [
            Arg::U64(addr),
            Arg::U32(v.len() as u32),
            Arg::U64(addr + segs_at),
            Arg::U32(segs.len() as u32),
            Arg::U64(addr + outs_at),
            Arg::U64(addr + joins_at),
            Arg::U32(g.seg_bytes),
            Arg::U32(g.overlap),
        ];
        self.launch_raw(
            "gp_validate_compressed",
            warps.div_ceil(VALIDATE_WARPS),
            32 * VALIDATE_WARPS,
            &args,
        )?;
        Ok(Ok(addr))
    }

    /// Launches `gp_snappy_literals` over `items[todo]` (Snappy bodies, each under 2 GiB): the items'
    /// address, for [`Self::body_statuses`]; `None` for no body.
    fn literals_launch(&mut self, items: &[Decompress], todo: &[usize]) -> Result<Option<u64>> {
        if todo.is_empty() {
            return Ok(None);
        }
        let mut v = unsnap_items(items, todo);
        let Some(grid) = snappy_literals::plan(&mut v) else {
            // Past a grid's blocks (some 140 TB of output): the other decoders take them all.
            return Ok(None);
        };
        self.launch_body_kernel("gp_snappy_literals", (grid, snappy_literals::THREADS), &v)
            .map(Some)
    }

    /// The bodies of `todo` that [`Self::literals_launch`] copied (`launched`, taken: read once),
    /// each given its result.
    fn literals_copied(
        &mut self,
        launched: &mut Option<u64>,
        todo: &[usize],
        items: &[Decompress],
        results: &mut [Option<std::result::Result<usize, String>>],
    ) -> Result<Vec<usize>> {
        let Some(addr) = launched.take() else {
            return Ok(Vec::new());
        };
        let refused = self.body_statuses::<UnsnapItem>(addr, todo, |b| b.status)?;
        let copied = passing(todo, &refused);
        for &i in &copied {
            results[i] = Some(Ok(items[i].dst_len));
        }
        Ok(copied)
    }

    /// Runs `gp_unsnap` over `items[todo]` (Snappy bodies, each under 2 GiB); the indices that failed,
    /// with their statuses (the pre-check's).
    fn unsnap(&mut self, items: &[Decompress], todo: &[usize]) -> Result<Vec<(usize, u32)>> {
        if todo.is_empty() {
            return Ok(Vec::new());
        }
        let v = unsnap_items(items, todo);
        // One block of 128 threads per body (the kernel traps on another size).
        self.run_body_kernel("gp_unsnap", (v.len() as u32, 128), &v, todo, |b| b.status)
    }

    /// Runs `gp_unzstd` over `items[todo]` (Zstd bodies, each under 2 GiB): the indices that failed,
    /// with their statuses.
    fn unzstd(&mut self, items: &[Decompress], todo: &[usize]) -> Result<Vec<(usize, u32)>> {
        if todo.is_empty() {
            return Ok(Vec::new());
        }
        let v = unsnap_items(items, todo);
        // One warp per body (the kernel traps on another size).
        self.run_body_kernel("gp_unzstd", (v.len() as u32, 32), &v, todo, |b| b.status)
    }

    /// Starts the wide Snappy decoder (`kernels/snappy_wide.cu`) over `items[todo]` (bodies and
    /// outputs under 2 GiB) on a stream of its own, so that it runs beside the pre-check and nvCOMP on
    /// the step's other bodies; [`Self::wide_unsnap_join`] ends it. (H200, snappy benchmark file,
    /// `bench --no-cold`, alternating in one call with the side stream waited for at once: decode alone
    /// 38.34 / 40.11 ms against 46.06 / 44.67 / 47.58 ms; file to device columns 58.73 / 60.94 against
    /// 60.67 / 60.92 / 66.47 ms.) Batches keep their scratch under [`WSNAP_BATCH_SCRATCH`] (a body
    /// over it goes alone), all of them held until the join; each is prepared on the step's stream,
    /// which the side stream then waits for.
    fn wide_unsnap_start(&mut self, items: &[Decompress], todo: &[usize]) -> Result<WideInFlight> {
        let mut w = WideInFlight::new(self.stream.context())?;
        let mut batch: Vec<usize> = Vec::new();
        let mut bytes = 0u64;
        for &i in todo {
            let s = wsnap::Scratch::of(items[i].src_len as u64, items[i].dst_len as u64).total();
            if !batch.is_empty() && bytes + s > WSNAP_BATCH_SCRATCH {
                self.wide_unsnap_batch(items, std::mem::take(&mut batch), &mut w)?;
                bytes = 0;
            }
            batch.push(i);
            bytes += s;
        }
        if !batch.is_empty() {
            self.wide_unsnap_batch(items, batch, &mut w)?;
        }
        w.side.record(&w.done)?;
        Ok(w)
    }

    /// One batch of [`Self::wide_unsnap_start`]: its descriptors, scratch and flags made on the step's
    /// stream, then its kernels launched on the side stream (after that preparation), as `layout::wsnap`
    /// describes.
    fn wide_unsnap_batch(&mut self, items: &[Decompress], batch: Vec<usize>, w: &mut WideInFlight) -> Result<()> {
        use Arg::{U32, U64};
        let mut v: Vec<WsnapItem> = batch
            .iter()
            .map(|&i| WsnapItem {
                src: items[i].src,
                src_len: items[i].src_len as u64,
                dst: items[i].dst,
                dst_len: items[i].dst_len as u64,
                ..Default::default()
            })
            .collect();
        let sized = wsnap::plan(&mut v, 0);
        // Every scratch byte a kernel reads is written first by an earlier one.
        let scratch = self.alloc_uninit(sized.scratch as usize)?;
        let plan = wsnap::plan(&mut v, scratch);
        let flags = self.alloc(plan.flag_words as usize * 4)?;
        let addr = self.upload(&v)?;
        // Kept before the launches: the join frees them on the step's stream after the side stream.
        w.batches.push(WideBatch {
            bodies: batch,
            buffers: [addr, flags, scratch],
            zstd: false,
        });
        w.follow(&self.stream)?;
        let side = w.side.clone();
        let n = v.len() as u32;
        let args = [U64(addr), U32(n)];
        self.launch_on(&side, "gp_wsnap_tabulate", plan.seg_blocks, 128, &args)?;
        self.launch_on(&side, "gp_wsnap_join", n, 32, &args)?;
        self.launch_on(&side, "gp_wsnap_emit", plan.seg_blocks, 128, &args)?;
        self.launch_on(&side, "gp_wsnap_finish", n, 32, &args)?;
        if plan.resolve {
            return self.launch_on(&side, "gp_wsnap_resolve", n, wsnap::RESOLVE_THREADS, &args);
        }
        for r in 0..plan.rounds {
            self.launch_on(
                &side,
                "gp_wsnap_jump",
                plan.byte_blocks,
                256,
                &[U64(addr), U32(n), U64(flags), U32(r)],
            )?;
        }
        self.launch_on(&side, "gp_wsnap_gather", plan.byte_blocks, 256, &args)
    }

    /// Starts `gp_unzstd_blocks` over `items[todo]` (Zstd bodies and outputs under 2 GiB) on a side
    /// stream, as [`Self::wide_unsnap_start`] starts the wide Snappy decoder, so that it runs beside
    /// the pre-check and nvCOMP on the step's other bodies; [`Self::wide_unsnap_join`] ends it. Each
    /// body's scratch (`layout::zstd_blocks`) follows the one before in one buffer.
    fn zstd_blocks_start(&mut self, items: &[Decompress], todo: &[usize]) -> Result<WideInFlight> {
        use crate::decode::layout::zstd_blocks;
        use Arg::{U32, U64};
        let mut w = WideInFlight::new(self.stream.context())?;
        let v = unsnap_items(items, todo);
        let sizes: Vec<u64> = todo
            .iter()
            .map(|&i| zstd_blocks::scratch_bytes(items[i].dst_len as u64))
            .collect();
        // Every scratch byte the kernel reads it wrote first.
        let scratch = self.alloc_uninit(sizes.iter().sum::<u64>() as usize)?;
        let mut at = scratch;
        let places: Vec<u64> = sizes
            .iter()
            .map(|s| {
                let p = at;
                at += s;
                p
            })
            .collect();
        let places_addr = self.upload(&places)?;
        let addr = self.upload(&v)?;
        w.batches.push(WideBatch {
            bodies: todo.to_vec(),
            buffers: [addr, places_addr, scratch],
            zstd: true,
        });
        w.follow(&self.stream)?;
        let side = w.side.clone();
        let n = v.len() as u32;
        // One warp per body (the kernel traps on another size); bodies it does not plan it decodes
        // whole, as `gp_unzstd`.
        self.launch_on(
            &side,
            "gp_unzstd_blocks",
            n,
            32,
            &[U64(addr), U32(n), U64(places_addr), U32(1)],
        )?;
        w.side.record(&w.done)?;
        Ok(w)
    }

    /// Ends [`Self::wide_unsnap_start`] or [`Self::zstd_blocks_start`]: the step's stream waits for the
    /// side stream, then the items are read back and the batches' buffers freed. The indices that
    /// failed, with their statuses (the pre-check's, or `gp_unzstd`'s).
    fn wide_unsnap_join(&mut self, mut w: WideInFlight) -> Result<Vec<(usize, u32)>> {
        self.stream.wait(&w.done)?;
        w.joined = true;
        let mut failed = Vec::new();
        for b in std::mem::take(&mut w.batches) {
            // Each body's status: the Snappy decoder's with its unresolved bytes, or gp_unzstd's.
            let statuses: Vec<u32> = if b.zstd {
                let back: Vec<UnsnapItem> = self.read(b.buffers[0], b.bodies.len())?;
                back.iter().map(|r| r.status).collect()
            } else {
                let back: Vec<WsnapItem> = self.read(b.buffers[0], b.bodies.len())?;
                back.iter()
                    .map(|r| match (r.status, r.unresolved) {
                        (validate_status::OK, 0) => validate_status::OK,
                        (validate_status::OK, _) => validate_status::UNRESOLVED,
                        (st, _) => st,
                    })
                    .collect()
            };
            for a in b.buffers {
                self.free(a);
            }
            failed.extend(
                b.bodies
                    .iter()
                    .zip(statuses)
                    .filter(|&(_, st)| st != validate_status::OK)
                    .map(|(&i, st)| (i, st)),
            );
        }
        Ok(failed)
    }

    /// Launches `kernel(items, n)` on `grid` blocks of `block` threads, and reads the items back: the
    /// indices of `todo` (one per item) whose status is not OK, with it.
    fn run_body_kernel<T: Pod>(
        &mut self,
        kernel: &str,
        launch: (u32, u32),
        items: &[T],
        todo: &[usize],
        status: impl Fn(&T) -> u32,
    ) -> Result<Vec<(usize, u32)>> {
        let addr = self.launch_body_kernel(kernel, launch, items)?;
        self.body_statuses(addr, todo, status)
    }

    /// Uploads `items` and launches `kernel(items, n)` on `grid` blocks of `block` threads: the items'
    /// address, for [`Self::body_statuses`].
    fn launch_body_kernel<T: Pod>(&mut self, kernel: &str, (grid, block): (u32, u32), items: &[T]) -> Result<u64> {
        let addr = self.upload(items)?;
        let n = items.len() as u32;
        self.launch_raw(kernel, grid, block, &[Arg::U64(addr), Arg::U32(n)])?;
        Ok(addr)
    }

    /// Reads back the items of [`Self::launch_body_kernel`] at `addr`, one per index of `todo`, and
    /// frees them: the indices whose status is not OK, with it.
    fn body_statuses<T: Pod>(
        &mut self,
        addr: u64,
        todo: &[usize],
        status: impl Fn(&T) -> u32,
    ) -> Result<Vec<(usize, u32)>> {
        let back: Vec<T> = self.read(addr, todo.len())?;
        self.free(addr);
        Ok(todo
            .iter()
            .zip(back)
            .map(|(&i, b)| (i, status(&b)))
            .filter(|&(_, st)| st != validate_status::OK)
            .collect())
    }

    /// Says how `failed` bodies failed a check on the GPU, and whether the host reference of the check
    /// (`check`) agrees (a page the GPU refuses but the reference passes would be a decoder bug, worth
    /// seeing).
    fn describe_failures(
        &mut self,
        codec: Compression,
        items: &[Decompress],
        failed: &[(usize, u32)],
        what: &str,
        check: HostCheck,
    ) -> Result<String> {
        let mut by: BTreeMap<&str, usize> = BTreeMap::new();
        for &(_, st) in failed {
            *by.entry(validate_status::describe(st)).or_default() += 1;
        }
        let id = validate_codec_of(codec).unwrap_or(0);
        let mut reference_passes = 0;
        for &(i, _) in failed.iter().take(16) {
            let body = self.read::<u8>(items[i].src, items[i].src_len)?;
            let want = items[i].dst_len as u64;
            reference_passes += usize::from(match check {
                HostCheck::Libzstd => crate::decode::host_kernels::unzstd::unzstd_one(&body, want).is_some(),
                HostCheck::Precheck => crate::decode::host_kernels::validate::validate_one(id, &body, want) == 0,
            });
        }
        let reference = match check {
            HostCheck::Libzstd => "libzstd takes",
            HostCheck::Precheck => "the host check passes",
        };
        Ok(format!(
            "{} page(s) {what} ({by:?}; {reference} {reference_passes} of the first {})",
            failed.len(),
            failed.len().min(16)
        ))
    }

    /// Decompresses `items[todo]` with nvCOMP. Inputs not aligned as the codec requires (page bodies
    /// start anywhere in a chunk) are first copied into an aligned scratch buffer.
    fn nvcomp_batch(
        &mut self,
        nv: &Nvcomp,
        codec: Codec,
        items: &[Decompress],
        todo: &[usize],
    ) -> Result<Vec<crate::gpu::nvcomp::DecompressOutcome>> {
        let align = nv.library().required_alignments(codec, nv.backend().opts())?;
        let a_in = align.input.max(1) as u64;
        let misaligned: Vec<usize> = todo
            .iter()
            .copied()
            .filter(|&i| !items[i].src.is_multiple_of(a_in))
            .collect();
        let mut srcs: Vec<u64> = items.iter().map(|d| d.src).collect();
        let mut scratch = None;
        if !misaligned.is_empty() {
            let total: u64 = misaligned
                .iter()
                .map(|&i| (items[i].src_len as u64).div_ceil(256) * 256)
                .sum();
            let mut buf = DeviceBuffer::<u8>::alloc_pooled(&self.stream, total as usize)?;
            let mut at = 0u64;
            let mut copies: Vec<u64> = Vec::with_capacity(3 * misaligned.len());
            for &i in &misaligned {
                let d = &items[i];
                let (src, off) = self
                    .find(d.src, d.src_len as u64)
                    .ok_or_else(|| Self::outside(d.src, d.src_len as u64))?;
                if self.staging.is_some() {
                    // Checked inside its allocation by `find`; copied below by the SMs, in one launch.
                    copies.extend([d.src, buf.device_address() + at, d.src_len as u64]);
                } else {
                    buf.copy_from_device(at as usize, src, off..off + d.src_len)?;
                }
                srcs[i] = buf.device_address() + at;
                at += (d.src_len as u64).div_ceil(256) * 256;
            }
            if !copies.is_empty() {
                let list = self.upload(&copies)?;
                let n = misaligned.len() as u32;
                self.launch_raw("gp_copy_batch", n, 256, &[Arg::U64(list), Arg::U32(n)])?;
                self.free(list);
            }
            scratch = Some(buf);
        }
        let batch: Vec<DecompressItem> = todo
            .iter()
            .map(|&i| DecompressItem {
                src: srcs[i],
                src_len: items[i].src_len,
                dst: items[i].dst,
                dst_capacity: items[i].dst_len,
            })
            .collect();
        let stream = self.stream.clone();
        let copied = scratch.as_ref().map_or(0, |b: &DeviceBuffer<u8>| b.len());
        let (outcomes, temp) = if self.staging.is_some() {
            nv.decompress_counted(codec, &stream, &batch, self)?
        } else {
            nv.decompress_counted(codec, &stream, &batch, &mut CopyEngineTransfers::new(&stream))?
        };
        drop(scratch);
        // Held beside the step's own allocations for the call: count it in the step's peak.
        let held = (copied + temp) as u64;
        self.nvcomp_scratch = self.nvcomp_scratch.max(held);
        self.peak_bytes = self.peak_bytes.max(self.live_bytes + held);
        Ok(outcomes)
    }
}

impl Executor for DeviceExecutor<'_> {
    type Buffer = DeviceBuffer<u8>;

    fn alloc(&mut self, bytes: usize) -> Result<u64> {
        let addr = self.alloc_raw(bytes)?;
        if self.staging.is_some() {
            // Zeroed by a kernel: a cuMemset may run on a copy engine, behind the staged reads.
            let n = bytes.max(1) as u64;
            self.launch_raw("gp_fill_zero", transfer_grid(n), 256, &[Arg::U64(addr), Arg::U64(n)])?;
        } else if let Some(b) = self.owned.get(&addr) {
            b.clear()?;
        }
        Ok(addr)
    }

    fn alloc_uninit(&mut self, bytes: usize) -> Result<u64> {
        if bytes == 0 {
            // The one byte an empty allocation gets is never written, but a take()n buffer's to_host()
            // copies it: zeroed, so compute-sanitizer's initcheck has no uninitialized copy to report.
            return self.alloc(0);
        }
        self.alloc_raw(bytes)
    }

    fn upload<T: Pod>(&mut self, items: &[T]) -> Result<u64> {
        let bytes: &[u8] = bytemuck::cast_slice(items);
        // Every byte is written next: no zeroing first.
        let addr = self.alloc_raw(bytes.len())?;
        self.write(addr, items)?;
        Ok(addr)
    }

    fn write<T: Pod>(&mut self, addr: u64, items: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(items);
        if self.write_staged(addr, bytes)? {
            return Ok(());
        }
        let (&base, buf) = self
            .owned
            .range_mut(..=addr)
            .next_back()
            .ok_or_else(|| Self::outside(addr, bytes.len() as u64))?;
        buf.write_at((addr - base) as usize, bytes)
    }

    fn read<T: Pod>(&mut self, addr: u64, count: usize) -> Result<Vec<T>> {
        let len = (count * std::mem::size_of::<T>()) as u64;
        let bytes = match self.read_staged(addr, len)? {
            Some(bytes) => bytes,
            None => {
                let (buf, off) = self.find(addr, len).ok_or_else(|| Self::outside(addr, len))?;
                buf.copy_range_to_host(off..off + len as usize)?
            }
        };
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    fn take(&mut self, addr: u64) -> Result<DeviceBuffer<u8>> {
        self.owned.remove(&addr).ok_or_else(|| Self::outside(addr, 0))
    }

    fn free(&mut self, addr: u64) {
        if let Some(b) = self.owned.remove(&addr) {
            self.live_bytes -= b.len() as u64;
        }
    }

    fn adopt(&mut self, buffer: DeviceBuffer<u8>) -> Result<u64> {
        // `take` left its bytes counted in `live_bytes`, which `free` takes off again.
        let addr = buffer.device_address();
        self.owned.insert(addr, buffer);
        Ok(addr)
    }

    fn decompressor_scratch(&self) -> u64 {
        self.nvcomp_scratch
    }

    fn release_chunks(&mut self, chunk_base: u64) {
        // Pooled memory only: its free is queued on the stream after the work that read it (the
        // decompressors', and the wide decoder's, joined to it). Another would wait for that work here
        // and hold back the step's launches.
        if let StepChunks::Owned(b) = &self.chunks
            && b.device_address() == chunk_base
            && b.is_pooled()
        {
            self.chunks = StepChunks::None;
        }
    }

    fn launch(&mut self, kernel: Kernel) -> Result<()> {
        use Arg::*;
        if let Some(l) = crate::decode::row_filter::launch_plan(&kernel) {
            use crate::decode::row_filter::RowArg;
            let args: Vec<Arg> = l
                .args
                .iter()
                .map(|a| match *a {
                    RowArg::Ptr(v) | RowArg::U64(v) => U64(v),
                    RowArg::U32(v) => U32(v),
                })
                .collect();
            return self.launch_raw(l.name, l.grid, l.block, &args);
        }
        match kernel {
            Kernel::PageHeaders { chunks, n, pages } => {
                self.launch_raw("gp_page_headers", n, 32, &[U64(chunks), U32(n), U64(pages)])
            }
            Kernel::DictByteArrayIndex { dicts, n, largest } => {
                // A dictionary's blocks share its walk through a chain of their own (zeroed), one block
                // per tile of the largest: one block walking a 1 MB dictionary of TPC-H's l_comment
                // tile after tile took 3.6 ms a step (ncu), the longest kernel of a lineitem step.
                let slices = largest.div_ceil(WALK_TILE_BYTES).clamp(1, 16) as u32;
                let chains = self.alloc(n as usize * WALK_CHAIN_BYTES)?;
                self.launch_raw(
                    "gp_dict_byte_array_index",
                    n.saturating_mul(slices),
                    PAGE_BLOCK,
                    &[U64(dicts), U32(n), U64(chains)],
                )?;
                self.free(chains);
                Ok(())
            }
            Kernel::Pages {
                kind: PageKernel::StringOffsets,
                pages,
                n,
                cols,
                ncols,
                largest_strings: _,
            } => {
                // Page totals, their scan per column (one block per column), then each page's offsets.
                let totals = self.alloc(n as usize * 8)?;
                self.launch_raw(
                    "gp_string_page_totals",
                    n,
                    PAGE_BLOCK,
                    &[U64(pages), U32(n), U64(cols), U64(totals)],
                )?;
                self.launch_raw(
                    "gp_string_page_bases",
                    ncols,
                    PAGE_BLOCK,
                    &[U64(pages), U32(n), U64(cols), U32(ncols), U64(totals)],
                )?;
                self.launch_raw(
                    "gp_string_offsets",
                    n,
                    PAGE_BLOCK,
                    &[U64(pages), U32(n), U64(cols), U64(totals)],
                )?;
                self.free(totals);
                Ok(())
            }
            Kernel::Pages {
                kind: PageKernel::ByteArrayValues,
                pages,
                n,
                cols,
                ncols: _,
                largest_strings,
            } => {
                // A page's blocks share its walk through a chain of their own (`WalkChain`, zeroed).
                let chains = self.alloc(n as usize * WALK_CHAIN_BYTES)?;
                self.launch_raw(
                    "gp_byte_array_values",
                    n.saturating_mul(page_kernel_slices(PageKernel::ByteArrayValues, largest_strings)),
                    PAGE_BLOCK,
                    &[U64(pages), U32(n), U64(cols), U64(chains)],
                )?;
                self.free(chains);
                Ok(())
            }
            Kernel::Pages {
                kind,
                pages,
                n,
                cols,
                ncols: _,
                largest_strings,
            } => {
                let grid = n.saturating_mul(page_kernel_slices(kind, largest_strings));
                for name in page_kernel_names(kind) {
                    self.launch_raw(name, grid, PAGE_BLOCK, &[U64(pages), U32(n), U64(cols)])?;
                }
                Ok(())
            }
            Kernel::LevelsAtLeast {
                levels,
                n,
                threshold,
                out,
            } => {
                let grid = n.div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_levels_at_least",
                    grid,
                    256,
                    &[U64(levels), U64(n), U32(threshold), U64(out)],
                )
            }
            Kernel::RepLevels { jobs, n } => self.launch_raw("gp_rep_levels", n, PAGE_BLOCK, &[U64(jobs), U32(n)]),
            Kernel::SlotScan {
                def,
                rep,
                n,
                space,
                pos,
            } => {
                if n == 0 {
                    return self.write(pos, &[0u32]);
                }
                // Tiles of SLOT_TILE entries (nested.cu): their counts, the counts' prefix sums, then
                // each tile's positions from its base.
                let tiles = n.div_ceil(SLOT_TILE);
                let Ok(grid) = u32::try_from(tiles) else {
                    return Err(Error::device("the slot scan", format!("{n} level entries")));
                };
                let counts = self.alloc(tiles as usize * 4)?;
                let (r, t) = space;
                self.launch_raw(
                    "gp_slot_tile_counts",
                    grid,
                    256,
                    &[U64(def), U64(rep), U64(n), U32(r), U32(t), U64(counts)],
                )?;
                self.launch_raw("gp_slot_tile_bases", 1, 1024, &[U64(counts), U32(grid)])?;
                self.launch_raw(
                    "gp_slot_tile_scan",
                    grid,
                    256,
                    &[U64(def), U64(rep), U64(n), U32(r), U32(t), U64(counts), U64(pos)],
                )?;
                self.free(counts);
                Ok(())
            }
            Kernel::FixedSizeCheck {
                offsets,
                slots,
                size,
                result,
            } => {
                let grid = slots.div_ceil(256).clamp(1, 4096) as u32;
                self.launch_raw(
                    "gp_fixed_size_check",
                    grid,
                    256,
                    &[U64(offsets), U64(slots), U32(size), U64(result)],
                )
            }
            Kernel::FixedSizePad {
                offsets,
                slots,
                size,
                src,
                width,
                dst,
                dst_valid,
            } => {
                let grid = (slots * u64::from(size)).div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_fixed_size_pad",
                    grid,
                    256,
                    &[
                        U64(offsets),
                        U64(slots),
                        U32(size),
                        U64(src.0),
                        U64(src.1),
                        U64(src.2),
                        U32(width),
                        U64(dst),
                        U64(dst_valid),
                    ],
                )
            }
            Kernel::ListOffsets {
                def,
                rep,
                n,
                parent,
                parent_pos,
                child_pos,
                wide,
                offsets,
            } => {
                let grid = (n + 1).div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_list_offsets",
                    grid,
                    256,
                    &[
                        U64(def),
                        U64(rep),
                        U64(n),
                        U32(parent.0),
                        U32(parent.1),
                        U64(parent_pos),
                        U64(child_pos),
                        U32(wide as u32),
                        U64(offsets),
                    ],
                )
            }
            Kernel::SlotFlags {
                def,
                rep,
                n,
                space,
                pos,
                threshold,
                out,
            } => {
                let grid = n.div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_slot_flags",
                    grid,
                    256,
                    &[
                        U64(def),
                        U64(rep),
                        U64(n),
                        U32(space.0),
                        U32(space.1),
                        U64(pos),
                        U32(threshold),
                        U64(out),
                    ],
                )
            }
            Kernel::Compact {
                def,
                rep,
                n,
                space,
                pos,
                src,
                width,
                with_end,
                dst,
            } => {
                let grid = (n + 1).div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_compact",
                    grid,
                    256,
                    &[
                        U64(def),
                        U64(rep),
                        U64(n),
                        U32(space.0),
                        U32(space.1),
                        U64(pos),
                        U64(src),
                        U32(width),
                        U32(with_end as u32),
                        U64(dst),
                    ],
                )
            }
            Kernel::PackBits { bytes, n, words, count } => {
                // A thread a step takes 16 bytes where they are 16-aligned, else 1: one step for all.
                let per_block = if bytes % 16 == 0 { 256 * 16 } else { 256 };
                let grid = n.div_ceil(per_block).min(65_535) as u32;
                self.launch_raw("gp_pack_bits", grid, 256, &[U64(bytes), U64(n), U64(words), U64(count)])
            }
            Kernel::ValidateUtf8 {
                chars,
                n,
                offsets,
                offset_width,
                rows,
                result,
            } => {
                // Grid-stride over bytes and rows; a few waves of blocks are enough to fill the GPU.
                let grid = n.max(rows).div_ceil(256).clamp(1, 4096) as u32;
                self.launch_raw(
                    "gp_validate_utf8",
                    grid,
                    256,
                    &[
                        U64(chars),
                        U64(n),
                        U64(offsets),
                        U32(offset_width),
                        U64(rows),
                        U64(result),
                    ],
                )
            }
            Kernel::Convert {
                op,
                src,
                src_width,
                n,
                dst,
            } => {
                let grid = n.div_ceil(256).min(65_535) as u32;
                self.launch_raw(
                    "gp_convert",
                    grid,
                    256,
                    &[U32(op as u32), U64(src), U32(src_width), U64(n), U64(dst)],
                )
            }
            Kernel::CopyBytes { src, dst, n } => self.copy_kernel(src, dst, n),
            Kernel::StringsToViews {
                offsets,
                segment,
                chars,
                chars_len,
                n,
                views,
                max_len,
            } => {
                let grid = n.div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_strings_to_views",
                    grid,
                    256,
                    &[
                        U64(offsets),
                        U64(segment),
                        U64(chars),
                        U64(chars_len),
                        U64(n),
                        U64(views),
                        U64(max_len),
                    ],
                )
            }
            Kernel::StringsToDecimal {
                offsets,
                chars,
                chars_len,
                n,
                width,
                dst,
                too_long,
            } => {
                let grid = n.div_ceil(256).clamp(1, 65_535) as u32;
                self.launch_raw(
                    "gp_strings_to_decimal",
                    grid,
                    256,
                    &[
                        U64(offsets),
                        U64(chars),
                        U64(chars_len),
                        U64(n),
                        U32(width),
                        U64(dst),
                        U64(too_long),
                    ],
                )
            }
            // Launched above, by their plan.
            Kernel::RowLeaf { .. }
            | Kernel::RowLogic { .. }
            | Kernel::RowTileSums { .. }
            | Kernel::RowTileBases { .. }
            | Kernel::RowTileScan { .. }
            | Kernel::RowMaskBits { .. }
            | Kernel::RowGatherFixed { .. }
            | Kernel::RowGatherBits { .. }
            | Kernel::RowGatherLengths { .. }
            | Kernel::RowGatherChars { .. }
            | Kernel::RowExpandRanges { .. } => Ok(()),
        }
    }

    fn decompress(
        &mut self,
        codec: Compression,
        items: &[Decompress],
    ) -> Result<(Vec<std::result::Result<usize, String>>, DecompressedOn)> {
        let began = Instant::now();
        // With GPU_PARQUET_TRACE_FETCH, when each decoder's part ended (trace clock, milliseconds).
        let tracing = crate::trace::enabled();
        let mut ended: Vec<(&str, f64)> = Vec::new();
        let mut mark = |what: &'static str| {
            if tracing {
                ended.push((what, crate::trace::clock(Instant::now())));
            }
        };
        let mut results: Vec<Option<std::result::Result<usize, String>>> = vec![None; items.len()];
        // Empty pages need no decoder; nvCOMP refuses zero-length items.
        for (r, d) in results.iter_mut().zip(items) {
            if d.dst_len == 0 {
                *r = Some(Ok(0));
            } else if d.src_len == 0 {
                *r = Some(Err("no compressed bytes for a non-empty page".into()));
            }
        }
        let gpu = match (&self.nvcomp, Codec::from_parquet(codec)) {
            (Ok(nv), Some(c)) => Ok((nv.clone(), c)),
            (Err(why), _) => Err(format!("nvCOMP unavailable: {why}")),
            (Ok(_), None) => Err(format!("nvCOMP has no {codec} decoder")),
        };
        // Snappy has decoders of our own, safe on any input (no pre-check, no nvCOMP): the wide one
        // for the longest bodies where that shortens the step (`snappy_route`), or for every body when
        // chosen (`SnappyDecoders::wide`); `gp_unsnap` where nvCOMP did not load, or when chosen
        // (`SnappyDecoders::own_kernel`).
        let mut host_why: Vec<String> = Vec::new();
        // The wide decoder's bodies, in flight on a side stream while the other GPU decoders take the
        // rest; those it refuses then go to the host (the pre-check would refuse them too).
        let own_snappy = codec == Compression::SNAPPY && self.snappy.own_kernel(self.nvcomp.is_ok());
        let mut on_wide = vec![false; items.len()];
        let mut wide = None;
        if codec == Compression::SNAPPY {
            let todo = self.wide_snappy_bodies(items, &results, own_snappy);
            if !todo.is_empty() {
                for &i in &todo {
                    on_wide[i] = true;
                }
                wide = Some((self.wide_unsnap_start(items, &todo)?, todo));
            }
        }
        // Zstd bodies of `blocks_from` output or more (where chosen, or where nvCOMP did not load):
        // `gp_unzstd_blocks`, in flight on a side stream in the same way; those it refuses go to the
        // host.
        if let (true, Some(from)) = (
            matches!(codec, Compression::ZSTD(_)),
            self.zstd.blocks_from(self.nvcomp.is_ok()),
        ) {
            let mut todo: Vec<usize> = (0..items.len())
                .filter(|&i| results[i].is_none() && items[i].dst_len >= from.max(1) && offsets_fit_u31(&items[i]))
                .collect();
            if !todo.is_empty() {
                longest_first(&mut todo, items);
                for &i in &todo {
                    on_wide[i] = true;
                }
                wide = Some((self.zstd_blocks_start(items, &todo)?, todo));
            }
        }
        let wide_ran = wide.is_some();
        // The bodies left to the other GPU decoders (or, past their limits, to the host).
        let open: Vec<usize> = (0..items.len())
            .filter(|&i| results[i].is_none() && !on_wide[i])
            .collect();
        // Snappy bodies of literals only are copied by `gp_snappy_literals`, launched first on the
        // step's stream; which ones it took is read back with the next decoder's statuses.
        let literal_todo: Vec<usize> = if codec == Compression::SNAPPY {
            open.iter().copied().filter(|&i| offsets_fit_u31(&items[i])).collect()
        } else {
            Vec::new()
        };
        let mut literals = self.literals_launch(items, &literal_todo)?;
        let mut copied: Vec<usize> = Vec::new();
        // Zstd bodies, or a share of them, go to `gp_unzstd` where chosen or where nvCOMP did not load
        // (safe on any input: no pre-check); those it leaves for a feature it lacks (a dictionary, a
        // checksum) go on to nvCOMP where it loaded, those it refuses to the host.
        let share = if matches!(codec, Compression::ZSTD(_)) {
            self.zstd.own_share(self.nvcomp.is_ok())
        } else {
            0.0
        };
        let own_zstd = share > 0.0;
        let mut to_host = vec![false; items.len()];
        let mut nvcomp_ran = false;
        if own_zstd {
            let mut todo: Vec<usize> = open.iter().copied().filter(|&i| offsets_fit_u31(&items[i])).collect();
            if share < 1.0 {
                // The smallest bodies, `share` of the output bytes; nvCOMP takes the rest.
                todo.sort_by_key(|&i| items[i].dst_len);
                let total: usize = todo.iter().map(|&i| items[i].dst_len).sum();
                let mut taken = 0usize;
                todo.retain(|&i| {
                    let keep = (taken as f64) < share * total as f64;
                    taken += items[i].dst_len;
                    keep
                });
            } else if todo.len() < open.len() {
                host_why.push("pages of 2 GiB or more".into());
            }
            longest_first(&mut todo, items);
            let failed = self.unzstd(items, &todo)?;
            mark("gp_unzstd");
            for i in passing(&todo, &failed) {
                results[i] = Some(Ok(items[i].dst_len));
            }
            let refused: Vec<(usize, u32)> = failed
                .iter()
                .copied()
                .filter(|&(_, st)| st != validate_status::ZSTD_UNSUPPORTED || gpu.is_err())
                .collect();
            if !refused.is_empty() {
                for &(i, _) in &refused {
                    to_host[i] = true;
                }
                host_why.push(self.describe_failures(
                    codec,
                    items,
                    &refused,
                    "the GPU Zstd decoder refused",
                    HostCheck::Libzstd,
                )?);
            }
        }
        if own_snappy {
            copied = self.literals_copied(&mut literals, &literal_todo, items, &mut results)?;
            let left: Vec<usize> = open.iter().copied().filter(|&i| results[i].is_none()).collect();
            let mut todo: Vec<usize> = left.iter().copied().filter(|&i| offsets_fit_u31(&items[i])).collect();
            longest_first(&mut todo, items);
            if todo.len() < left.len() {
                host_why.push("pages of 2 GiB or more".into());
            }
            let failed = self.unsnap(items, &todo)?;
            if !failed.is_empty() {
                host_why.push(self.describe_failures(
                    codec,
                    items,
                    &failed,
                    "the GPU Snappy decoder refused",
                    HostCheck::Precheck,
                )?);
            }
            for i in passing(&todo, &failed) {
                results[i] = Some(Ok(items[i].dst_len));
            }
        } else if let Ok((nv, c)) = &gpu {
            let mut todo: Vec<usize> = open
                .iter()
                .copied()
                .filter(|&i| results[i].is_none() && !to_host[i] && items[i].dst_len as u64 <= c.max_chunk_len())
                .collect();
            longest_first(&mut todo, items);
            // Every body is checked on the GPU before nvCOMP sees it; one that fails goes to the host
            // decompressor, which is safe on any input and has the last word. The check is launched
            // behind the literal copier, over every body (those of literals only pass it at once), and
            // both are read back together.
            let checked = if self.precheck {
                Some(self.validate_launch(codec, items, &todo)?)
            } else {
                None
            };
            copied = self.literals_copied(&mut literals, &literal_todo, items, &mut results)?;
            let mut failed = match checked {
                Some(Ok(addr)) => self.body_statuses::<ValidateItem>(addr, &todo, |b| b.status)?,
                Some(Err(failed)) => failed,
                None => Vec::new(),
            };
            mark("pre-check");
            failed.retain(|&(i, _)| results[i].is_none());
            todo.retain(|&i| results[i].is_none());
            if open
                .iter()
                .any(|&i| results[i].is_none() && !to_host[i] && items[i].dst_len as u64 > c.max_chunk_len())
            {
                host_why.push(format!("pages over nvCOMP's {c} limit"));
            }
            if !failed.is_empty() {
                host_why.push(self.describe_failures(
                    codec,
                    items,
                    &failed,
                    "failed the pre-check before nvCOMP",
                    HostCheck::Precheck,
                )?);
                todo = passing(&todo, &failed);
            }
            if !todo.is_empty() {
                nvcomp_ran = true;
                let outcomes = self.nvcomp_batch(nv, *c, items, &todo)?;
                mark("nvCOMP");
                let mut rejected = 0;
                for (&i, o) in todo.iter().zip(outcomes) {
                    #[cfg(feature = "fault-injection")]
                    if crate::gpu::faults::nvcomp_item_fails() {
                        rejected += 1;
                        continue;
                    }
                    if o.is_success() && o.actual_len == items[i].dst_len {
                        results[i] = Some(Ok(o.actual_len));
                    } else {
                        rejected += 1;
                    }
                }
                if rejected > 0 {
                    host_why.push(format!(
                        "{rejected} page(s) whose nvCOMP status or size was wrong, retried"
                    ));
                }
            }
        }
        if let Some((w, todo)) = wide {
            let failed = self.wide_unsnap_join(w)?;
            mark("wide");
            if !failed.is_empty() {
                let zstd = codec != Compression::SNAPPY;
                host_why.push(self.describe_failures(
                    codec,
                    items,
                    &failed,
                    if zstd {
                        "gp_unzstd_blocks refused"
                    } else {
                        "the wide GPU Snappy decoder refused"
                    },
                    if zstd { HostCheck::Libzstd } else { HostCheck::Precheck },
                )?);
            }
            for i in passing(&todo, &failed) {
                results[i] = Some(Ok(items[i].dst_len));
            }
        }
        if literals.is_some() {
            // Neither one-warp decoder ran (nvCOMP asked for and not loaded): the copies still count.
            copied = self.literals_copied(&mut literals, &literal_todo, items, &mut results)?;
        }
        // What took the bodies on the GPU: every decoder that took one (the one-warp decoder where none
        // did, as the report said before any body was decompressed).
        let mut by: Vec<&str> = Vec::new();
        if !copied.is_empty() {
            by.push("gp_snappy_literals");
        }
        if wide_ran {
            by.push(if codec == Compression::SNAPPY {
                "gp_wsnap"
            } else {
                "gp_unzstd_blocks"
            });
        }
        // (`copied` is a part of `open`.)
        if own_zstd {
            by.push("gp_unzstd");
            if nvcomp_ran {
                by.push("nvCOMP");
            }
        } else if by.is_empty() || open.len() > copied.len() {
            by.push(if own_snappy { "gp_unsnap" } else { "nvCOMP" });
        }
        let mut on = DecompressedOn::Gpu(by.join(" + "));
        if tracing {
            let out = |wide: bool| -> f64 {
                (0..items.len())
                    .filter(|&i| on_wide[i] == wide)
                    .map(|i| items[i].dst_len as f64)
                    .sum::<f64>()
                    / 1e6
            };
            let start = crate::trace::clock(began);
            let parts: Vec<String> = ended
                .iter()
                .map(|(what, at)| format!("{what} +{:.2}", at - start))
                .collect();
            eprintln!(
                "trace decompress {codec}: {} bodies ({:.1} MB out), {} wide ({:.1} MB), from {start:.2} ms on the trace clock: {} ms",
                items.len(),
                out(false),
                on_wide.iter().filter(|&&w| w).count(),
                out(true),
                parts.join(", ")
            );
        }
        // The rest on the host: compressed bodies copied back, decompressed on all cores, uploaded.
        let host: Vec<usize> = (0..items.len()).filter(|&i| results[i].is_none()).collect();
        if !host.is_empty() {
            on = DecompressedOn::Host(match &gpu {
                Err(why) if !own_snappy && !own_zstd => why.clone(),
                _ => host_why.join("; "),
            });
            let mut inputs = Vec::with_capacity(host.len());
            for &i in &host {
                inputs.push(self.read::<u8>(items[i].src, items[i].src_len)?);
            }
            let outputs: Vec<std::result::Result<Vec<u8>, String>> = inputs
                .par_iter()
                .zip(&host)
                .map(|(src, &i)| crate::decode::decompress::decompress_host(codec, src, items[i].dst_len))
                .collect();
            for (&i, out) in host.iter().zip(outputs) {
                results[i] = Some(match out {
                    Ok(bytes) if bytes.len() <= items[i].dst_len => {
                        self.write(items[i].dst, &bytes)?;
                        Ok(bytes.len())
                    }
                    Ok(bytes) => Ok(bytes.len()),
                    Err(e) => Err(e),
                });
            }
        }
        Ok((
            results
                .into_iter()
                .map(|r| r.unwrap_or_else(|| Err("not decompressed".into())))
                .collect(),
            on,
        ))
    }
}

/// The row filter's kernels read a batch's device buffers in place.
impl crate::decode::row_filter::FilterExecutor for DeviceExecutor<'_> {
    fn address_of(&mut self, buf: &crate::gpu::DeviceBuffer<u8>) -> Result<u64> {
        Ok(buf.device_address())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_pages_get_as_many_blocks_as_their_largest_page_uses() {
        let none = PageShape::default();
        assert_eq!(byte_array_values_slices(none), 1);
        assert_eq!(page_kernel_slices(PageKernel::CopyStrings, none), 1);
        // The plain benchmark file's string pages: 330 KB, 20,000 rows.
        let plain = PageShape {
            bytes: 340_000,
            rows: 20_000,
        };
        assert_eq!(byte_array_values_slices(plain), 3);
        assert_eq!(page_kernel_slices(PageKernel::CopyStrings, plain), 10);
        assert_eq!(page_kernel_slices(PageKernel::GatherFixed, plain), 1);
        // A dictionary page: few bytes, many rows.
        let dict = PageShape {
            bytes: 30_000,
            rows: 40_000,
        };
        assert_eq!(byte_array_values_slices(dict), 5);
        let huge = PageShape {
            bytes: u64::MAX,
            rows: u32::MAX,
        };
        assert_eq!(byte_array_values_slices(huge), 8);
        assert_eq!(page_kernel_slices(PageKernel::CopyStrings, huge), 16);
    }
}
