//! The `gpu-parquet` command line: a thin shell over the library, one small function per subcommand.
//!
//! Errors print as one line, `error: <message>`, on stderr, with exit status 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::io::policy::{AnyBackend, BackendKind, CompatMode, IoPolicy};
use gpu_parquet::io::verify::verify_against_file;
use gpu_parquet::io::{DestBuffer, IoBackend};
use gpu_parquet::report::ReadReport;
use gpu_parquet::{Error, ParquetSource, Projection, ReadPlan, RowGroupSelection};

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
    /// Read column chunks through a backend and print the per-column I/O report.
    Read(ReadArgs),
    /// Say what this machine and DIR's file system can do: GPU, cuFile, nvidia-fs, O_DIRECT, verdicts.
    Check {
        /// Directory to try registration and O_DIRECT in.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Read all column chunks of FILE through every available path, hot and cold, as a table.
    Bench {
        /// The Parquet file.
        file: PathBuf,
        /// Hot repetitions per path (the best is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Skip the cold runs (which drop the page cache, as root).
        #[arg(long)]
        no_cold: bool,
        /// Thread counts to try for the staged path.
        #[arg(long, value_delimiter = ',', default_value = "8,12,16")]
        staged_threads: Vec<usize>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
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
    /// host, staged, cufile or auto (auto: cuFile where it registers the file, else staged, else host).
    #[arg(long, default_value = "host")]
    backend: String,
    /// on (never cuFile), off (cuFile or fail), auto. Overrides GPU_PARQUET_COMPAT_MODE.
    #[arg(long)]
    compat_mode: Option<String>,
    /// I/O threads (0: one per core). Overrides GPU_PARQUET_THREADS.
    #[arg(long)]
    threads: Option<usize>,
    /// Task size in MiB. Overrides GPU_PARQUET_TASK_SIZE_MB.
    #[arg(long)]
    task_size_mb: Option<u64>,
    /// Under auto, tasks smaller than this many KiB go staged. Overrides GPU_PARQUET_SMALL_READ_KB.
    #[arg(long)]
    small_read_kb: Option<u64>,
    /// Align reads to 4 KiB and use O_DIRECT where the file system allows it.
    #[arg(long)]
    direct: bool,
    /// Check that the fetched bytes equal the file's bytes.
    #[arg(long)]
    verify: bool,
    /// Decode and write the table as an Arrow IPC file.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Writes `text` to stdout. A closed stdout (`gpu-parquet read F --json | head`) is not an error worth
/// reporting: the reader has what it wanted, so we stop quietly.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            finish(ExitCode::SUCCESS);
        }
        eprintln!("error: writing to stdout: {e}");
        finish(ExitCode::FAILURE);
    }
}

/// Ends the process: closes the cuFile driver first when this process opened it.
fn finish(code: ExitCode) -> ! {
    gpu_parquet::gpu::cufile::shutdown();
    std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 })
}

fn inspect(file: PathBuf, json: bool) -> gpu_parquet::Result<()> {
    let source = ParquetSource::open(file)?;
    let summary = gpu_parquet::inspect::inspect(&source);
    if json {
        emit(&format!("{}\n", summary.to_json()));
    } else {
        emit(&summary.to_table());
    }
    Ok(())
}

fn policy_for(args: &ReadArgs) -> gpu_parquet::Result<IoPolicy> {
    let mut policy = IoPolicy::from_env()?;
    let bad = |message: String| Error::InvalidRequest {
        location: gpu_parquet::Location::file(&args.file),
        message,
    };
    if let Some(m) = &args.compat_mode {
        policy.compat_mode = m.parse::<CompatMode>().map_err(bad)?;
    }
    if let Some(t) = args.threads {
        policy.threads = t;
    }
    if let Some(mb) = args.task_size_mb {
        policy.task_size = mb.max(1) << 20;
    }
    if let Some(kb) = args.small_read_kb {
        policy.small_read_threshold = kb.saturating_mul(1024);
    }
    policy.direct_io |= args.direct;
    Ok(policy)
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

fn read(args: ReadArgs) -> gpu_parquet::Result<()> {
    let source = ParquetSource::open(&args.file)?;
    let policy = policy_for(&args)?;
    let kind: BackendKind = args.backend.parse().map_err(|message| Error::InvalidRequest {
        location: gpu_parquet::Location::file(&args.file),
        message,
    })?;
    let projection = args.columns.clone().map(Projection::Names).unwrap_or_default();
    let row_groups = args
        .row_groups
        .clone()
        .map(RowGroupSelection::Indices)
        .unwrap_or_default();
    let plan = ReadPlan::build(&source, &projection, &row_groups, policy.plan_options())?;
    let progress = Progress::start("reading");
    let backend = AnyBackend::new(kind, &policy)?;
    let fetched = backend.fetch(&source, &plan)?;
    let report = ReadReport::build(&source.path().display().to_string(), &plan, &fetched.log);
    let needs_host = args.verify || args.output.is_some();
    let host = if needs_host {
        progress.stage("copying to host");
        Some(fetched.buffer.to_host_bytes()?)
    } else {
        None
    };
    if let (true, Some(bytes)) = (args.verify, &host) {
        progress.stage("verifying");
        verify_against_file(&source, &plan, bytes)?;
    }
    if let (Some(out), Some(bytes)) = (&args.output, &host) {
        progress.stage("decoding");
        let table = decode_fetched(&source, &plan, bytes, policy.threads)?;
        progress.stage("writing");
        write_ipc(out, &table)?;
    }
    drop(progress);
    if args.json {
        emit(&format!("{}\n", report.to_json()));
    } else {
        let mut text = report.to_table();
        if args.verify {
            text.push_str(&format!(
                "verified: {} fetched bytes equal the file's bytes\n",
                fetched.buffer.len()
            ));
        }
        if let Some(out) = &args.output {
            text.push_str(&format!("wrote {}\n", out.display()));
        }
        emit(&text);
    }
    Ok(())
}

/// Writes `table` as an Arrow IPC file, atomically: into a temporary file beside `out`, renamed over
/// `out` only once complete, so a failure never leaves a broken file behind.
fn write_ipc(out: &Path, table: &gpu_parquet::decode::host::DecodedTable) -> gpu_parquet::Result<()> {
    let location = gpu_parquet::Location::file(out);
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = write_ipc_to(&tmp, table);
    let result = written.and_then(|()| {
        std::fs::rename(&tmp, out).map_err(|e| Error::io(location, "cannot rename the finished file onto", e))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_ipc_to(path: &Path, table: &gpu_parquet::decode::host::DecodedTable) -> gpu_parquet::Result<()> {
    let location = gpu_parquet::Location::file(path);
    let file = std::fs::File::create(path).map_err(|e| Error::io(location.clone(), "cannot create", e))?;
    let mut writer = arrow::ipc::writer::FileWriter::try_new(std::io::BufWriter::new(file), &table.schema)
        .map_err(|e| Error::parquet(location.clone(), e))?;
    // An IPC file holds one dictionary per field, but each row group may bring its own (polars writes
    // such files): concatenating merges the dictionaries, at the cost of one copy of the table.
    let merged;
    let batches: &[arrow::record_batch::RecordBatch] =
        if table.batches.len() > 1 && table.schema.fields().iter().any(|f| has_dictionary(f.data_type())) {
            merged = [table.concat()?];
            &merged
        } else {
            &table.batches
        };
    for batch in batches {
        writer.write(batch).map_err(|e| Error::parquet(location.clone(), e))?;
    }
    writer.finish().map_err(|e| Error::parquet(location, e))
}

/// Whether `t` is or contains a dictionary type.
fn has_dictionary(t: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType::*;
    match t {
        Dictionary(..) => true,
        List(f) | LargeList(f) | FixedSizeList(f, _) | Map(f, _) | ListView(f) | LargeListView(f) => {
            has_dictionary(f.data_type())
        }
        Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        Union(fields, _) => fields.iter().any(|(_, f)| has_dictionary(f.data_type())),
        RunEndEncoded(_, v) => has_dictionary(v.data_type()),
        _ => false,
    }
}

/// Prints `value` as pretty JSON, or `table()` as text.
fn emit_report(json: bool, value: &impl serde::Serialize, table: impl FnOnce() -> String) {
    if json {
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ));
    } else {
        emit(&table());
    }
}

fn check(dir: PathBuf, json: bool) -> gpu_parquet::Result<()> {
    let report = gpu_parquet::check::check(&dir);
    emit_report(json, &report, || report.to_table());
    Ok(())
}

fn bench(file: PathBuf, reps: usize, no_cold: bool, staged_threads: Vec<usize>, json: bool) -> gpu_parquet::Result<()> {
    let policy = IoPolicy::from_env()?;
    let opts = gpu_parquet::bench::BenchOptions {
        reps,
        cold: !no_cold,
        staged_threads,
        threads: policy.threads,
        task_size: policy.task_size,
        bounce_buffer_size: policy.bounce_buffer_size,
        bounce_buffers: policy.bounce_buffers,
        ..Default::default()
    };
    let report = gpu_parquet::bench::bench_paths(&file, &opts)?;
    emit_report(json, &report, || report.to_table());
    Ok(())
}

fn main() -> ExitCode {
    // Panics the library contains become errors; keep their default message off stderr.
    gpu_parquet::panic_guard::install_quiet_hook();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { file, json } => inspect(file, json),
        Command::Read(args) => read(args),
        Command::Check { dir, json } => check(dir, json),
        Command::Bench {
            file,
            reps,
            no_cold,
            staged_threads,
            json,
        } => bench(file, reps, no_cold, staged_threads, json),
    };
    match result {
        Ok(()) => finish(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("error: {e}");
            finish(ExitCode::FAILURE)
        }
    }
}
