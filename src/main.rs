//! The `gpu-parquet` command line: a thin shell over the library. It parses arguments, reads the
//! environment once ([`Settings::from_env`], with flags in place of their variables), calls the
//! [`Reader`] (or `inspect`, `check`, `bench`, the dataset reader), and prints.
//!
//! Errors print as `error: <message>` on stderr (plus a `caused by:` line for each cause the message
//! does not already include), with exit status 1; argument errors are clap's own (usage, suggestions,
//! exit status 2). Output is printed only after every library object is dropped, so the cuFile driver is
//! closed before the process ends, whatever happens to stdout.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use gpu_parquet::config::Key;
use gpu_parquet::io::DestBuffer;
use gpu_parquet::{BackendKind, Error, Reader, Settings};

#[derive(Debug, Parser)]
#[command(
    name = "gpu-parquet",
    version,
    about = "Load Parquet columns onto NVIDIA GPUs, honestly reporting the I/O path every byte took"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a file's schema, row groups and column chunks (byte ranges, codecs, encodings, pages).
    Inspect {
        /// The Parquet file.
        file: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Read column chunks (onto the GPU where there is one) and print the per-column path report.
    Read(ReadArgs),
    /// Read a dataset (a directory, where `key=value` folders become columns; a glob pattern; or
    /// several files of one schema) onto one or several GPUs at once, or on the host where there is
    /// no GPU or with `--backend host`, and print rows, bytes, time and, per GPU, where its bytes went.
    Dataset(DatasetArgs),
    /// Say what this machine and DIR's file system can do: GPU, cuFile, nvidia-fs, O_DIRECT, verdicts.
    Check {
        /// Directory to try registration and O_DIRECT in.
        #[arg(default_value = ".")]
        dir: PathBuf,
        #[command(flatten)]
        io: IoArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Read all column chunks of FILE through every available path, hot (and cold with
    /// --drop-caches, which drops the whole machine's page cache and needs root), as a table.
    Bench(BenchArgs),
}

/// Settings that also have an environment variable (the flag wins); parsed and bounded by the library.
#[derive(Debug, Args)]
struct IoArgs {
    /// CUDA device ordinal [GPU_PARQUET_DEVICE; default 0].
    #[arg(long, allow_hyphen_values = true)]
    device: Option<String>,
    /// on (never cuFile), off (cuFile or fail), auto [GPU_PARQUET_COMPAT_MODE; default auto].
    #[arg(long)]
    compat_mode: Option<String>,
    /// I/O threads, 0 to 1024; 0: one per core [GPU_PARQUET_THREADS].
    #[arg(long, allow_hyphen_values = true)]
    threads: Option<String>,
    /// Largest read task in MiB, 1 to 1024 [GPU_PARQUET_TASK_SIZE_MB; default 8].
    #[arg(long, allow_hyphen_values = true)]
    task_size_mb: Option<String>,
    /// With cuFile in use, tasks under this many KiB go staged [GPU_PARQUET_SMALL_READ_KB; default 16].
    #[arg(long, allow_hyphen_values = true)]
    small_read_kb: Option<String>,
    /// Use O_DIRECT where the file system allows it (reads 4 KiB aligned) [GPU_PARQUET_DIRECT: 1, 0, or
    /// cold (default): where most of a read's pages are not in the page cache].
    #[arg(long)]
    direct: bool,
    /// Device-memory budget of a GPU decode, e.g. 8GiB, 512MiB, 1.5GB or bytes (steps of row groups
    /// are cut to fit); at least 1MiB; default half of the GPU's free memory, what its memory pool holds
    /// unused counted as free [GPU_PARQUET_MEMORY_LIMIT].
    #[arg(long, value_name = "SIZE", conflicts_with = "memory_limit_mb")]
    memory_limit: Option<gpu_parquet::ByteSize>,
    /// The same in MiB (kept for old scripts) [GPU_PARQUET_MEMORY_LIMIT_MB].
    #[arg(long, hide = true, allow_hyphen_values = true)]
    memory_limit_mb: Option<String>,
    /// The fewest steps a GPU decode cuts a read into (the next step is read while one is decoded).
    #[arg(long, allow_hyphen_values = true)]
    decode_steps: Option<String>,
    /// Steps a GPU decode decodes at once (default 4 where compressed pages set a step a floor of GPU time, else 2; 1 where the memory budget holds only two steps).
    #[arg(long, allow_hyphen_values = true)]
    decode_threads: Option<String>,
    /// nvCOMP 5's `libnvcomp.so.5` (or nvCOMP 6's `libnvcomp.so.6`), or a directory holding nvCOMP 5
    /// (default: Python installs, then the system).
    #[arg(long)]
    nvcomp: Option<String>,
    /// Hand compressed pages to nvCOMP without checking them first (trusted files only: nvCOMP's
    /// behaviour on corrupt input is undefined).
    #[arg(long)]
    trust_compressed: bool,
}

impl IoArgs {
    /// The flags given, as the library's settings keys.
    fn flags(&self) -> Vec<(Key, String)> {
        let mut f: Vec<(Key, String)> = [
            (Key::Device, &self.device),
            (Key::CompatMode, &self.compat_mode),
            (Key::Threads, &self.threads),
            (Key::TaskSize, &self.task_size_mb),
            (Key::SmallRead, &self.small_read_kb),
            (Key::MemoryLimit, &self.memory_limit_mb),
            (Key::DecodeSteps, &self.decode_steps),
            (Key::DecodeThreads, &self.decode_threads),
            (Key::Nvcomp, &self.nvcomp),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect();
        if let Some(size) = self.memory_limit {
            f.push((Key::MemoryLimitSize, size.to_string()));
        }
        if self.direct {
            f.push((Key::Direct, "1".into()));
        }
        if self.trust_compressed {
            f.push((Key::TrustCompressed, "1".into()));
        }
        f
    }

    /// The settings, refusing a `--device` (or its variable) that names no GPU here and an nvCOMP path
    /// that does not exist, rather than ignoring them.
    fn settings(&self) -> gpu_parquet::Result<Settings> {
        let settings = Settings::from_env(&self.flags())?;
        let visible = gpu_parquet::gpu::GpuContext::device_count();
        if settings.device >= visible && (visible > 0 || settings.device != 0) {
            if visible == 0 {
                return Err(Error::Config {
                    setting: format!("--device {}", settings.device),
                    message: format!("there is no GPU here ({})", no_gpu_reason()),
                });
            }
            return Err(Error::NoSuchDevice {
                ordinal: settings.device,
                visible,
            });
        }
        if let Some(path) = &settings.nvcomp
            && !path.exists()
        {
            return Err(Error::Config {
                setting: format!("--nvcomp {}", path.display()),
                message: "no such file or directory (give libnvcomp.so.5 or the directory holding it)".into(),
            });
        }
        Ok(settings)
    }

    /// [`IoArgs::settings`] for a command that reads: `--compat-mode off` (cuFile or fail) also fails
    /// here without a GPU, instead of reading on the host.
    fn read_settings(&self) -> gpu_parquet::Result<Settings> {
        let settings = self.settings()?;
        if settings.policy.compat_mode == gpu_parquet::CompatMode::Off
            && gpu_parquet::gpu::GpuContext::device_count() == 0
        {
            return Err(Error::Unavailable {
                backend: "cufile".into(),
                reason: format!(
                    "--compat-mode off asks for cuFile or failure, and there is no GPU here ({})",
                    no_gpu_reason()
                ),
            });
        }
        Ok(settings)
    }
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// The Parquet file.
    file: PathBuf,
    /// Columns to read: top-level names or dotted paths to nested leaves (default: all).
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Hot repetitions per path (the best is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Also one cold run per path, each after dropping the whole machine's page cache (needs root;
    /// it slows everything else running on the machine). Without it the cold rows are left out.
    #[arg(long)]
    drop_caches: bool,
    /// Skip the cold runs (the default; overrides --drop-caches).
    #[arg(long)]
    no_cold: bool,
    /// Thread counts to try for the staged path.
    #[arg(long, value_delimiter = ',', default_value = "8,12,16")]
    staged_threads: Vec<usize>,
    /// Leave out the decode rows (file to decoded device columns, and decode alone).
    #[arg(long)]
    no_decode: bool,
    /// Leave out the host, `O_DIRECT` and cuFile rows: the pinned copy, the staged reads and the
    /// decode rows only (to compare decode settings quickly).
    #[arg(long, conflicts_with = "no_decode")]
    only_decode: bool,
    /// Also measure a selective read (repeatable): `NAME:EXPR` or an expression (see `read
    /// --filter`). Rows: filtered into device columns, the same columns unfiltered, and filtered on
    /// the host with arrow-rs (not with --only-decode), each with the bytes read and rows kept.
    #[arg(long = "filter", value_name = "NAME:EXPR")]
    filters: Vec<String>,
    #[command(flatten)]
    io: IoArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ReadArgs {
    /// The Parquet file.
    file: PathBuf,
    /// Columns to read: top-level names or dotted paths to nested leaves (default: all).
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Row groups to read, by index (default: all).
    #[arg(long, value_delimiter = ',')]
    row_groups: Option<Vec<usize>>,
    /// Read only the rows this filter accepts, e.g. "l_shipdate >= '1994-01-01' and l_discount
    /// between 0.05 and 0.07": row groups pruned by statistics, bloom filters and the page index
    /// (the summary is printed), rows filtered exactly after the decode (on the GPU when it decodes
    /// there; the report says where and how many rows it kept).
    #[arg(long)]
    filter: Option<String>,
    /// With --filter and a decode: 2 reads the filter's columns first, then only the other columns'
    /// pages that hold an accepted row; 1 reads every column's pages of the rows pruning kept at once;
    /// auto reads a step in one pass where its other columns' pages are at most 64 MiB and in the page
    /// cache (a second pass would cost more than it saves), else in two.
    #[arg(long, default_value = "auto", value_parser = parse_filter_passes)]
    filter_passes: gpu_parquet::filter::FilterPasses,
    /// auto (the best GPU path here; host memory without a GPU), staged, cufile or host.
    #[arg(long, default_value = "auto")]
    backend: String,
    #[command(flatten)]
    io: IoArgs,
    /// Check the result: the fetched bytes against the file's bytes, and GPU-decoded columns against
    /// arrow-rs decoding the same file, value for value.
    #[arg(long)]
    verify: bool,
    /// Where to decode: `auto` (the GPU when the backend reads into device memory, else the host),
    /// `gpu`, `host` (arrow-rs on the CPU), or `none` (column chunks only, still encoded).
    #[arg(long, default_value = "auto")]
    decode: String,
    /// Write the decoded table (what the GPU decoded, on the GPU path) as an Arrow IPC file; `-` (or
    /// `/dev/stdout`) writes it to standard output, and the report then goes to stderr.
    #[arg(long, allow_hyphen_values = true)]
    output: Option<PathBuf>,
    /// Read the selection this many times first, in the same process, and report the read after
    /// them: the figures with memory pools grown and kernels loaded, as `bench`'s hot rows have them.
    #[arg(long, default_value_t = 0)]
    warm_up: usize,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct DatasetArgs {
    /// A directory, a glob pattern (quoted), or the files, in order.
    #[arg(required = true)]
    paths: Vec<String>,
    /// GPUs to share the row groups across, by ordinal (default: the `--device`); the same ordinal
    /// twice puts two shares on one GPU.
    #[arg(long, value_delimiter = ',')]
    devices: Option<Vec<usize>>,
    /// Columns to read: top-level names or dotted paths to nested leaves, and partition columns
    /// (default: all, partition columns included; with --columns a partition column is read only
    /// when named).
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Read only the rows this filter accepts (the syntax of `read --filter`). Its top-level `and`
    /// terms on partition columns skip whole files; the others prune each file's row groups and
    /// pages, and filter rows exactly after the decode.
    #[arg(long)]
    filter: Option<String>,
    /// With --filter: 2 reads each file's filter columns first, then only the other columns' pages
    /// holding an accepted row; 1 reads every column's pages of the rows pruning kept at once; auto
    /// reads a step in one pass where its other columns' pages are few and in the page cache.
    #[arg(long, default_value = "auto", value_parser = parse_filter_passes)]
    filter_passes: gpu_parquet::filter::FilterPasses,
    /// auto (the GPUs; host memory without a GPU), staged, cufile or host.
    #[arg(long, default_value = "auto")]
    backend: String,
    #[command(flatten)]
    io: IoArgs,
    /// Check the read against arrow-rs's own reader of every file on the host, value for value (on
    /// the GPU path and the host path alike).
    #[arg(long)]
    verify: bool,
    /// Write the rows read (partition columns included) as an Arrow IPC file, as `read --output`
    /// does; `-` writes it to standard output, and the report then goes to stderr.
    #[arg(long, allow_hyphen_values = true)]
    output: Option<PathBuf>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A spinner on stderr that appears only if the work takes longer than a second.
struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    fn start(what: &str) -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        bar.set_message(what.to_string());
        let shown = bar.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            if !shown.is_finished() {
                shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                shown.set_style(
                    indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                shown.enable_steady_tick(Duration::from_millis(120));
            }
        });
        Self { bar }
    }
    fn stage(&self, what: &str) {
        self.bar.set_message(what.to_string());
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn inspect(file: PathBuf, json: bool) -> gpu_parquet::Result<String> {
    let source = gpu_parquet::ParquetSource::open(file)?;
    let summary = gpu_parquet::inspect::inspect(&source);
    Ok(if json {
        format!("{}\n", summary.to_json())
    } else {
        summary.to_table()
    })
}

/// Where `read` decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecodeAt {
    Gpu,
    Host,
    None,
}

fn read(args: ReadArgs) -> gpu_parquet::Result<String> {
    let settings = args.io.read_settings()?;
    let backend = parse_backend(&args.backend)?;
    let mut builder = Reader::builder(&args.file)
        .with_settings(&settings)
        .with_backend(backend);
    if let Some(c) = &args.columns {
        builder = builder.with_columns(c.iter().cloned());
    }
    if let Some(g) = &args.row_groups {
        builder = builder.with_row_groups(g.iter().copied());
    }
    if let Some(f) = &args.filter {
        builder = builder
            .with_filter(gpu_parquet::filter::Expr::parse(f)?)
            .with_filter_passes(args.filter_passes);
    }
    let progress = Progress::start("reading");
    let reader = builder.build()?;
    let decode = match args.decode.as_str() {
        "auto" if reader.io().is_device() => DecodeAt::Gpu,
        "auto" | "host" => DecodeAt::Host,
        "gpu" => DecodeAt::Gpu,
        "none" => DecodeAt::None,
        other => {
            return Err(Error::Config {
                setting: format!("--decode {other}"),
                message: "expected auto, gpu, host or none".into(),
            });
        }
    };
    if decode == DecodeAt::None && args.output.is_some() {
        return Err(Error::Config {
            setting: "--decode none".into(),
            message: "--output writes decoded columns; give --decode auto, gpu or host with it".into(),
        });
    }
    let mut extra: Vec<Extra> = Vec::new();
    let (report, decode_report) = if decode == DecodeAt::Gpu {
        for _ in 0..args.warm_up {
            progress.stage("warming up: reading and decoding on the GPU");
            drop(reader.read_device()?);
        }
        progress.stage("reading and decoding on the GPU");
        let read = reader.read_device()?;
        let mut checked = None;
        if args.verify || args.output.is_some() {
            progress.stage("copying decoded columns to the host");
            // Filtered on the GPU already, or here where the GPU could not run the filter (the
            // report says why).
            let got = read.to_host()?;
            if args.verify {
                progress.stage("verifying against arrow-rs");
                // arrow-rs's decode, filtered exactly on the host.
                let want = reader.read_batches()?.concat()?;
                let same = want.schema() == got.schema()
                    && want.num_rows() == got.num_rows()
                    && (0..want.num_columns()).all(|i| want.column(i).to_data() == got.column(i).to_data());
                if !same {
                    return Err(Error::device(
                        format!("verifying {}", args.file.display()),
                        "the GPU-decoded columns differ from arrow-rs's decode of the same file",
                    ));
                }
                checked = Some(got.num_rows());
            }
            progress.stage("writing");
            write_output(&args, &got.schema(), std::slice::from_ref(&got), &mut extra)?;
        }
        if let Some(rows) = checked {
            let filtered = if reader.filter().is_some() {
                ", filtered exactly on the host"
            } else {
                ""
            };
            extra.insert(
                0,
                (
                    "verified",
                    serde_json::json!({ "rows": rows, "equal_to_arrow_rs": true }),
                    format!(
                        "verified: {rows} rows decoded on the GPU equal arrow-rs's decode{filtered}, value for value"
                    ),
                ),
            );
        }
        (read.io, Some(read.decode))
    } else if reader.filter().is_some() && (decode == DecodeAt::Host || args.output.is_some()) {
        // A filtered host decode: the filter's columns first, then the other columns' pages of the
        // accepted rows (unless --filter-passes 1).
        for _ in 0..args.warm_up {
            progress.stage("warming up: reading and decoding on the host");
            drop(reader.read_host()?);
        }
        progress.stage("reading and decoding on the host");
        let started = std::time::Instant::now();
        let read = reader.read_host()?;
        let seconds = started.elapsed().as_secs_f64();
        if args.verify {
            progress.stage("verifying against one pass, every fetched byte checked");
            // The same rows read in one pass, its raw bytes checked against the file, decoded and
            // filtered exactly.
            let chunks = reader.read()?;
            chunks.verify()?;
            let want = chunks.decode()?.concat()?;
            let got = read.table.concat()?;
            if want != got {
                return Err(Error::device(
                    format!("verifying {}", args.file.display()),
                    "the filtered read differs from one pass over the same rows filtered exactly",
                ));
            }
            extra.push((
                "verified",
                serde_json::json!({ "rows": got.num_rows(), "equal_to_one_pass": true }),
                format!(
                    "verified: {} rows equal one pass's read of the same file (its bytes equal the file's), filtered exactly",
                    got.num_rows()
                ),
            ));
        }
        extra.push((
            "decoded",
            serde_json::json!({ "rows": read.table.num_rows(), "on": "host", "seconds": seconds }),
            format!(
                "read and decoded {} rows on the host (arrow-rs) in {:.1} ms",
                read.table.num_rows(),
                seconds * 1e3
            ),
        ));
        if let Some(p) = &read.passes {
            extra.push((
                "passes",
                serde_json::to_value(p).unwrap_or_default(),
                p.line().trim_end().to_string(),
            ));
        }
        progress.stage("writing");
        write_output(&args, &read.table.schema, &read.table.batches, &mut extra)?;
        (read.io, None)
    } else {
        for _ in 0..args.warm_up {
            progress.stage("warming up: reading");
            drop(reader.read()?);
        }
        let chunks = reader.read()?;
        if args.verify {
            progress.stage("verifying");
            chunks.verify()?;
            extra.push((
                "verified",
                serde_json::json!({ "bytes": chunks.buffer().len(), "equal_to_file": true }),
                format!(
                    "verified: {} fetched bytes equal the file's bytes",
                    chunks.buffer().len()
                ),
            ));
        }
        let report = chunks.report().clone();
        if decode == DecodeAt::Host || args.output.is_some() {
            progress.stage("decoding on the host");
            let started = std::time::Instant::now();
            let table = chunks.decode()?;
            extra.push((
                "decoded",
                serde_json::json!({ "rows": table.num_rows(), "on": "host", "seconds": started.elapsed().as_secs_f64() }),
                format!("decoded {} rows on the host (arrow-rs) in {:.1} ms", table.num_rows(), started.elapsed().as_secs_f64() * 1e3),
            ));
            progress.stage("writing");
            write_output(&args, &table.schema, &table.batches, &mut extra)?;
        }
        (report, None)
    };
    drop(progress);
    let pruning = reader.pruning().cloned();
    if let Some(p) = &pruning {
        extra.push((
            "pruning",
            serde_json::to_value(p).unwrap_or_default(),
            p.to_table().trim_end().to_string(),
        ));
    }
    if args.json {
        let mut v = serde_json::to_value(&report).map_err(|e| Error::parquet(reader.source().location(), e))?;
        if let Some(obj) = v.as_object_mut() {
            if let Some(d) = &decode_report {
                obj.insert("decode".into(), serde_json::to_value(d).unwrap_or_default());
            }
            for (k, j, _) in &extra {
                obj.insert((*k).to_string(), j.clone());
            }
        }
        Ok(format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default()))
    } else {
        let mut text = report.to_table();
        if let Some(d) = &decode_report {
            text.push('\n');
            text.push_str(&d.to_table());
        }
        for (_, _, line) in extra {
            text.push_str(&line);
            text.push('\n');
        }
        Ok(text)
    }
}

/// Why there is no GPU here, as CUDA says.
fn no_gpu_reason() -> String {
    gpu_parquet::gpu::cuda_present()
        .err()
        .unwrap_or_else(|| "no CUDA device".into())
}

/// `--filter-passes`'s value.
fn parse_filter_passes(value: &str) -> Result<gpu_parquet::filter::FilterPasses, String> {
    value.parse()
}

/// `--backend`'s value, or an error naming the flag.
fn parse_backend(value: &str) -> gpu_parquet::Result<BackendKind> {
    value.parse().map_err(|message| Error::Config {
        setting: format!("--backend {value}"),
        message,
    })
}

/// A line added to `read`'s output: JSON key, JSON value, text line.
type Extra = (&'static str, serde_json::Value, String);

/// Writes `batches` to `--output`, if given, and says so in `extra`.
fn write_output(
    args: &ReadArgs,
    schema: &arrow::datatypes::SchemaRef,
    batches: &[arrow::record_batch::RecordBatch],
    extra: &mut Vec<Extra>,
) -> gpu_parquet::Result<()> {
    let Some(out) = &args.output else {
        return Ok(());
    };
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    if is_stdout(out) {
        gpu_parquet::ipc_file::write_ipc_to(std::io::stdout().lock(), "standard output", schema, batches)?;
        extra.push((
            "output",
            serde_json::json!({ "path": "-", "written": "standard output", "rows": rows, "format": "arrow-ipc-file" }),
            format!("wrote {rows} rows to standard output (Arrow IPC file)"),
        ));
        return Ok(());
    }
    let outcome = gpu_parquet::ipc_file::write_ipc_file(out, schema, batches, &[&args.file])?;
    extra.push((
        "output",
        serde_json::json!({
            "path": out,
            "written": outcome.target(),
            "how": outcome.to_string(),
            "rows": rows,
            "format": "arrow-ipc-file",
        }),
        format!("wrote {} ({rows} rows, Arrow IPC file; {outcome})", out.display()),
    ));
    Ok(())
}

/// Whether `--output` names standard output (`-` or `/dev/stdout`): the Arrow data then goes there
/// alone, and the report to stderr.
fn is_stdout(out: &std::path::Path) -> bool {
    out == std::path::Path::new("-") || out == std::path::Path::new("/dev/stdout")
}

fn render(json: bool, value: &impl serde::Serialize, table: impl FnOnce() -> String) -> String {
    if json {
        format!("{}\n", serde_json::to_string_pretty(value).unwrap_or_default())
    } else {
        table()
    }
}

fn dataset(args: DatasetArgs) -> gpu_parquet::Result<String> {
    use gpu_parquet::dataset::{Dataset, DatasetSource};
    let settings = args.io.read_settings()?;
    let backend = parse_backend(&args.backend)?;
    let ds = Dataset::open(DatasetSource::from_args(&args.paths))?;
    let ds = match &args.filter {
        Some(f) => ds.with_filter(gpu_parquet::filter::Expr::parse(f)?)?,
        None => ds,
    };
    // The files' columns and partition columns, as the dataset tells them apart.
    let ds = match &args.columns {
        Some(c) => ds.select_columns(c)?,
        None => ds,
    };
    let device = settings.device;
    let passes = args.filter_passes;
    let configure = move |b: gpu_parquet::ReaderBuilder| {
        b.with_settings(&settings)
            .with_backend(backend)
            .with_filter_passes(passes)
    };
    let all_bytes: u64 = ds.row_group_bytes().iter().flatten().sum();
    // Throughput is over the selected column chunks' uncompressed bytes (cuDF's measure, as `read`
    // and `bench` count it): every column's without --columns.
    let input_paths: Vec<&std::path::Path> = ds.files().iter().map(|f| f.path.as_path()).collect();
    let schema_line = ds
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ");
    let head = |bytes: u64| {
        format!(
            "schema: {schema_line}\n{} file{}, {} rows, {:.2} MB uncompressed{}",
            ds.files().len(),
            if ds.files().len() == 1 { "" } else { "s" },
            ds.num_rows(),
            all_bytes as f64 / 1e6,
            match &args.columns {
                Some(c) => format!(
                    ", of which {:.2} MB in the {} selected column{}",
                    bytes as f64 / 1e6,
                    c.len(),
                    if c.len() == 1 { "" } else { "s" }
                ),
                None => String::new(),
            }
        )
    };
    let progress = Progress::start("reading the dataset");
    let gpus = gpu_parquet::gpu::GpuContext::device_count();
    let no_gpu = || {
        format!(
            "no GPU here ({})",
            gpu_parquet::gpu::cuda_present()
                .err()
                .unwrap_or_else(|| "no CUDA device".into())
        )
    };
    if gpus == 0 && backend != BackendKind::Host && (backend != BackendKind::Auto || args.devices.is_some()) {
        return Err(Error::Unavailable {
            backend: format!("{backend:?} dataset read").to_lowercase(),
            reason: format!("{}; --backend host reads the dataset on the CPU", no_gpu()),
        });
    }
    // On the host: asked for, or `auto` without a GPU and without --devices (as `read` does).
    if backend == BackendKind::Host || gpus == 0 {
        let why = if backend == BackendKind::Host {
            "--backend host".to_string()
        } else {
            no_gpu()
        };
        // The GPU path has these from its decode reports; here each file's plan gives them.
        let mut bytes = 0u64;
        for i in 0..ds.files().len() {
            bytes += configure(ds.reader_builder(i))
                .with_backend(BackendKind::Host)
                .build()?
                .uncompressed_bytes();
        }
        let head = head(bytes);
        let started = std::time::Instant::now();
        let mut rows = 0usize;
        let mut kept = Vec::new();
        for b in ds.batches(move |b| configure(b).with_backend(BackendKind::Host)) {
            let batch = b?.batch;
            rows += batch.num_rows();
            if args.output.is_some() || args.verify {
                kept.push(batch);
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let verified = if args.verify {
            progress.stage("verifying against arrow-rs");
            verify_dataset(&kept, &arrow_rs_dataset(&ds)?)?;
            Some(rows)
        } else {
            None
        };
        drop(progress);
        let wrote = write_dataset_output(&args, &kept, &input_paths)?;
        let value = serde_json::json!({
            "files": ds.files().iter().map(|f| f.path.display().to_string()).collect::<Vec<_>>(),
            "rows": rows,
            "uncompressed_bytes": bytes,
            "seconds": seconds,
            "on": "host",
            "why": why,
            "output": wrote.as_ref().map(|(j, _)| j.clone()),
            "verified": verified.map(|rows| serde_json::json!({ "rows": rows, "equal_to_arrow_rs": true })),
        });
        return Ok(render(args.json, &value, || {
            format!(
                "{head}\nread and decoded on the host (arrow-rs; {why}): {rows} rows in {:.1} ms ({:.2} GB/s)\n{}{}",
                seconds * 1e3,
                bytes as f64 / seconds.max(1e-9) / 1e9,
                verified
                    .map(|rows| format!(
                        "verified: {rows} rows equal arrow-rs's own read of the files, value for value\n"
                    ))
                    .unwrap_or_default(),
                wrote.as_ref().map(|(_, line)| format!("{line}\n")).unwrap_or_default()
            )
        }));
    }
    let devices = args.devices.clone().unwrap_or_else(|| vec![device]);
    let read = ds.read_devices(&devices, &configure)?;
    let mut verified = None;
    // The rows the filter keeps: filtered on the GPUs, or on the host copy where they could not run it.
    let filtered = ds.file_filter().is_some();
    let on_host = if args.verify || args.output.is_some() || filtered {
        Some(read.to_host(&ds)?)
    } else {
        None
    };
    if let Some(got) = on_host.as_ref().filter(|_| args.verify) {
        progress.stage("verifying against arrow-rs");
        verify_dataset(got, &arrow_rs_dataset(&ds)?)?;
        verified = Some(got.iter().map(|b| b.num_rows()).sum::<usize>());
    }
    drop(progress);
    let wrote = write_dataset_output(&args, on_host.as_deref().unwrap_or_default(), &input_paths)?;
    let summary = read.summary();
    let kept = on_host
        .as_ref()
        .filter(|_| filtered)
        .map(|b| b.iter().map(|b| b.num_rows()).sum::<usize>());
    let mut value = serde_json::to_value(&summary).unwrap_or_default();
    if let (Some(obj), Some(rows)) = (value.as_object_mut(), kept) {
        obj.insert("rows_kept_by_filter".into(), rows.into());
    }
    if let (Some(obj), Some((j, _))) = (value.as_object_mut(), &wrote) {
        obj.insert("output".into(), j.clone());
    }
    if let (Some(obj), Some(rows)) = (value.as_object_mut(), verified) {
        obj.insert(
            "verified".into(),
            serde_json::json!({ "rows": rows, "equal_to_arrow_rs": true }),
        );
    }
    Ok(render(args.json, &value, || {
        let mut text = format!(
            "{}\nread and decoded on GPU(s) {devices:?} in {:.1} ms ({:.2} GB/s)\n",
            head(summary.bytes),
            summary.seconds * 1e3,
            summary.bytes as f64 / summary.seconds.max(1e-9) / 1e9
        );
        text.push_str(&summary.to_table());
        if let Some(rows) = kept {
            text.push_str(&format!("{rows} rows kept by the filter\n"));
        }
        if let Some(rows) = verified {
            text.push_str(&format!(
                "verified: {rows} rows decoded on the GPU(s) equal arrow-rs's decode, value for value\n"
            ));
        }
        if let Some((_, line)) = &wrote {
            text.push_str(line);
            text.push('\n');
        }
        text
    }))
}

/// Writes the dataset's `batches` to `--output`, if given (standard output for `-`): the JSON value
/// and the line that say so.
/// Fails unless `got` and `want` hold the same rows, value for value (each side concatenated under
/// its batches' own schema: with --columns that is the projection, not the dataset's whole schema).
fn verify_dataset(
    got: &[arrow::record_batch::RecordBatch],
    want: &[arrow::record_batch::RecordBatch],
) -> gpu_parquet::Result<()> {
    let concat = |v: &[arrow::record_batch::RecordBatch]| -> gpu_parquet::Result<_> {
        let Some(first) = v.first() else { return Ok(None) };
        arrow::compute::concat_batches(&first.schema(), v)
            .map(Some)
            .map_err(|e| Error::device("verifying the dataset", e))
    };
    if concat(got)? != concat(want)? {
        return Err(Error::device(
            "verifying the dataset",
            "the decoded columns differ from arrow-rs's own read of the same files",
        ));
    }
    Ok(())
}

/// The dataset read by arrow-rs's own reader, file by file (its selected columns, then the partition
/// columns; the filter on the files' columns applied to arrow-rs's batches): the oracle of
/// `dataset --verify`, independent of our fetches and pruning.
fn arrow_rs_dataset(ds: &gpu_parquet::dataset::Dataset) -> gpu_parquet::Result<Vec<arrow::record_batch::RecordBatch>> {
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let filter = ds.file_filter();
    let mut out = Vec::new();
    for (i, f) in ds.files().iter().enumerate() {
        let location = gpu_parquet::Location::file(&f.path);
        let file = std::fs::File::open(&f.path).map_err(|e| Error::io(location.clone(), "cannot open", e))?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| Error::parquet(location.clone(), e))?;
        // The selected columns, and those the filter tests (dropped after it).
        let wanted = ds.file_columns().map(|c| {
            let mut all = c.to_vec();
            all.extend(filter.map(|e| e.columns()).unwrap_or_default());
            all
        });
        let mask = match &wanted {
            Some(c) => ProjectionMask::columns(builder.parquet_schema(), c.iter().map(String::as_str)),
            None => ProjectionMask::all(),
        };
        let reader = builder
            .with_projection(mask)
            .build()
            .map_err(|e| Error::parquet(location.clone(), e))?;
        for batch in reader {
            let mut batch = batch.map_err(|e| Error::parquet(location.clone(), e))?;
            if let Some(e) = filter {
                batch = e.bind(&batch.schema(), &location)?.filter(&batch)?;
                if let Some(c) = ds.file_columns() {
                    let keep: Vec<usize> = (0..batch.num_columns())
                        .filter(|&k| {
                            let name = batch.schema().field(k).name().clone();
                            c.iter().any(|c| c.split('.').next() == Some(name.as_str()))
                        })
                        .collect();
                    batch = batch.project(&keep).map_err(|e| Error::parquet(location.clone(), e))?;
                }
            }
            out.push(ds.attach_partitions(i, batch)?);
        }
    }
    Ok(out)
}

fn write_dataset_output(
    args: &DatasetArgs,
    batches: &[arrow::record_batch::RecordBatch],
    inputs: &[&std::path::Path],
) -> gpu_parquet::Result<Option<(serde_json::Value, String)>> {
    let Some(out) = &args.output else {
        return Ok(None);
    };
    let Some(first) = batches.first() else {
        return Err(Error::InvalidRequest {
            location: gpu_parquet::Location::file(out),
            message: "the dataset read no rows; no Arrow IPC file written".into(),
        });
    };
    let schema = first.schema();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    if is_stdout(out) {
        gpu_parquet::ipc_file::write_ipc_to(std::io::stdout().lock(), "standard output", &schema, batches)?;
        return Ok(Some((
            serde_json::json!({ "path": "-", "written": "standard output", "rows": rows, "format": "arrow-ipc-file" }),
            format!("wrote {rows} rows to standard output (Arrow IPC file)"),
        )));
    }
    let outcome = gpu_parquet::ipc_file::write_ipc_file(out, &schema, batches, inputs)?;
    Ok(Some((
        serde_json::json!({ "path": out, "written": outcome.target(), "how": outcome.to_string(), "rows": rows, "format": "arrow-ipc-file" }),
        format!("wrote {} ({rows} rows, Arrow IPC file; {outcome})", out.display()),
    )))
}

fn check(dir: PathBuf, io: IoArgs, json: bool) -> gpu_parquet::Result<String> {
    let settings = io.settings()?;
    let report = gpu_parquet::check::check(&dir, settings.device, &settings.cufile_config)?;
    Ok(render(json, &report, || report.to_table()))
}

fn bench(args: BenchArgs) -> gpu_parquet::Result<String> {
    let BenchArgs {
        file,
        columns,
        reps,
        drop_caches,
        no_cold,
        staged_threads,
        no_decode,
        only_decode,
        filters,
        io,
        json,
    } = args;
    let settings = io.read_settings()?;
    let filters = filters
        .iter()
        .enumerate()
        .map(|(i, f)| gpu_parquet::bench::NamedFilter::parse(f, i + 1))
        .collect::<gpu_parquet::Result<Vec<_>>>()?;
    let opts = gpu_parquet::bench::BenchOptions {
        reps,
        cold: drop_caches && !no_cold,
        staged_threads,
        decode: !no_decode,
        other_paths: !only_decode,
        memory_limit: settings.memory_limit,
        decoder: settings.decoder_options(),
        decode_steps: settings.decode_steps,
        decode_threads: settings.decode_threads,
        tuning: settings.tuning,
        policy: settings.policy,
        device: settings.device,
        columns: columns.map_or(gpu_parquet::Projection::All, gpu_parquet::Projection::Names),
        filters,
    };
    if opts.cold {
        eprintln!("bench: dropping the whole machine's page cache before each cold run (--drop-caches)");
    }
    let report = gpu_parquet::bench::bench_paths(&file, &opts)?;
    Ok(render(json, &report, || report.to_table()))
}

/// Writes `text` to stdout; a closed stdout (`gpu-parquet read F --json | head`) is not an error worth
/// reporting: the reader has what it wanted.
fn emit(text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    // Panics the library contains become errors; keep their default message off stderr.
    gpu_parquet::panic_guard::install_quiet_hook();
    // Argument errors are clap's own: usage, suggestions, exit status 2.
    let cli = Cli::parse();
    let mut report_to_stderr = false;
    let result = match cli.command {
        Command::Inspect { file, json } => inspect(file, json),
        Command::Read(args) => {
            report_to_stderr = args.output.as_deref().is_some_and(is_stdout);
            read(args)
        }
        Command::Dataset(args) => {
            report_to_stderr = args.output.as_deref().is_some_and(is_stdout);
            dataset(args)
        }
        Command::Check { dir, io, json } => check(dir, io, json),
        Command::Bench(args) => bench(args),
    };
    // Every reader, backend and cuFile driver is dropped by now; only text is left to print.
    match result {
        Ok(text) if report_to_stderr => {
            eprint!("{text}");
            ExitCode::SUCCESS
        }
        Ok(text) => emit(&text),
        Err(e) => {
            eprint!("{}", error_report(&e));
            ExitCode::FAILURE
        }
    }
}

/// `error: <message>`, then a `caused by: <message>` line for each error in the source chain whose
/// message the one before it does not already include (most of the library's errors embed their
/// direct source); every line printable, newline-terminated.
fn error_report(error: &dyn std::error::Error) -> String {
    let mut shown = error.to_string();
    let mut text = format!("error: {}\n", one_line(&shown));
    let mut next = error.source();
    while let Some(cause) = next {
        let message = cause.to_string();
        if !shown.contains(&message) {
            text.push_str(&format!("caused by: {}\n", one_line(&message)));
        }
        shown = message;
        next = cause.source();
    }
    text
}

/// `message` with control characters (a newline or NUL in a column name from a hostile footer, say)
/// escaped, so an error stays one printable line.
fn one_line(message: &str) -> String {
    message
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{error_report, one_line};

    /// An error with a message and an optional source, the message not embedding the source's.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn error_report_lists_the_source_chain_once_and_never_debug() {
        let e = Layer(
            "f.parquet: cannot read",
            Some(Box::new(Layer(
                "ZSTD failed",
                Some(Box::new(Layer("frame too short", None))),
            ))),
        );
        assert_eq!(
            error_report(&e),
            "error: f.parquet: cannot read\ncaused by: ZSTD failed\ncaused by: frame too short\n"
        );
        // A source the message already includes is not repeated.
        let embedded = Layer(
            "f.parquet: frame too short",
            Some(Box::new(Layer("frame too short", None))),
        );
        assert_eq!(error_report(&embedded), "error: f.parquet: frame too short\n");
        // The library's errors: Display, not Debug.
        let lib = gpu_parquet::Error::io(
            gpu_parquet::Location::file("x.parquet"),
            "cannot open",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        let text = error_report(&lib);
        assert!(text.starts_with("error: x.parquet: cannot open: "), "{text}");
        assert!(!text.contains("Io {") && !text.contains("location:"), "{text}");
    }

    #[test]
    fn errors_stay_one_printable_line() {
        assert_eq!(
            one_line("x.parquet, column 'a\nb\0c': bad"),
            "x.parquet, column 'a\\nb\\u{0}c': bad"
        );
        assert_eq!(one_line("plain: ünïcode stays"), "plain: ünïcode stays");
    }
}
