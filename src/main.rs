//! The `gpu-parquet` command line: a thin shell over the library, one small function per subcommand.
//!
//! Errors print as one line, `error: <message>`, on stderr, with exit status 1.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gpu_parquet::ParquetSource;

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
}

fn inspect(file: PathBuf, json: bool) -> gpu_parquet::Result<()> {
    let source = ParquetSource::open(file)?;
    let summary = gpu_parquet::inspect::inspect(&source);
    if json {
        println!("{}", summary.to_json());
    } else {
        print!("{}", summary.to_table());
    }
    Ok(())
}

fn main() -> ExitCode {
    // Panics the library contains become errors; keep their default message off stderr.
    gpu_parquet::panic_guard::install_quiet_hook();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { file, json } => inspect(file, json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
