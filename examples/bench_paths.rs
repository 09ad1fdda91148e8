//! Benchmarks every available I/O path on one Parquet file.
//!
//! Usage: `bench_paths FILE [REPS] [--json] [--no-cold]`
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: bench_paths FILE [REPS] [--json] [--no-cold]");
        std::process::exit(2);
    };
    let mut opts = gpu_parquet::bench::BenchOptions::default();
    if let Some(r) = args.iter().filter(|a| !a.starts_with("--")).nth(1) {
        match r.parse() {
            Ok(n) => opts.reps = n,
            Err(e) => {
                eprintln!("REPS '{r}': {e}");
                std::process::exit(2);
            }
        }
    }
    opts.cold = !args.iter().any(|a| a == "--no-cold");
    match gpu_parquet::bench::bench_paths(&PathBuf::from(file), &opts) {
        Ok(r) if args.iter().any(|a| a == "--json") => {
            println!("{}", serde_json::to_string_pretty(&r).unwrap_or_else(|e| e.to_string()))
        }
        Ok(r) => print!("{}", r.to_table()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
