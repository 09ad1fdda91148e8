//! nvCOMP 5: batched GPU decompression (Snappy, Zstd, LZ4, Gzip, Deflate), loaded at run time.
//!
//! A ladder like cudarc's:
//! - [`sys`]: the C types and function-pointer types of the nvCOMP 5.3 batched decompression API, as
//!   its headers declare them;
//! - [`result`]: [`NvcompLibrary`], the loaded library (found through an [`NvcompSearch`], its major
//!   version checked, every symbol resolved up front) with one thin method per C call, mapping
//!   `nvcompStatus_t` to [`Error::Nvcomp`];
//! - the safe rung, here: [`Nvcomp::decompress`] runs one batch on a [`Stream`] and returns each
//!   item's status and decompressed length.
//!
//! Nothing here reads the environment: where to look comes in an [`NvcompSearch`], which
//! [`crate::Settings::nvcomp_search`] builds from the `--nvcomp` flag or `GPU_PARQUET_NVCOMP` and the
//! Python directories the settings collected.
//!
//! Loading never panics. A missing library, a file that is not nvCOMP, an nvCOMP whose major version
//! is neither 5 nor 6 or one that lacks a symbol is an [`Error::Unavailable`] naming every file
//! tried and why each was refused. nvCOMP links the CUDA runtime statically and opens `libcuda` only
//! on first use, so the library loads (and reports its version) even on a machine without a GPU;
//! decompression then fails with an nvCOMP error.
//!
//! Facts from the 5.3 headers that shape this module:
//! - every `nvcompBatched*DecompressOpts_t` is a 64-byte struct passed by value, all zero for the
//!   defaults, its first field the backend ([`DecompressBackend`]);
//! - `DecompressGetTempSizeSync` reads the compressed chunks (it takes device arrays of pointers and
//!   sizes and synchronises the stream) and so sizes the temporary memory for the data at hand; the
//!   `Async` estimate, from shapes alone, is far larger for Zstd (3.2 GB for 1000 pages of 1 MiB);
//! - alignment requirements are per codec and per buffer: in 5.3, Deflate needs 4-byte aligned
//!   input and Zstd an 8-byte aligned temporary buffer; others take any alignment
//!   ([`result::NvcompLibrary::required_alignments`] asks the library);
//! - nvCOMP 6.0 declares every call used here as 5.3 does (it renamed the `Async` temporary-size
//!   estimates, not called here, and its file, `libnvcomp.so.6`, which is looked for only where a path
//!   names it);
//! - corrupt input is undefined behaviour for every codec except LZ4 on the CUDA backend, which sets
//!   `nvcompErrorCannotDecompress`; an output buffer too small for a chunk gives that status for every
//!   codec. The caller must validate what it feeds in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, Stream};

pub use result::{NvcompLibrary, NvcompVersion};

/// The file name of nvCOMP 5's library.
pub(crate) const LIBRARY_FILE: &str = "libnvcomp.so.5";

/// The nvCOMP major version this module speaks and looks for by file name.
pub(crate) const SUPPORTED_MAJOR: u32 = 5;
/// Another major version whose calls used here are declared exactly as 5.3 declares them (nvCOMP
/// 6.0's headers rename only the `Async` temporary-size estimates, which this module does not call);
/// taken where named by path (`--nvcomp`, `GPU_PARQUET_NVCOMP`).
pub(crate) const ALSO_SPOKEN_MAJOR: u32 = 6;

/// The C interface of nvCOMP 5.3 batched decompression (`nvcomp.h`, `nvcomp/shared_types.h` and the
/// per-codec headers `snappy.h`, `zstd.h`, `lz4.h`, `gzip.h`, `deflate.h`).
#[allow(non_camel_case_types)]
#[allow(dead_code)] // the C header's names, kept whole though some go unused
pub(crate) mod sys {
    use std::ffi::{c_char, c_void};

    /// `nvcompStatus_t`: a C enum, `int` sized.
    pub(crate) type nvcompStatus_t = i32;
    /// `cudaStream_t` (the same handle as the driver's `CUstream`).
    pub(crate) type cudaStream_t = *mut c_void;

    /// `nvcompSuccess`.
    pub(crate) const NVCOMP_SUCCESS: nvcompStatus_t = 0;
    /// `nvcompErrorInvalidValue`.
    pub const NVCOMP_ERROR_INVALID_VALUE: nvcompStatus_t = 10;
    /// `nvcompErrorCannotDecompress`: corrupt input (LZ4 on the CUDA backend) or an output buffer too
    /// small for the chunk (every codec).
    pub const NVCOMP_ERROR_CANNOT_DECOMPRESS: nvcompStatus_t = 12;

    /// Every `nvcompStatus_t` of 5.3 with its name.
    pub(crate) const STATUS_NAMES: [(nvcompStatus_t, &str); 18] = [
        (0, "nvcompSuccess"),
        (10, "nvcompErrorInvalidValue"),
        (11, "nvcompErrorNotSupported"),
        (12, "nvcompErrorCannotDecompress"),
        (13, "nvcompErrorBadChecksum"),
        (14, "nvcompErrorCannotVerifyChecksums"),
        (15, "nvcompErrorOutputBufferTooSmall"),
        (16, "nvcompErrorWrongHeaderLength"),
        (17, "nvcompErrorAlignment"),
        (18, "nvcompErrorChunkSizeTooLarge"),
        (19, "nvcompErrorCannotCompress"),
        (20, "nvcompErrorWrongInputLength"),
        (21, "nvcompErrorBatchSizeTooLarge"),
        (22, "nvcompErrorSubChunkCountTooLarge"),
        (23, "nvcompErrorSubChunkCountTooSmall"),
        (24, "nvcompErrorOutputBufferAlignmentTooSmall"),
        (1000, "nvcompErrorCudaError"),
        (10000, "nvcompErrorInternal"),
    ];

    /// The name of a status (`None` for a value 5.3 does not define).
    pub(crate) fn status_name(status: nvcompStatus_t) -> Option<&'static str> {
        STATUS_NAMES.iter().find(|(s, _)| *s == status).map(|(_, n)| *n)
    }

    /// `nvcompProperties_t`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct nvcompProperties_t {
        /// nvCOMP's version, `major * 1000 + minor * 100 + patch` (`MAKE_SEMANTIC_VERSION`).
        pub version: u32,
        /// The CUDA runtime nvCOMP was built with, `major * 1000 + minor * 10`.
        pub cudart_version: u32,
    }

    /// `nvcompAlignmentRequirements_t`: minimum alignment, in bytes, of each kind of buffer.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub(crate) struct nvcompAlignmentRequirements_t {
        /// Each compressed (input) buffer.
        pub input: usize,
        /// Each decompressed (output) buffer.
        pub output: usize,
        /// The temporary buffer.
        pub temp: usize,
    }

    /// The common shape of every `nvcompBatched<Codec>DecompressOpts_t` of 5.3: 64 bytes, 4-byte
    /// aligned, passed by value, all zero for the defaults, the backend
    /// (`nvcompDecompressBackend_t`) first. The other fields are `int`s or `int`-sized enums left at
    /// zero: `sort_before_hw_decompress` (Snappy, LZ4, Gzip, Deflate), `data_type` and
    /// `bitshuffle_mode` (LZ4: no bitshuffle), `algorithm` (Gzip: naive), then reserved bytes that
    /// must be zero.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub(crate) struct DecompressOpts {
        /// `nvcompDecompressBackend_t`: 0 default, 1 hardware decompression engine, 2 CUDA.
        pub backend: i32,
        /// The codec's other fields and its reserved bytes; zero.
        pub rest: [i32; 15],
    }
    const _: () = assert!(std::mem::size_of::<DecompressOpts>() == 64);
    const _: () = assert!(std::mem::align_of::<DecompressOpts>() == 4);

    /// `nvcompBatchedSnappyDecompressOpts_t`: `{backend, sort_before_hw_decompress, reserved[56]}`.
    pub type nvcompBatchedSnappyDecompressOpts_t = DecompressOpts;
    /// `nvcompBatchedZstdDecompressOpts_t`: `{backend, reserved[60]}`.
    pub type nvcompBatchedZstdDecompressOpts_t = DecompressOpts;
    /// `nvcompBatchedLZ4DecompressOpts_t`: `{backend, sort_before_hw_decompress, data_type,
    /// bitshuffle_mode, reserved[48]}`.
    pub type nvcompBatchedLZ4DecompressOpts_t = DecompressOpts;
    /// `nvcompBatchedGzipDecompressOpts_t`: `{backend, algorithm, sort_before_hw_decompress,
    /// reserved[52]}`.
    pub type nvcompBatchedGzipDecompressOpts_t = DecompressOpts;
    /// `nvcompBatchedDeflateDecompressOpts_t`: `{backend, sort_before_hw_decompress, reserved[56]}`.
    pub type nvcompBatchedDeflateDecompressOpts_t = DecompressOpts;

    /// `nvcompStatus_t nvcompGetProperties(nvcompProperties_t *properties)`.
    pub(crate) type nvcompGetProperties = unsafe extern "C" fn(properties: *mut nvcompProperties_t) -> nvcompStatus_t;

    /// `const char *nvcompGetStatusString(nvcompStatus_t status)`.
    pub(crate) type nvcompGetStatusString = unsafe extern "C" fn(status: nvcompStatus_t) -> *const c_char;

    /// `nvcompBatched<Codec>DecompressGetRequiredAlignments(opts, alignment_requirements)`.
    pub(crate) type DecompressGetRequiredAlignments = unsafe extern "C" fn(
        decompress_opts: DecompressOpts,
        alignment_requirements: *mut nvcompAlignmentRequirements_t,
    ) -> nvcompStatus_t;

    /// `nvcompBatched<Codec>DecompressGetTempSizeSync`: reads the compressed chunks (device arrays
    /// of pointers and sizes) and synchronises `stream`; `device_statuses` may be null.
    pub(crate) type DecompressGetTempSizeSync = unsafe extern "C" fn(
        device_compressed_chunk_ptrs: *const *const c_void,
        device_compressed_chunk_bytes: *const usize,
        num_chunks: usize,
        max_uncompressed_chunk_bytes: usize,
        temp_bytes: *mut usize,
        max_total_uncompressed_bytes: usize,
        decompress_opts: DecompressOpts,
        device_statuses: *mut nvcompStatus_t,
        stream: cudaStream_t,
    ) -> nvcompStatus_t;

    /// `nvcompBatched<Codec>DecompressAsync`: queues the batch on `stream`; every array is in device
    /// memory and has `num_chunks` entries.
    pub(crate) type DecompressAsync = unsafe extern "C" fn(
        device_compressed_chunk_ptrs: *const *const c_void,
        device_compressed_chunk_bytes: *const usize,
        device_uncompressed_buffer_bytes: *const usize,
        device_uncompressed_chunk_bytes: *mut usize,
        num_chunks: usize,
        device_temp_ptr: *mut c_void,
        temp_bytes: usize,
        device_uncompressed_chunk_ptrs: *const *mut c_void,
        decompress_opts: DecompressOpts,
        device_statuses: *mut nvcompStatus_t,
        stream: cudaStream_t,
    ) -> nvcompStatus_t;
}

/// A codec nvCOMP decompresses in batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Raw Snappy (Parquet `SNAPPY`).
    Snappy,
    /// Zstandard frames (Parquet `ZSTD`).
    Zstd,
    /// Raw LZ4 blocks (Parquet `LZ4_RAW`; not the Hadoop-framed `LZ4`).
    Lz4,
    /// Gzip streams (Parquet `GZIP`).
    Gzip,
    /// Raw Deflate (no Parquet codec; cheap to offer).
    Deflate,
}

impl Codec {
    /// Every codec.
    pub const ALL: [Codec; 5] = [Codec::Snappy, Codec::Zstd, Codec::Lz4, Codec::Gzip, Codec::Deflate];

    /// The nvCOMP codec for a Parquet compression: `SNAPPY`, `ZSTD`, `LZ4_RAW`, `GZIP`. `None` for
    /// `UNCOMPRESSED` and for what nvCOMP does not decompress: `BROTLI`, Hadoop-framed `LZ4`, `LZO`.
    pub(crate) fn from_parquet(c: parquet::basic::Compression) -> Option<Codec> {
        use parquet::basic::Compression as C;
        match c {
            C::SNAPPY => Some(Codec::Snappy),
            C::ZSTD(_) => Some(Codec::Zstd),
            C::LZ4_RAW => Some(Codec::Lz4),
            C::GZIP(_) => Some(Codec::Gzip),
            C::UNCOMPRESSED | C::BROTLI(_) | C::LZ4 | C::LZO => None,
        }
    }

    /// The name in nvCOMP's symbols (`nvcompBatched<name>DecompressAsync`).
    pub(crate) fn nvcomp_name(self) -> &'static str {
        match self {
            Codec::Snappy => "Snappy",
            Codec::Zstd => "Zstd",
            Codec::Lz4 => "LZ4",
            Codec::Gzip => "Gzip",
            Codec::Deflate => "Deflate",
        }
    }

    /// The largest compressed or decompressed chunk nvCOMP 5.3 decompresses, bytes
    /// (`nvcomp<Codec>DecompressionMaxAllowedChunkSize`; for Gzip the naive algorithm's limit).
    pub(crate) fn max_chunk_len(self) -> u64 {
        match self {
            Codec::Snappy | Codec::Zstd => (1 << 31) - 1,
            Codec::Lz4 | Codec::Gzip | Codec::Deflate => (1 << 32) - 1,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.nvcomp_name())
    }
}

/// Which engine decompresses (`nvcompDecompressBackend_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DecompressBackend {
    /// nvCOMP chooses: the hardware decompression engine where the GPU has one, else CUDA.
    #[default]
    Default,
    /// The hardware decompression engine (Blackwell). Corrupt input is undefined behaviour there.
    Hardware,
    /// CUDA kernels. LZ4 reports corrupt input as `nvcompErrorCannotDecompress` only here.
    Cuda,
}

impl DecompressBackend {
    /// The options struct with this backend and every other field at its default.
    pub(crate) fn opts(self) -> sys::DecompressOpts {
        sys::DecompressOpts {
            backend: match self {
                DecompressBackend::Default => 0,
                DecompressBackend::Hardware => 1,
                DecompressBackend::Cuda => 2,
            },
            rest: [0; 15],
        }
    }
}

/// Where to look for nvCOMP 5 ([`NvcompLibrary::load`]); [`crate::Settings::nvcomp_search`] builds
/// one from the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvcompSearch {
    /// A file, or a directory holding `libnvcomp.so.5` (itself, or under `lib64/`, or a Python
    /// `site-packages` with `nvidia/libnvcomp/lib64/`). When set it is the only place looked at: a
    /// location the user gave that does not hold a usable nvCOMP 5 is an error, not a reason to pick
    /// up another copy.
    pub explicit: Option<PathBuf>,
    /// Python package directories (`site-packages`, `dist-packages`, `PYTHONPATH` entries), each
    /// looked at for the nvCOMP wheel's `nvidia/libnvcomp/lib64/libnvcomp.so.5`, in order.
    pub python_dirs: Vec<PathBuf>,
    /// Last, whether to ask the system loader for `libnvcomp.so.5` (`LD_LIBRARY_PATH`, ldconfig).
    pub system: bool,
}

impl Default for NvcompSearch {
    fn default() -> Self {
        Self {
            explicit: None,
            python_dirs: Vec::new(),
            system: true,
        }
    }
}

/// One place [`NvcompLibrary::load`] tries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Candidate {
    /// A file path, opened as is.
    File(PathBuf),
    /// A file name for the system loader's search.
    System(&'static str),
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Candidate::File(p) => write!(f, "{}", p.display()),
            Candidate::System(name) => write!(f, "{name} (system loader)"),
        }
    }
}

impl NvcompSearch {
    /// The places tried, in order: the explicit location alone when there is one; otherwise each
    /// Python directory, then the system loader (when `system`).
    pub(crate) fn candidates(&self) -> Vec<Candidate> {
        if let Some(p) = &self.explicit {
            if p.is_dir() {
                return [
                    p.join(LIBRARY_FILE),
                    p.join("lib64").join(LIBRARY_FILE),
                    wheel_library(p),
                ]
                .into_iter()
                .map(Candidate::File)
                .collect();
            }
            return vec![Candidate::File(p.clone())];
        }
        let mut c: Vec<Candidate> = self
            .python_dirs
            .iter()
            .map(|d| Candidate::File(wheel_library(d)))
            .collect();
        if self.system {
            c.push(Candidate::System(LIBRARY_FILE));
        }
        c
    }
}

/// Where the nvCOMP wheel puts its library under a Python package directory.
fn wheel_library(dir: &Path) -> PathBuf {
    dir.join("nvidia").join("libnvcomp").join("lib64").join(LIBRARY_FILE)
}

/// The thin rung: the loaded library, one method per C call.
pub(crate) mod result {
    use std::ffi::{CStr, c_void};
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use libloading::Library;

    use super::{ALSO_SPOKEN_MAJOR, Candidate, Codec, LIBRARY_FILE, NvcompSearch, SUPPORTED_MAJOR, sys};
    use crate::error::{Error, Result};

    /// nvCOMP's version.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub struct NvcompVersion {
        /// Major version.
        pub major: u32,
        /// Minor version.
        pub minor: u32,
        /// Patch level.
        pub patch: u32,
    }

    impl NvcompVersion {
        /// From `nvcompProperties_t::version` (`major * 1000 + minor * 100 + patch`).
        pub(crate) fn from_semver(v: u32) -> Self {
            Self {
                major: v / 1000,
                minor: (v % 1000) / 100,
                patch: v % 100,
            }
        }
    }

    impl std::fmt::Display for NvcompVersion {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
        }
    }

    /// Whether `nvcompProperties_t::version` `v` is one this module speaks: major version
    /// [`SUPPORTED_MAJOR`] or [`ALSO_SPOKEN_MAJOR`]. `Err` says which version it is and what is
    /// needed (the caller names the file).
    pub(crate) fn check_version(v: u32) -> std::result::Result<NvcompVersion, String> {
        let version = NvcompVersion::from_semver(v);
        if version.major == SUPPORTED_MAJOR || version.major == ALSO_SPOKEN_MAJOR {
            Ok(version)
        } else {
            Err(format!(
                "nvCOMP {version}, but gpu-parquet speaks the nvCOMP {SUPPORTED_MAJOR} API \
                 ({LIBRARY_FILE}); install nvCOMP {SUPPORTED_MAJOR}.x"
            ))
        }
    }

    /// The decompression entry points of one codec.
    #[derive(Debug, Clone, Copy)]
    struct CodecFns {
        alignments: sys::DecompressGetRequiredAlignments,
        temp_size_sync: sys::DecompressGetTempSizeSync,
        decompress_async: sys::DecompressAsync,
    }

    /// A loaded nvCOMP 5, every symbol resolved. Never unloaded: the cache holds it for the life of
    /// the process.
    #[derive(Debug)]
    pub struct NvcompLibrary {
        file: PathBuf,
        version: NvcompVersion,
        cudart_version: u32,
        status_string: sys::nvcompGetStatusString,
        codecs: [CodecFns; 5],
        _lib: Library,
    }

    /// What opening one candidate gave: the library, or why it was refused.
    type Opened = std::result::Result<Arc<NvcompLibrary>, String>;

    /// Libraries (and refusals) by candidate, so each is opened once per process.
    static LOADED: Mutex<Vec<(Candidate, Opened)>> = Mutex::new(Vec::new());

    impl NvcompLibrary {
        /// The first candidate of `search` that is a usable nvCOMP 5; otherwise
        /// [`Error::Unavailable`] listing every candidate with the reason it was refused.
        pub fn load(search: &NvcompSearch) -> Result<Arc<Self>> {
            let candidates = search.candidates();
            let mut tried = Vec::new();
            for c in &candidates {
                match Self::open(c) {
                    Ok(lib) => return Ok(lib),
                    Err(reason) => tried.push(format!("{c}: {reason}")),
                }
            }
            let hint = if search.explicit.is_some() {
                "point --nvcomp (GPU_PARQUET_NVCOMP) at libnvcomp.so.5 or its directory"
            } else {
                "install nvCOMP 5 (for example the nvidia-libnvcomp-cu13 wheel) or set --nvcomp \
                 (GPU_PARQUET_NVCOMP) to libnvcomp.so.5 or its directory"
            };
            let reason = if tried.is_empty() {
                format!(
                    "no place to look for {LIBRARY_FILE} (no explicit path, no Python directory, system loader off); {hint}"
                )
            } else {
                format!("no usable {LIBRARY_FILE}; tried {}; {hint}", tried.join("; "))
            };
            Err(Error::Unavailable {
                backend: "nvcomp".into(),
                reason,
            })
        }

        /// Opens one candidate (once per process: later calls return the same library or refusal).
        pub fn open(candidate: &Candidate) -> std::result::Result<Arc<Self>, String> {
            let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, r)) = loaded.iter().find(|(c, _)| c == candidate) {
                return r.clone();
            }
            if let Candidate::File(p) = candidate
                && !p.exists()
            {
                // Not cached: the file may appear later (and a missing file costs nothing to retry).
                return Err("no such file".into());
            }
            let r = Self::open_uncached(candidate).map(Arc::new);
            loaded.push((candidate.clone(), r.clone()));
            r
        }

        fn open_uncached(candidate: &Candidate) -> std::result::Result<Self, String> {
            let lib = match candidate {
                // SAFETY: loading runs the library's initialisers. The candidates are nvCOMP's own
                // file name or a path the user chose for it; nvCOMP's initialisers only set up its
                // statically linked CUDA runtime, which touches no memory of ours. The handle is kept
                // for the life of the process (cached, or leaked on refusal), so no symbol outlives it.
                Candidate::File(p) => unsafe { Library::new(p) },
                // SAFETY: as above.
                Candidate::System(name) => unsafe { Library::new(name) },
            }
            .map_err(|e| format!("cannot be loaded ({e})"))?;
            match Self::resolve(lib, candidate) {
                Ok(l) => Ok(l),
                Err((lib, reason)) => {
                    // Never unload a library once loaded: its static destructors (a CUDA runtime among
                    // them) are not ours to run mid-process. One leaked handle per refused file.
                    std::mem::forget(lib);
                    Err(reason)
                }
            }
        }

        /// Checks the version, then resolves every symbol; on refusal hands the library back.
        fn resolve(lib: Library, candidate: &Candidate) -> std::result::Result<Self, (Library, String)> {
            let get_properties: sys::nvcompGetProperties = match symbol(&lib, "nvcompGetProperties") {
                Ok(f) => f,
                Err(e) => return Err((lib, format!("{e}, so it is not nvCOMP {SUPPORTED_MAJOR}"))),
            };
            // The file the system loader picked, where it was asked by name (and then named in
            // refusals: a candidate file names itself).
            let (file, found) = match candidate {
                Candidate::File(p) => (p.clone(), String::new()),
                Candidate::System(name) => match file_of(get_properties as *const c_void) {
                    Some(f) => (f.clone(), format!("found {}: ", f.display())),
                    None => (PathBuf::from(name), String::new()),
                },
            };
            let mut props = sys::nvcompProperties_t::default();
            // SAFETY: nvcompGetProperties writes one nvcompProperties_t through a valid pointer to a
            // local; it needs no device.
            let status = unsafe { get_properties(&mut props) };
            if status != sys::NVCOMP_SUCCESS {
                return Err((lib, format!("{found}nvcompGetProperties failed with status {status}")));
            }
            let version = match check_version(props.version) {
                Ok(v) => v,
                Err(e) => return Err((lib, format!("{found}{e}"))),
            };
            let describe = |e: String| format!("{found}nvCOMP {version} {e}");
            let status_string = match symbol(&lib, "nvcompGetStatusString") {
                Ok(f) => f,
                Err(e) => return Err((lib, describe(e))),
            };
            let mut codecs = Vec::with_capacity(Codec::ALL.len());
            for codec in Codec::ALL {
                let n = codec.nvcomp_name();
                let fns = (|| {
                    Ok::<_, String>(CodecFns {
                        alignments: symbol(&lib, &format!("nvcompBatched{n}DecompressGetRequiredAlignments"))?,
                        temp_size_sync: symbol(&lib, &format!("nvcompBatched{n}DecompressGetTempSizeSync"))?,
                        decompress_async: symbol(&lib, &format!("nvcompBatched{n}DecompressAsync"))?,
                    })
                })();
                match fns {
                    Ok(f) => codecs.push(f),
                    Err(e) => return Err((lib, describe(e))),
                }
            }
            let codecs: [CodecFns; 5] = codecs.try_into().expect("one entry per codec");
            Ok(Self {
                file,
                version,
                cudart_version: props.cudart_version,
                status_string,
                codecs,
                _lib: lib,
            })
        }

        /// The file loaded.
        pub fn file(&self) -> &Path {
            &self.file
        }

        /// nvCOMP's version.
        pub fn version(&self) -> NvcompVersion {
            self.version
        }

        /// The CUDA runtime version nvCOMP was built with (`major * 1000 + minor * 10`); the driver
        /// must support it.
        pub fn cudart_version(&self) -> u32 {
            self.cudart_version
        }

        /// `nvcompGetStatusString`, with the status's name: "nvcompErrorCannotDecompress (12): The
        /// data cannot be decompressed, ...".
        pub fn status_string(&self, status: sys::nvcompStatus_t) -> String {
            // SAFETY: nvcompGetStatusString returns null or a pointer to a static NUL-terminated string.
            let text = unsafe {
                let p = (self.status_string)(status);
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            let name = sys::status_name(status).unwrap_or("unknown nvcompStatus_t");
            if text.is_empty() {
                format!("{name} ({status})")
            } else {
                format!("{name} ({status}): {text}")
            }
        }

        /// `Err(Error::Nvcomp)` for a status other than success.
        pub fn check(&self, context: &str, status: sys::nvcompStatus_t) -> Result<()> {
            if status == sys::NVCOMP_SUCCESS {
                Ok(())
            } else {
                Err(Error::Nvcomp {
                    context: context.to_string(),
                    status: Some(status),
                    message: self.status_string(status),
                })
            }
        }

        /// `nvcompBatched<Codec>DecompressGetRequiredAlignments`: minimum alignment of input, output
        /// and temporary buffers for `opts` (a host-only call).
        pub(crate) fn required_alignments(
            &self,
            codec: Codec,
            opts: sys::DecompressOpts,
        ) -> Result<sys::nvcompAlignmentRequirements_t> {
            let mut a = sys::nvcompAlignmentRequirements_t::default();
            // SAFETY: the call reads `opts` (by value) and writes one struct through a valid pointer
            // to a local.
            let status = unsafe { (self.codecs[codec.index()].alignments)(opts, &mut a) };
            self.check(&format!("nvcompBatched{codec}DecompressGetRequiredAlignments"), status)?;
            Ok(a)
        }

        /// `nvcompBatched<Codec>DecompressGetTempSizeSync`: bytes of temporary device memory the
        /// batch needs. Synchronises `stream`.
        ///
        /// # Safety
        /// The CUDA context of `stream` is current on this thread. `ptrs` and `sizes` are device
        /// arrays of `num_chunks` entries, ordered on `stream`, describing readable device memory;
        /// `statuses` is null or a writable device array of `num_chunks` statuses.
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn decompress_temp_size_sync(
            &self,
            codec: Codec,
            ptrs: u64,
            sizes: u64,
            num_chunks: usize,
            max_uncompressed_chunk_bytes: usize,
            max_total_uncompressed_bytes: usize,
            opts: sys::DecompressOpts,
            statuses: u64,
            stream: sys::cudaStream_t,
        ) -> Result<usize> {
            let mut temp = 0usize;
            // SAFETY: the caller's contract above; `temp` is a valid host location for the result.
            let status = unsafe {
                (self.codecs[codec.index()].temp_size_sync)(
                    ptrs as *const *const c_void,
                    sizes as *const usize,
                    num_chunks,
                    max_uncompressed_chunk_bytes,
                    &mut temp,
                    max_total_uncompressed_bytes,
                    opts,
                    statuses as *mut sys::nvcompStatus_t,
                    stream,
                )
            };
            self.check(&format!("nvcompBatched{codec}DecompressGetTempSizeSync"), status)?;
            Ok(temp)
        }

        /// `nvcompBatched<Codec>DecompressAsync`: queues the batch on `stream`.
        ///
        /// # Safety
        /// The CUDA context of `stream` is current on this thread. Every address is device memory
        /// ordered on `stream` that stays allocated until the queued work finishes: arrays of
        /// `num_chunks` entries (`src_ptrs`, `src_sizes`, `dst_capacities`, `dst_ptrs` readable;
        /// `actual_sizes` and `statuses` writable), each source chunk readable for its size, each
        /// destination writable for its capacity, `temp` writable for `temp_bytes`; all aligned as
        /// [`Self::required_alignments`] says. The input is valid for the codec (nvCOMP's decoders
        /// do not all check it).
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn decompress_async(
            &self,
            codec: Codec,
            src_ptrs: u64,
            src_sizes: u64,
            dst_capacities: u64,
            actual_sizes: u64,
            num_chunks: usize,
            temp: u64,
            temp_bytes: usize,
            dst_ptrs: u64,
            opts: sys::DecompressOpts,
            statuses: u64,
            stream: sys::cudaStream_t,
        ) -> Result<()> {
            // SAFETY: the caller's contract above.
            let status = unsafe {
                (self.codecs[codec.index()].decompress_async)(
                    src_ptrs as *const *const c_void,
                    src_sizes as *const usize,
                    dst_capacities as *const usize,
                    actual_sizes as *mut usize,
                    num_chunks,
                    temp as *mut c_void,
                    temp_bytes,
                    dst_ptrs as *const *mut c_void,
                    opts,
                    statuses as *mut sys::nvcompStatus_t,
                    stream,
                )
            };
            self.check(&format!("nvcompBatched{codec}DecompressAsync"), status)
        }
    }

    /// Resolves `name` in `lib` as a function pointer of type `T`.
    fn symbol<T: Copy>(lib: &Library, name: &str) -> std::result::Result<T, String> {
        // SAFETY: every `T` asked for is the sys function-pointer type that nvCOMP 5.3's headers
        // declare for `name`; the pointer is used only while `lib` is loaded (it is never unloaded).
        unsafe { lib.get::<T>(name.as_bytes()) }
            .map(|s| *s)
            .map_err(|_| format!("lacks {name}"))
    }

    /// The file a loaded symbol lives in (`dladdr`).
    fn file_of(addr: *const c_void) -> Option<PathBuf> {
        let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        // SAFETY: dladdr only reads the loader's tables and fills `info`, a valid local.
        let ok = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
        if ok == 0 {
            return None;
        }
        // SAFETY: dladdr succeeded, so `info` is initialised; dli_fname is null or a NUL-terminated
        // string owned by the loader for as long as the library stays loaded (forever, here).
        let info = unsafe { info.assume_init() };
        if info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: as above.
        let name = unsafe { CStr::from_ptr(info.dli_fname) };
        Some(PathBuf::from(name.to_string_lossy().into_owned()))
    }

    const _: () = {
        const fn is_send_sync<T: Send + Sync>() {}
        is_send_sync::<NvcompLibrary>();
    };
}

/// One chunk of a batch: compressed bytes at `src` in device memory, to be decompressed into
/// `dst_capacity` bytes at `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressItem {
    /// Device address of the compressed bytes.
    pub src: u64,
    /// Compressed bytes.
    pub src_len: usize,
    /// Device address of the output.
    pub dst: u64,
    /// Bytes available at `dst`; more output than this is a `nvcompErrorCannotDecompress` status.
    pub dst_capacity: usize,
}

/// What nvCOMP reported for one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressOutcome {
    /// The item's `nvcompStatus_t` ([`sys::NVCOMP_SUCCESS`] is 0); [`STATUS_NOT_WRITTEN`] where
    /// nvCOMP wrote none.
    pub status: sys::nvcompStatus_t,
    /// Bytes decompressed (meaningful only with success).
    pub actual_len: usize,
}

/// The status an outcome keeps when nvCOMP did not write one (not an `nvcompStatus_t`).
pub const STATUS_NOT_WRITTEN: sys::nvcompStatus_t = -1;

impl DecompressOutcome {
    /// Whether the item decompressed.
    pub fn is_success(&self) -> bool {
        self.status == sys::NVCOMP_SUCCESS
    }
}

/// nvCOMP batched decompression on the GPU.
#[derive(Debug, Clone)]
pub struct Nvcomp {
    lib: Arc<NvcompLibrary>,
    backend: DecompressBackend,
}

impl Nvcomp {
    /// Decompression through `lib`, on nvCOMP's default backend.
    pub fn new(lib: Arc<NvcompLibrary>) -> Self {
        Self {
            lib,
            backend: DecompressBackend::Default,
        }
    }

    /// Loads nvCOMP from `search` ([`NvcompLibrary::load`]).
    pub fn load(search: &NvcompSearch) -> Result<Self> {
        NvcompLibrary::load(search).map(Self::new)
    }

    /// The same library with another backend.
    pub fn with_backend(mut self, backend: DecompressBackend) -> Self {
        self.backend = backend;
        self
    }

    /// The backend asked for.
    pub(crate) fn backend(&self) -> DecompressBackend {
        self.backend
    }

    /// The library.
    pub fn library(&self) -> &Arc<NvcompLibrary> {
        &self.lib
    }

    /// Decompresses a batch of `codec` chunks on `stream` and returns each item's status and
    /// decompressed length, in order.
    ///
    /// Steps: the items are checked ([`check_items`]); one device array holding the pointers, sizes
    /// and capacities (and room for the results) is uploaded; `DecompressGetTempSizeSync` sizes the
    /// temporary memory for this data; the temporary buffer is allocated on `stream`;
    /// `DecompressAsync` is queued; the statuses and lengths are copied back. **The call
    /// synchronises `stream`** (the upload, the temp-size call and the copy back all wait for it)
    /// and returns when the batch has finished.
    ///
    /// A per-item failure is an outcome, not an error: the caller judges statuses and lengths
    /// (nothing here knows about Parquet). `Err` is for a refused batch (empty, an item of zero
    /// capacity or length, misaligned, too large), a failed nvCOMP or CUDA call.
    ///
    /// The caller's contract, which nothing here can check: every `src .. src + src_len` and
    /// `dst .. dst + dst_capacity` is device memory of `stream`'s context that it owns, writes to
    /// the sources and uses of the destinations on other streams are ordered against `stream`, and
    /// the compressed bytes are valid for the codec (nvCOMP's Snappy, Zstd, Gzip and Deflate treat
    /// corrupt input as undefined behaviour; validate sizes and headers before).
    pub fn decompress(
        &self,
        codec: Codec,
        stream: &Stream,
        items: &[DecompressItem],
    ) -> Result<Vec<DecompressOutcome>> {
        self.decompress_counted(codec, stream, items, &mut CopyEngineTransfers::new(stream))
            .map(|(outcomes, _)| outcomes)
    }

    /// [`Self::decompress`], moving the argument arrays and the results through `transfers` (the
    /// copy engines', or the GPU decoder's own, which keep off them), with the bytes of temporary
    /// device memory nvCOMP asked for the batch (allocated on `stream` for the call, freed when it
    /// returns). Same contract.
    pub(crate) fn decompress_counted(
        &self,
        codec: Codec,
        stream: &Stream,
        items: &[DecompressItem],
        transfers: &mut dyn BatchTransfers,
    ) -> Result<(Vec<DecompressOutcome>, usize)> {
        let opts = self.backend.opts();
        let align = self.lib.required_alignments(codec, opts)?;
        check_items(codec, &align, items)?;
        let n = items.len();
        let max_chunk = items.iter().map(|i| i.dst_capacity).max().unwrap_or(0);
        let total = items
            .iter()
            .try_fold(0usize, |t, i| t.checked_add(i.dst_capacity))
            .ok_or_else(|| refuse(codec, "the output capacities overflow usize"))?;

        // One upload: [src ptrs | src sizes | dst ptrs | dst capacities | actual sizes | statuses].
        const _: () = assert!(std::mem::size_of::<usize>() == 8);
        let status_words = n.div_ceil(2);
        let mut words = vec![0u64; 5 * n + status_words];
        for (i, it) in items.iter().enumerate() {
            words[i] = it.src;
            words[n + i] = it.src_len as u64;
            words[2 * n + i] = it.dst;
            words[3 * n + i] = it.dst_capacity as u64;
        }
        bytemuck::cast_slice_mut::<u64, i32>(&mut words[5 * n..])[..n].fill(STATUS_NOT_WRITTEN);
        let args = transfers.upload_words(&words)?;
        let result = self.run_batch(codec, stream, &align, (n, max_chunk, total), args, transfers);
        transfers.release(args);
        result
    }

    /// The batch of [`Self::decompress_counted`] over its arguments at `args` (laid out as uploaded
    /// there): `n` items, the largest output capacity and their sum; `align`, the codec's.
    fn run_batch(
        &self,
        codec: Codec,
        stream: &Stream,
        align: &sys::nvcompAlignmentRequirements_t,
        (n, max_chunk, total): (usize, usize, usize),
        args: u64,
        transfers: &mut dyn BatchTransfers,
    ) -> Result<(Vec<DecompressOutcome>, usize)> {
        let opts = self.backend.opts();
        let status_words = n.div_ceil(2);
        let at = |k: usize| args + (k * n * 8) as u64;
        let (src_ptrs, src_sizes, dst_ptrs, dst_caps, actual, statuses) = (at(0), at(1), at(2), at(3), at(4), at(5));
        let cu_stream = stream.cuda().cu_stream() as sys::cudaStream_t;

        stream.context().bind()?;
        // SAFETY: the context is bound above; the arrays are `args`, n entries each, uploaded in
        // `stream`'s order and alive until this returns; the chunks they point to are the caller's
        // (see the contract in the docs), checked non-null and aligned by check_items.
        let temp_bytes = unsafe {
            self.lib.decompress_temp_size_sync(
                codec, src_ptrs, src_sizes, n, max_chunk, total, opts, statuses, cu_stream,
            )
        }?;
        // cuMemAlloc aligns to at least 256 bytes; check what the codec asks anyway.
        let temp = DeviceBuffer::<u8>::alloc_pooled(stream, temp_bytes.max(1))?;
        if align.temp > 1 && !temp.device_address().is_multiple_of(align.temp as u64) {
            return Err(refuse(
                codec,
                format!("the temporary buffer is not {}-byte aligned", align.temp),
            ));
        }
        stream.context().bind()?;
        // SAFETY: the context is bound; every array lies in `args` and the temporary memory in
        // `temp`, both ordered on `stream` and alive until the read below has waited for the batch
        // (`args` is released after it, `temp`'s drop is ordered on the stream); sources and
        // destinations are the caller's (contract in the docs), checked non-empty, non-null and
        // aligned.
        unsafe {
            self.lib.decompress_async(
                codec,
                src_ptrs,
                src_sizes,
                dst_caps,
                actual,
                n,
                temp.device_address(),
                temp_bytes,
                dst_ptrs,
                opts,
                statuses,
                cu_stream,
            )
        }?;
        // Waits for `stream`: the batch has finished when this returns.
        let back = transfers.read_words(at(4), n + status_words)?;
        drop(temp);
        let statuses: &[i32] = &bytemuck::cast_slice::<u64, i32>(&back[n..])[..n];
        let outcomes = back[..n]
            .iter()
            .zip(statuses)
            .map(|(&len, &status)| DecompressOutcome {
                status,
                actual_len: len as usize,
            })
            .collect();
        Ok((outcomes, temp_bytes))
    }
}

/// How [`Nvcomp::decompress_counted`] moves a batch's argument arrays to the device and its results back.
pub(crate) trait BatchTransfers {
    /// Device memory, ordered on the batch's stream, holding `words`: its address.
    fn upload_words(&mut self, words: &[u64]) -> Result<u64>;
    /// `count` words at `addr` (inside an upload), once the work queued on the stream has finished.
    fn read_words(&mut self, addr: u64, count: usize) -> Result<Vec<u64>>;
    /// The upload at `addr` is no longer needed (its later uses are queued on the stream).
    fn release(&mut self, addr: u64);
}

/// [`BatchTransfers`] through `cuMemcpy` (the copy engines).
pub(crate) struct CopyEngineTransfers<'s> {
    stream: &'s Stream,
    buffers: Vec<DeviceBuffer<u64>>,
}

impl<'s> CopyEngineTransfers<'s> {
    /// Transfers on `stream`.
    pub(crate) fn new(stream: &'s Stream) -> Self {
        CopyEngineTransfers {
            stream,
            buffers: Vec::new(),
        }
    }
}

impl BatchTransfers for CopyEngineTransfers<'_> {
    fn upload_words(&mut self, words: &[u64]) -> Result<u64> {
        // Pool memory: a `cuMemFree` here would wait for the whole device, including the next step's
        // reads still being copied in.
        let b = DeviceBuffer::<u64>::from_host_pooled(self.stream, words)?;
        let addr = b.device_address();
        self.buffers.push(b);
        Ok(addr)
    }

    fn read_words(&mut self, addr: u64, count: usize) -> Result<Vec<u64>> {
        let b = self
            .buffers
            .iter()
            .find(|b| addr >= b.device_address() && addr < b.device_address() + b.num_bytes() as u64)
            .ok_or_else(|| Error::device("reading nvCOMP's results", "an address outside the upload"))?;
        let first = ((addr - b.device_address()) / 8) as usize;
        b.copy_range_to_host(first..first + count)
    }

    fn release(&mut self, addr: u64) {
        self.buffers.retain(|b| b.device_address() != addr);
    }
}

fn refuse(codec: Codec, message: impl Into<String>) -> Error {
    Error::Nvcomp {
        context: format!("nvCOMP {codec} decompression"),
        status: None,
        message: message.into(),
    }
}

/// Refuses a batch nvCOMP must not see: empty; an item with a null address, no input, no output
/// capacity, an address range that wraps, a size over the codec's limit
/// ([`Codec::max_chunk_len`]) or a buffer not aligned as `align` requires. The error names the item.
pub(crate) fn check_items(
    codec: Codec,
    align: &sys::nvcompAlignmentRequirements_t,
    items: &[DecompressItem],
) -> Result<()> {
    if items.is_empty() {
        return Err(refuse(codec, "an empty batch (nothing to decompress)"));
    }
    let max = codec.max_chunk_len();
    for (i, it) in items.iter().enumerate() {
        let bad = |m: String| Err(refuse(codec, format!("item {i} of {}: {m}", items.len())));
        if it.src == 0 || it.dst == 0 {
            return bad(format!("null address (src {:#x}, dst {:#x})", it.src, it.dst));
        }
        if it.src_len == 0 {
            return bad("no compressed bytes".into());
        }
        if it.dst_capacity == 0 {
            return bad("zero output capacity".into());
        }
        if it.src_len as u64 > max || it.dst_capacity as u64 > max {
            return bad(format!(
                "{} compressed / {} output bytes exceed nvCOMP's {codec} limit of {max} per chunk",
                it.src_len, it.dst_capacity
            ));
        }
        if it.src.checked_add(it.src_len as u64).is_none() || it.dst.checked_add(it.dst_capacity as u64).is_none() {
            return bad("address range wraps around".into());
        }
        for (what, addr, a) in [("input", it.src, align.input), ("output", it.dst, align.output)] {
            if a > 1 && !addr.is_multiple_of(a as u64) {
                return bad(format!(
                    "{what} address {addr:#x} is not {a}-byte aligned, as nvCOMP's {codec} requires"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::result::check_version;
    use super::*;

    /// nvCOMP 5.3 unpacked as the Python wheel lays it out (present on the development machine).
    const WHEEL_DIR: &str = "/opt/nvcomp";

    fn item(src: u64, src_len: usize, dst: u64, dst_capacity: usize) -> DecompressItem {
        DecompressItem {
            src,
            src_len,
            dst,
            dst_capacity,
        }
    }

    #[test]
    fn candidates_come_in_order_explicit_alone() {
        let s = NvcompSearch {
            explicit: None,
            python_dirs: vec!["/a".into(), "/b/site-packages".into()],
            system: true,
        };
        assert_eq!(
            s.candidates(),
            vec![
                Candidate::File("/a/nvidia/libnvcomp/lib64/libnvcomp.so.5".into()),
                Candidate::File("/b/site-packages/nvidia/libnvcomp/lib64/libnvcomp.so.5".into()),
                Candidate::System("libnvcomp.so.5"),
            ]
        );
        let no_system = NvcompSearch {
            system: false,
            ..s.clone()
        };
        assert_eq!(no_system.candidates().len(), 2);

        // An explicit file is the only candidate; a directory gives its three layouts.
        let file = NvcompSearch {
            explicit: Some("/x/libnvcomp.so.5".into()),
            ..s.clone()
        };
        assert_eq!(file.candidates(), vec![Candidate::File("/x/libnvcomp.so.5".into())]);
        let dir = tempfile::tempdir().unwrap();
        let d = NvcompSearch {
            explicit: Some(dir.path().into()),
            ..s
        };
        assert_eq!(
            d.candidates(),
            vec![
                Candidate::File(dir.path().join("libnvcomp.so.5")),
                Candidate::File(dir.path().join("lib64/libnvcomp.so.5")),
                Candidate::File(dir.path().join("nvidia/libnvcomp/lib64/libnvcomp.so.5")),
            ]
        );
    }

    #[test]
    fn nothing_loadable_lists_every_place_tried() {
        let dir = tempfile::tempdir().unwrap();
        // A file with the right name that is not a library at all.
        let fake = dir.path().join("fake/nvidia/libnvcomp/lib64");
        std::fs::create_dir_all(&fake).unwrap();
        std::fs::write(fake.join(LIBRARY_FILE), b"not an ELF file").unwrap();
        let search = NvcompSearch {
            explicit: None,
            python_dirs: vec![dir.path().join("empty"), dir.path().join("fake")],
            system: false,
        };
        let e = NvcompLibrary::load(&search).unwrap_err();
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.starts_with("nvcomp backend unavailable: no usable libnvcomp.so.5; tried "),
            "{m}"
        );
        let empty = format!(
            "{}: no such file",
            dir.path().join("empty/nvidia/libnvcomp/lib64/libnvcomp.so.5").display()
        );
        assert!(m.contains(&empty), "{m}");
        let bad = format!("{}: cannot be loaded (", fake.join(LIBRARY_FILE).display());
        assert!(m.contains(&bad), "{m}");
        assert!(m.contains("install nvCOMP 5"), "{m}");

        // An explicit path that does not exist is an error naming it, the hint naming the setting.
        let explicit = NvcompSearch {
            explicit: Some(dir.path().join("nowhere.so")),
            python_dirs: vec![WHEEL_DIR.into()],
            system: true,
        };
        let m = NvcompLibrary::load(&explicit).unwrap_err().to_string();
        assert!(m.contains("nowhere.so: no such file"), "{m}");
        assert!(
            !m.contains(WHEEL_DIR),
            "an explicit path is the only place looked at: {m}"
        );
        assert!(m.contains("GPU_PARQUET_NVCOMP"), "{m}");

        let nowhere = NvcompSearch {
            explicit: None,
            python_dirs: vec![],
            system: false,
        };
        let m = NvcompLibrary::load(&nowhere).unwrap_err().to_string();
        assert!(m.contains("no place to look"), "{m}");
    }

    #[test]
    fn only_major_versions_5_and_6_are_accepted() {
        assert_eq!(
            check_version(5300),
            Ok(NvcompVersion {
                major: 5,
                minor: 3,
                patch: 0
            })
        );
        assert_eq!(check_version(5012).unwrap().to_string(), "5.0.12");
        assert_eq!(check_version(6012).unwrap().to_string(), "6.0.12");
        for (v, shown) in [(7000, "7.0.0"), (4210, "4.2.10"), (0, "0.0.0")] {
            let e = check_version(v).unwrap_err();
            assert!(e.starts_with(&format!("nvCOMP {shown}, but")), "{e}");
            assert!(e.contains("nvCOMP 5 API"), "{e}");
        }
    }

    #[test]
    fn a_library_without_nvcomp_symbols_is_refused_by_name() {
        // libc loads everywhere and has none of nvCOMP's symbols.
        let libc_path = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists());
        let Some(libc_path) = libc_path else { return };
        let e = NvcompLibrary::load(&NvcompSearch {
            explicit: Some(libc_path.into()),
            python_dirs: vec![],
            system: false,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!(
                "{libc_path}: lacks nvcompGetProperties, so it is not nvCOMP 5"
            )),
            "{e}"
        );
    }

    /// Builds a stand-in library exporting `nvcompGetProperties` (reporting `version`) and, when
    /// `status_string`, `nvcompGetStatusString`; `None` without a C compiler.
    fn fake_library(dir: &Path, file: &str, version: u32, status_string: bool) -> Option<PathBuf> {
        let src = dir.join(format!("{file}.c"));
        let mut c = format!(
            "typedef struct {{ unsigned v, c; }} P;\nint nvcompGetProperties(P *p) {{ p->v = {version}; p->c = 13000; return 0; }}\n"
        );
        if status_string {
            c.push_str("const char *nvcompGetStatusString(int s) { return \"fake\"; }\n");
        }
        std::fs::write(&src, c).unwrap();
        let out = dir.join(file);
        let built = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        built.then_some(out)
    }

    #[test]
    fn another_major_version_or_a_missing_symbol_is_refused_by_file_and_version() {
        let dir = tempfile::tempdir().unwrap();
        let Some(v7) = fake_library(dir.path(), "libnvcomp.so.7", 7000, true) else {
            crate::test_skip("no C compiler to build a stand-in library");
            return;
        };
        // The error of loading only `p`, and a check that it names `file` and says `why`.
        let refusal = |p: &Path| {
            let only = NvcompSearch {
                explicit: Some(p.into()),
                python_dirs: vec![],
                system: false,
            };
            NvcompLibrary::load(&only).unwrap_err().to_string()
        };
        let says = |m: &str, file: &Path, why: &str| {
            assert!(m.contains(&format!("{}: {why}", file.display())), "{m}");
        };
        says(
            &refusal(&v7),
            &v7,
            "nvCOMP 7.0.0, but gpu-parquet speaks the nvCOMP 5 API",
        );
        // nvCOMP 6 passes the version check and is then held to every symbol, as 5 is.
        let v6 = fake_library(dir.path(), "libnvcomp.so.6", 6000, true).unwrap();
        let lacks_alignments = "lacks nvcompBatchedSnappyDecompressGetRequiredAlignments";
        says(&refusal(&v6), &v6, &format!("nvCOMP 6.0.0 {lacks_alignments}"));

        let sub = dir.path().join("five");
        std::fs::create_dir_all(&sub).unwrap();
        let v5 = fake_library(&sub, LIBRARY_FILE, 5301, true).unwrap();
        let m = refusal(&sub);
        says(&m, &v5, &format!("nvCOMP 5.3.1 {lacks_alignments}"));
        // The directory's other layouts were tried too, and said so.
        assert!(m.contains("lib64/libnvcomp.so.5: no such file"), "{m}");

        let bare = fake_library(dir.path(), "bare.so", 5300, false).unwrap();
        let m = refusal(&bare);
        assert!(m.contains("bare.so: nvCOMP 5.3.0 lacks nvcompGetStatusString"), "{m}");
    }

    #[test]
    fn the_wheel_loads_once_and_reports_version_and_alignments() {
        if !wheel_library(Path::new(WHEEL_DIR)).exists() {
            crate::test_skip(&format!("no nvCOMP wheel at {WHEEL_DIR}"));
            return;
        }
        let search = NvcompSearch {
            explicit: None,
            python_dirs: vec!["/nonexistent".into(), WHEEL_DIR.into()],
            system: false,
        };
        let lib = NvcompLibrary::load(&search).expect("nvCOMP from the wheel directory");
        assert_eq!(lib.version().major, 5);
        assert_eq!(lib.file(), wheel_library(Path::new(WHEEL_DIR)));
        assert!(lib.cudart_version() >= 12000, "{}", lib.cudart_version());
        // Loaded once per process: the same library again.
        let again = NvcompLibrary::load(&search).unwrap();
        assert!(Arc::ptr_eq(&lib, &again));
        let explicit = NvcompLibrary::load(&NvcompSearch {
            explicit: Some(PathBuf::from(WHEEL_DIR).join("nvidia/libnvcomp")),
            python_dirs: vec![],
            system: false,
        })
        .unwrap();
        assert_eq!(explicit.version(), lib.version());

        assert!(
            lib.status_string(sys::NVCOMP_ERROR_CANNOT_DECOMPRESS)
                .starts_with("nvcompErrorCannotDecompress (12): "),
            "{}",
            lib.status_string(12)
        );
        for codec in Codec::ALL {
            for backend in [DecompressBackend::Default, DecompressBackend::Cuda] {
                let a = lib.required_alignments(codec, backend.opts()).unwrap();
                for x in [a.input, a.output, a.temp] {
                    assert!(x.is_power_of_two() && x <= 256, "{codec}: {a:?}");
                }
            }
        }
    }

    #[test]
    fn batches_nvcomp_must_not_see_are_refused() {
        let any = sys::nvcompAlignmentRequirements_t {
            input: 1,
            output: 1,
            temp: 1,
        };
        let eight = sys::nvcompAlignmentRequirements_t {
            input: 8,
            output: 8,
            temp: 8,
        };
        check_items(Codec::Snappy, &any, &[item(0x1001, 10, 0x2003, 100)]).unwrap();
        let refused = |codec, align, items: &[DecompressItem], want: &str| {
            let e = check_items(codec, align, items).unwrap_err();
            assert!(matches!(e, Error::Nvcomp { status: None, .. }), "{e:?}");
            let m = e.to_string();
            assert!(m.contains(want), "{m}");
        };
        refused(Codec::Snappy, &any, &[], "an empty batch");
        let ok = item(0x1000, 10, 0x2000, 100);
        refused(
            Codec::Lz4,
            &any,
            &[ok, item(0x1000, 10, 0x2000, 0)],
            "item 1 of 2: zero output capacity",
        );
        refused(Codec::Lz4, &any, &[item(0x1000, 0, 0x2000, 10)], "no compressed bytes");
        refused(Codec::Lz4, &any, &[item(0, 10, 0x2000, 10)], "null address");
        refused(
            Codec::Zstd,
            &eight,
            &[item(0x1004, 10, 0x2000, 10)],
            "input address 0x1004 is not 8-byte aligned",
        );
        refused(
            Codec::Zstd,
            &eight,
            &[item(0x1000, 10, 0x2001, 10)],
            "output address 0x2001",
        );
        refused(
            Codec::Snappy,
            &any,
            &[item(0x1000, 10, 0x2000, 1 << 31)],
            "exceed nvCOMP's Snappy limit",
        );
        refused(Codec::Gzip, &any, &[item(u64::MAX - 4, 10, 0x2000, 10)], "wraps");
    }

    #[test]
    fn parquet_codecs_map_to_nvcomp() {
        use parquet::basic::{Compression as C, GzipLevel, ZstdLevel};
        assert_eq!(Codec::from_parquet(C::SNAPPY), Some(Codec::Snappy));
        assert_eq!(Codec::from_parquet(C::ZSTD(ZstdLevel::default())), Some(Codec::Zstd));
        assert_eq!(Codec::from_parquet(C::LZ4_RAW), Some(Codec::Lz4));
        assert_eq!(Codec::from_parquet(C::GZIP(GzipLevel::default())), Some(Codec::Gzip));
        for c in [C::UNCOMPRESSED, C::LZ4, C::LZO, C::BROTLI(Default::default())] {
            assert_eq!(Codec::from_parquet(c), None, "{c:?}");
        }
        assert_eq!(sys::status_name(12), Some("nvcompErrorCannotDecompress"));
        assert_eq!(sys::status_name(STATUS_NOT_WRITTEN), None);
    }
}
