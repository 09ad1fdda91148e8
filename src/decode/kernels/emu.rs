//! Test support: the kernels' CUDA source run on the CPU (`emu/cuda_emu.h`, `emu/driver.cpp`, built
//! with a host C++20 compiler under AddressSanitizer and UndefinedBehaviorSanitizer), so a test can
//! check, with no GPU, that the kernels compute exactly what their host references compute, and never
//! touch memory outside the buffers they are given.
//!
//! [`run_emulated`] dumps a [`Step`] (arena regions and descriptors), runs the core pipeline in the
//! emulation the way an orchestrator launches it, and reads the result back; [`assert_same`] compares
//! that with the references' result on an identical step. Without a compiler (`c++`, or the one named
//! by `GP_EMU_CXX`) the tests using it skip, saying so.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::decode::host_kernels::test_pages::{ColumnOut, Step};
use crate::decode::layout::{ColumnDesc, DictDesc, PageDesc, physical as pt};

/// The files of [`super::SOURCES`] the emulation compiles: the core kernels and what they need (other
/// kernel files may use CUDA features the emulation does not provide).
const EMULATED: [&str; 11] = [
    "common.cuh",
    "core_util.cuh",
    "levels.cu",
    "nested.cu",
    "values.cu",
    "strings.cu",
    "validate.cu",
    "snappy.cu",
    "snappy_wide.cu",
    "zstd.cu",
    "row_filter.cu",
];

const EMU_H: &str = include_str!("emu/cuda_emu.h");

/// The emulated program: the [`EMULATED`] files, in that order, each after a `#line` directive.
fn emulated_source() -> String {
    let mut s = String::new();
    for name in EMULATED {
        let (_, text) = super::SOURCES
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not in SOURCES"));
        s.push_str(&format!("#line 1 \"{name}\"\n{text}\n"));
    }
    s
}
const DRIVER: &str = include_str!("emu/driver.cpp");

/// What the emulated pipeline produced.
#[derive(Debug)]
pub(crate) struct Emulated {
    /// Every input region after the run, by address (`str_src` contents as arena addresses).
    pub regions: BTreeMap<u64, Vec<u8>>,
    pub pages: Vec<PageDesc>,
    /// BYTE_ARRAY columns' `out_values` read 0 (their characters are in `outs`).
    pub cols: Vec<ColumnDesc>,
    pub dicts: Vec<DictDesc>,
    /// Per column: characters, validity bits and boolean value bits.
    pub outs: Vec<ColumnOut>,
}

/// The driver binary, built once per process (and cached on disk by source hash); `Err` says why
/// there is none.
fn driver() -> Result<PathBuf, String> {
    static DRIVER_BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DRIVER_BIN
        .get_or_init(|| {
            if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
                return Err("the kernel emulation switches fibers with x86-64 Linux assembly".to_string());
            }
            let cxx = std::env::var("GP_EMU_CXX").unwrap_or_else(|_| "c++".to_string());
            let probe = Command::new(&cxx).arg("--version").output();
            if !probe.is_ok_and(|o| o.status.success()) {
                return Err(format!("no C++ compiler `{cxx}` (set GP_EMU_CXX)"));
            }
            let kernels = emulated_source();
            let mut h = twox_hash::XxHash64::with_seed(0);
            for part in [kernels.as_str(), EMU_H, DRIVER, cxx.as_str()] {
                h.write(part.as_bytes());
            }
            let dir = std::env::temp_dir().join(format!("gpu-parquet-emu-{:016x}", h.finish()));
            let bin = dir.join("driver");
            if bin.exists() {
                return Ok(bin);
            }
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            for (name, text) in [
                ("kernels.cu", kernels.as_str()),
                ("cuda_emu.h", EMU_H),
                ("driver.cpp", DRIVER),
            ] {
                std::fs::write(dir.join(name), text).map_err(|e| e.to_string())?;
            }
            let tmp = dir.join(format!("driver.{}", std::process::id()));
            // The sanitizers where the compiler has them (a trivial program links), else without.
            let sanitizers = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"];
            std::fs::write(dir.join("probe.cpp"), "int main() { return 0; }\n").map_err(|e| e.to_string())?;
            let probe = dir.join(format!("probe.{}", std::process::id()));
            let have_sanitizers = Command::new(&cxx)
                .current_dir(&dir)
                .args(sanitizers)
                .args(["probe.cpp", "-o"])
                .arg(&probe)
                .output()
                .is_ok_and(|o| o.status.success());
            let _ = std::fs::remove_file(&probe);
            if !have_sanitizers {
                println!("note: `{cxx}` cannot link ASan/UBSan; the kernel emulation runs without them");
            }
            let out = Command::new(&cxx)
                .current_dir(&dir)
                .args(["-std=c++20", "-O1", "-g"])
                .args(if have_sanitizers { &sanitizers[..] } else { &[] })
                .args(["-DKERNELS_CU=\"kernels.cu\"", "-I.", "driver.cpp", "-o"])
                .arg(&tmp)
                .output()
                .map_err(|e| e.to_string())?;
            // A compiler that runs but cannot build the emulation is a failure, not a skip.
            assert!(
                out.status.success(),
                "building the kernel emulation failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::rename(&tmp, &bin).map_err(|e| e.to_string())?;
            Ok(bin)
        })
        .clone()
}

/// Whether the emulation can run here; `Err` says why not.
pub(crate) fn available() -> Result<(), String> {
    driver().map(|_| ())
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn array<T: bytemuck::Pod>(&mut self) -> Vec<T> {
        let n = self.u32() as usize;
        bytemuck::pod_collect_to_vec(self.take(n * std::mem::size_of::<T>()))
    }
    fn bits(&mut self) -> Option<(Vec<u32>, u64)> {
        let n = self.u32() as usize;
        let words = bytemuck::pod_collect_to_vec(self.take(n * 4));
        let set = self.u64();
        // The driver writes no words for a buffer it did not pack (and none for 0 rows).
        Some((words, set))
    }
}

/// Runs the core pipeline on `step` in the emulation. Panics if the emulation is unavailable (check
/// [`available`] first), if it fails (a sanitizer report, a trap) or runs over two minutes (a barrier
/// not reached by every thread).
pub(crate) fn run_emulated(step: &Step) -> Emulated {
    let bin = driver().expect("emulation available");
    let mut input = b"GPEMU1".to_vec();
    let regions: Vec<(u64, &[u8])> = step.arena.iter().collect();
    put_u32(&mut input, regions.len() as u32);
    for (addr, bytes) in &regions {
        put_u64(&mut input, *addr);
        put_u64(&mut input, bytes.len() as u64);
        input.extend_from_slice(bytes);
    }
    for (count, bytes) in [
        (step.pages.len(), bytemuck::cast_slice::<_, u8>(&step.pages)),
        (step.cols.len(), bytemuck::cast_slice(&step.cols)),
        (step.dicts.len(), bytemuck::cast_slice(&step.dicts)),
    ] {
        put_u32(&mut input, count as u32);
        input.extend_from_slice(bytes);
    }
    let output = run_driver(&bin, &[], &input);
    let mut r = Reader(&output);
    assert_eq!(r.take(6), b"GPEMU1");
    let mut out_regions = BTreeMap::new();
    for _ in 0..r.u32() {
        let addr = r.u64();
        let len = r.u64() as usize;
        out_regions.insert(addr, r.take(len).to_vec());
    }
    let pages = r.array::<PageDesc>();
    let cols = r.array::<ColumnDesc>();
    let dicts = r.array::<DictDesc>();
    let outs = cols
        .iter()
        .map(|c| {
            let n = r.u64() as usize;
            let chars = r.take(n).to_vec();
            let utf8 = r.u64();
            let valid_bits = r.bits().filter(|_| c.out_valid != 0);
            let value_bits = r.bits().filter(|_| c.physical == pt::BOOLEAN);
            ColumnOut {
                values: chars,
                valid_bits,
                value_bits,
                utf8_first_bad: (c.physical == pt::BYTE_ARRAY).then_some(utf8),
                ..ColumnOut::default()
            }
        })
        .collect();
    assert!(r.0.is_empty(), "trailing output");
    Emulated {
        regions: out_regions,
        pages,
        cols,
        dicts,
        outs,
    }
}

/// Runs the driver (`mode` arguments first) on `input`; its output. Panics if it fails (a sanitizer
/// report, a trap) or runs over two minutes (a barrier not reached by every thread).
fn run_driver(bin: &std::path::Path, mode: &[&str], input: &[u8]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let (in_path, out_path) = (dir.path().join("in"), dir.path().join("out"));
    std::fs::File::create(&in_path)
        .and_then(|mut f| f.write_all(input))
        .expect("write input");
    let mut child = Command::new(bin)
        .args(mode)
        .arg(&in_path)
        .arg(&out_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the emulation");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        // A backstop: the emulation reports a barrier that not every thread reaches itself. The
        // slowest run (gp_unsnap's cases) takes 100-115 s alone under ASan on a 2-core machine, more
        // beside the other emulation tests.
        if started.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            panic!("the emulated kernels ran over ten minutes: a barrier not reached by every thread?");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "the emulated kernels failed ({status}):\n{err}");
    std::fs::read(&out_path).expect("read output")
}

/// One case of the nested-column kernels: levels, the child `(r, t)` and parent `(pr, pt)` spaces, a
/// flag threshold, `n + 1` values of `width` bytes to compact, and a repetition level stream with its
/// job's count, maximum, width and flags.
pub(crate) struct NestedCase {
    pub def: Vec<u8>,
    pub rep: Vec<u8>,
    pub child: (u32, u32),
    pub parent: (u32, u32),
    pub threshold: u32,
    pub width: u32,
    pub src: Vec<u8>,
    pub stream: Vec<u8>,
    pub job: (u32, u32, u32, u32),
    /// Items a list for the fixed-size list kernels over the parent's lists (the items: the compacted
    /// child values, their validity bits the `src` bytes).
    pub size: u32,
}

/// What the emulated nested kernels wrote for a [`NestedCase`] (see driver.cpp's `nested_main`).
#[derive(Debug, PartialEq)]
pub(crate) struct NestedOut {
    /// The stream as a page's definition levels (`gp_levels`, `out_def`) at row 2 of a `count + 2`-row
    /// column, and their marks.
    pub def_levels: Vec<u8>,
    pub marks: Vec<u8>,
    pub parent_pos: Vec<u32>,
    pub child_pos: Vec<u32>,
    pub offsets32: Vec<i32>,
    pub offsets64: Vec<i64>,
    pub flags: Vec<u8>,
    pub packed: Vec<u8>,
    pub job_error: (u32, u32),
    pub levels: Vec<u8>,
    /// `gp_fixed_size_check`'s result, then `gp_fixed_size_pad`'s values and validity bytes.
    pub fixed_check: Vec<u64>,
    pub fixed_values: Vec<u8>,
    pub fixed_valid: Vec<u8>,
}

/// Runs [`NestedCase`] in the emulation.
pub(crate) fn run_nested_emulated(case: &NestedCase) -> NestedOut {
    let bin = driver().expect("emulation available");
    let n = case.def.len();
    let mut input = b"GPNST1".to_vec();
    put_u64(&mut input, n as u64);
    for v in [
        case.child.0,
        case.child.1,
        case.parent.0,
        case.parent.1,
        case.threshold,
        case.width,
        case.size,
    ] {
        put_u32(&mut input, v);
    }
    input.extend_from_slice(&case.def);
    input.extend_from_slice(&case.rep);
    input.extend_from_slice(&case.src);
    put_u64(&mut input, case.stream.len() as u64);
    input.extend_from_slice(&case.stream);
    for v in [case.job.0, case.job.1, case.job.2, case.job.3] {
        put_u32(&mut input, v);
    }
    let output = run_driver(&bin, &["nested"], &input);
    let mut r = Reader(&output);
    let rows = case.job.0 as usize + 2;
    let def_levels = r.take(rows).to_vec();
    let marks = r.take(rows).to_vec();
    let parent_pos: Vec<u32> = bytemuck::pod_collect_to_vec(r.take((n + 1) * 4));
    let child_pos: Vec<u32> = bytemuck::pod_collect_to_vec(r.take((n + 1) * 4));
    let (ps, cs) = (parent_pos[n] as usize, child_pos[n] as usize);
    let offsets32 = bytemuck::pod_collect_to_vec(r.take((ps + 1) * 4));
    let offsets64 = bytemuck::pod_collect_to_vec(r.take((ps + 1) * 8));
    let flags = r.take(ps).to_vec();
    let packed = r.take((cs + 1) * case.width as usize).to_vec();
    let job = r.take(48);
    let word = |i: usize| u32::from_le_bytes(job[i..i + 4].try_into().expect("4 bytes"));
    let job_error = (word(40), word(44));
    let levels = r.take(case.job.0 as usize).to_vec();
    let fixed_check: Vec<u64> = bytemuck::pod_collect_to_vec(r.take(16));
    let items = ps * case.size as usize;
    let fixed_values = r.take(items * case.width as usize).to_vec();
    let fixed_valid = r.take(items).to_vec();
    NestedOut {
        def_levels,
        marks,
        parent_pos,
        child_pos,
        offsets32,
        offsets64,
        flags,
        packed,
        job_error,
        levels,
        fixed_check,
        fixed_values,
        fixed_valid,
    }
}

/// `gp_validate_compressed` run in the emulation over `(codec, declared uncompressed size, body)`
/// items as the host launches it (a lane per segment of the bodies
/// [`validate_segments::plan`](crate::decode::layout::validate_segments::plan) cuts with `geometry`,
/// then a warp per body, `VALIDATE_WARPS` warps a block), every body at the end of its allocation: each item's status, and for a body in
/// segments its join word (`validate_segments::JOINED` and the rest), else 0.
pub(crate) fn run_validate_emulated(
    items: &[(u32, u64, Vec<u8>)],
    geometry: crate::decode::layout::validate_segments::Geometry,
) -> Vec<(u32, u32)> {
    use crate::decode::layout::{ValidateItem, validate_segments};
    let bin = driver().expect("emulation available");
    let mut descs: Vec<ValidateItem> = items
        .iter()
        .map(|(codec, dst_len, body)| ValidateItem {
            src_len: body.len() as u64,
            dst_len: *dst_len,
            codec: *codec,
            status: u32::MAX,
            ..Default::default()
        })
        .collect();
    let segs = validate_segments::plan(&mut descs, geometry);
    let mut input = b"GPVAL2".to_vec();
    put_u32(&mut input, items.len() as u32);
    put_u32(&mut input, geometry.seg_bytes);
    put_u32(&mut input, geometry.overlap);
    for ((codec, dst_len, body), d) in items.iter().zip(&descs) {
        put_u32(&mut input, *codec);
        put_u64(&mut input, *dst_len);
        put_u32(&mut input, d.status);
        put_u64(&mut input, body.len() as u64);
        input.extend_from_slice(body);
    }
    put_u32(&mut input, segs.len() as u32);
    input.extend_from_slice(bytemuck::cast_slice(&segs));
    let output = run_driver(&bin, &["validate"], &input);
    assert_eq!(
        output.len(),
        (items.len() + segs.len()) * 4,
        "a status per item, a word per segment"
    );
    let words: Vec<u32> = bytemuck::pod_collect_to_vec(&output);
    let (statuses, joins) = words.split_at(items.len());
    let mut join_of = vec![0u32; items.len()];
    for s in &segs {
        if s.index == 0 {
            join_of[s.item as usize] = joins[s.first as usize];
        }
    }
    statuses.iter().copied().zip(join_of).collect()
}

/// `gp_unsnap` run in the emulation over `(declared uncompressed size, body)` items, one block of 128
/// threads each, every body at the end of its allocation and every output an allocation of exactly the
/// declared size: each status and output buffer (0xab where nothing was written).
pub(crate) fn run_unsnap_emulated(items: &[(u64, Vec<u8>)]) -> Vec<(u32, Vec<u8>)> {
    run_body_decoder_emulated("unsnap", items, false)
}

/// `gp_snappy_literals` run in the emulation as [`run_unsnap_emulated`] runs `gp_unsnap` (its grid:
/// `snappy_literals::plan`'s blocks of `snappy_literals::THREADS` threads).
pub(crate) fn run_literals_emulated(items: &[(u64, Vec<u8>)]) -> Vec<(u32, Vec<u8>)> {
    run_body_decoder_emulated("literals", items, false)
}

/// `gp_unzstd` run in the emulation as [`run_unsnap_emulated`] runs `gp_unsnap` (a warp per body).
pub(crate) fn run_unzstd_emulated(items: &[(u64, Vec<u8>)]) -> Vec<(u32, Vec<u8>)> {
    run_body_decoder_emulated("unzstd", items, false)
}

/// `gp_unzstd_blocks` run in the emulation as [`run_unzstd_emulated`] runs `gp_unzstd`, each body's
/// scratch an allocation of exactly [`zstd_blocks::scratch_bytes`](crate::decode::layout::zstd_blocks)
/// (poisoned, as device memory is not zeroed).
/// With `whole` false, a body the blocks' decode does not take is left with status
/// `ZSTD_NOT_PLANNED` rather than decoded whole.
pub(crate) fn run_unzstd_blocks_emulated(items: &[(u64, Vec<u8>)], whole: bool) -> Vec<(u32, Vec<u8>)> {
    run_body_decoder_emulated(
        if whole {
            "unzstd_blocks"
        } else {
            "unzstd_blocks_planned"
        },
        items,
        true,
    )
}

/// Runs the driver's body decoder `mode` over `items`; `scratch`: each item's declared size is
/// followed by its scratch bytes (`gp_unzstd_blocks`).
fn run_body_decoder_emulated(mode: &str, items: &[(u64, Vec<u8>)], scratch: bool) -> Vec<(u32, Vec<u8>)> {
    let bin = driver().expect("emulation available");
    let mut input = b"GPUNS1".to_vec();
    put_u32(&mut input, items.len() as u32);
    for (dst_len, body) in items {
        put_u64(&mut input, *dst_len);
        if scratch {
            put_u64(&mut input, crate::decode::layout::zstd_blocks::scratch_bytes(*dst_len));
        }
        put_u64(&mut input, body.len() as u64);
        input.extend_from_slice(body);
    }
    let output = run_driver(&bin, &[mode], &input);
    let mut at = 0usize;
    let mut back = Vec::with_capacity(items.len());
    for (dst_len, _) in items {
        let status = u32::from_le_bytes(output[at..at + 4].try_into().expect("4 bytes"));
        at += 4;
        back.push((status, output[at..at + *dst_len as usize].to_vec()));
        at += *dst_len as usize;
    }
    assert_eq!(at, output.len(), "one status and output per item");
    back
}

/// The wide Snappy decoder (`snappy_wide.cu`) run in the emulation over `(declared uncompressed size,
/// body)` items laid out by [`wsnap::plan`](crate::decode::layout::wsnap::plan), every body, output and
/// scratch region an allocation of exactly its size, ending with `gp_wsnap_resolve` where `resolve`
/// (which the plan must allow: no body of more than `wsnap::RESOLVE_MAX_SEGS` segments), else with
/// the jump rounds and the gather: each status, unresolved count and output buffer (0xab where
/// nothing was written).
pub(crate) fn run_wsnap_emulated(items: &[(u64, Vec<u8>)], resolve: bool) -> Vec<(u32, u32, Vec<u8>)> {
    use crate::decode::layout::{WsnapItem, wsnap};
    let bin = driver().expect("emulation available");
    let mut descs: Vec<WsnapItem> = items
        .iter()
        .map(|(dst_len, body)| WsnapItem {
            src_len: body.len() as u64,
            dst_len: *dst_len,
            ..Default::default()
        })
        .collect();
    let plan = wsnap::plan(&mut descs, 0);
    assert!(plan.resolve || !resolve, "a body past gp_wsnap_resolve's limit");
    let mut input = b"GPWS02".to_vec();
    put_u32(&mut input, items.len() as u32);
    put_u32(&mut input, plan.seg_blocks);
    put_u32(&mut input, plan.byte_blocks);
    put_u32(&mut input, plan.rounds);
    put_u32(&mut input, u32::from(resolve));
    for ((dst_len, body), d) in items.iter().zip(&descs) {
        put_u64(&mut input, *dst_len);
        put_u32(&mut input, d.seg_block0);
        put_u32(&mut input, d.byte_block0);
        let s = wsnap::Scratch::of(d.src_len, d.dst_len);
        for bytes in [s.table, s.segs, s.ptr, s.kind] {
            put_u64(&mut input, bytes);
        }
        put_u64(&mut input, body.len() as u64);
        input.extend_from_slice(body);
    }
    let output = run_driver(&bin, &["wsnap"], &input);
    let mut at = 0usize;
    let mut back = Vec::with_capacity(items.len());
    for (dst_len, _) in items {
        let word = |at: usize| u32::from_le_bytes(output[at..at + 4].try_into().expect("4 bytes"));
        let (status, unresolved) = (word(at), word(at + 4));
        at += 8;
        back.push((status, unresolved, output[at..at + *dst_len as usize].to_vec()));
        at += *dst_len as usize;
    }
    assert_eq!(at, output.len(), "one status, count and output per item");
    back
}

/// One row-filter launch ([`crate::decode::row_filter::launch_plan`]) run in the emulation over
/// `regions` (arena addresses and bytes, each an allocation of exactly its size there): the regions'
/// bytes after it, in order.
pub(crate) fn run_row_filter_emulated(
    regions: &[(u64, Vec<u8>)],
    launch: &crate::decode::row_filter::RowLaunch,
) -> Vec<Vec<u8>> {
    use crate::decode::row_filter::RowArg;
    let bin = driver().expect("emulation available");
    let mut input = b"GPRFC1".to_vec();
    put_u32(&mut input, regions.len() as u32);
    for (addr, bytes) in regions {
        put_u64(&mut input, *addr);
        put_u64(&mut input, bytes.len() as u64);
        input.extend_from_slice(bytes);
    }
    put_u32(&mut input, 1);
    put_u32(&mut input, launch.name.len() as u32);
    input.extend_from_slice(launch.name.as_bytes());
    put_u32(&mut input, launch.grid);
    put_u32(&mut input, launch.block);
    put_u32(&mut input, launch.args.len() as u32);
    for a in &launch.args {
        let (tag, v) = match *a {
            RowArg::Ptr(v) => (b'p', v),
            RowArg::U64(v) => (b'q', v),
            RowArg::U32(v) => (b'u', v as u64),
        };
        input.push(tag);
        put_u64(&mut input, v);
    }
    let output = run_driver(&bin, &["rowfilter"], &input);
    let mut r = Reader(&output);
    let back = regions.iter().map(|(_, b)| r.take(b.len()).to_vec()).collect();
    assert!(r.0.is_empty(), "trailing output");
    back
}

/// Names the buffer at `addr` for messages.
fn buffer_name(step: &Step, addr: u64) -> String {
    for (c, col) in step.cols.iter().enumerate() {
        for (name, a) in [
            ("vidx", col.vidx),
            ("dense", col.dense),
            ("out_values", col.out_values),
            ("out_valid", col.out_valid),
            ("out_offsets", col.out_offsets),
            ("str_src", col.str_src),
            ("str_len", col.str_len),
        ] {
            if a == addr {
                return format!("column {c} {name}");
            }
        }
    }
    for (d, dict) in step.dicts.iter().enumerate() {
        if dict.index == addr {
            return format!("dictionary {d} index");
        }
    }
    format!("region {addr:#x}")
}

/// Asserts the emulated run `emu` equals the references' run over an identical step: `reference`
/// after [`run_core`](crate::decode::host_kernels::test_pages::run_core), which returned `outs`. Every
/// descriptor field (errors and details included), every input region's bytes, the characters and
/// the packed bits must agree.
pub(crate) fn assert_same(what: &str, reference: &Step, outs: &[ColumnOut], emu: &Emulated) {
    for (p, (r, e)) in reference.pages.iter().zip(&emu.pages).enumerate() {
        assert_eq!(r, e, "{what}: page {p} (reference left, emulated kernels right)");
    }
    assert_eq!(reference.pages.len(), emu.pages.len());
    assert_eq!(reference.dicts, emu.dicts, "{what}: dictionaries");
    assert_eq!(reference.cols.len(), emu.cols.len());
    for (c, (r, e)) in reference.cols.iter().zip(&emu.cols).enumerate() {
        let mut r = *r;
        if r.physical == pt::BYTE_ARRAY {
            r.out_values = 0;
            same_bytes(
                &format!("{what}: column {c} characters"),
                &outs[c].values,
                &emu.outs[c].values,
            );
        }
        assert_eq!(r, *e, "{what}: column {c}");
        assert_eq!(
            outs[c].valid_bits, emu.outs[c].valid_bits,
            "{what}: column {c} validity bits"
        );
        assert_eq!(
            outs[c].value_bits, emu.outs[c].value_bits,
            "{what}: column {c} value bits"
        );
        assert_eq!(
            outs[c].utf8_first_bad, emu.outs[c].utf8_first_bad,
            "{what}: column {c} UTF-8 check"
        );
    }
    for (addr, bytes) in &emu.regions {
        let want = reference.arena.region(*addr).expect("the same regions");
        same_bytes(&format!("{what}: {}", buffer_name(reference, *addr)), want, bytes);
    }
}

/// Asserts two byte strings are equal, naming the first difference (not dumping both).
fn same_bytes(what: &str, want: &[u8], got: &[u8]) {
    if want != got {
        let at = want
            .iter()
            .zip(got)
            .position(|(a, b)| a != b)
            .unwrap_or(want.len().min(got.len()));
        panic!(
            "{what} differs first at byte {at} of {} / {} (reference {:?}, emulated {:?})",
            want.len(),
            got.len(),
            &want[at.min(want.len())..(at + 16).min(want.len())],
            &got[at.min(got.len())..(at + 16).min(got.len())]
        );
    }
}
