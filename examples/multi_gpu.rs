//! A dataset read on one GPU, then on several at once: best of N hot reads of each, in uncompressed
//! bytes per second (the row groups' `total_byte_size`), the speed-up, and per GPU the row groups it
//! took, its rows and its bytes and reads by path.
//!
//! Usage: `cargo run --release --example multi_gpu -- FILE_OR_DIR... [--devices 0,1] [--reps N]
//! [--backend staged|cufile|auto]` (several files, a directory or one file; `--devices` defaults to
//! every visible GPU; the same ordinal twice puts two shares on one GPU).

use std::time::Duration;

use gpu_parquet::dataset::{Dataset, DatasetSource};
use gpu_parquet::gpu::GpuContext;
use gpu_parquet::multi_device::MultiDeviceRead;
use gpu_parquet::{BackendKind, Settings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let inputs: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            !a.starts_with("--") && (*i == 0 || !matches!(args[i - 1].as_str(), "--devices" | "--reps" | "--backend"))
        })
        .map(|(_, a)| a)
        .collect();
    if inputs.is_empty() {
        return Err("usage: multi_gpu FILE_OR_DIR... [--devices 0,1] [--reps N] [--backend staged]".into());
    }
    let source = DatasetSource::from_args(&inputs);
    let reps: usize = value("--reps").map_or(Ok(3), |r| r.parse())?;
    let backend: BackendKind = value("--backend").as_deref().unwrap_or("auto").parse()?;
    let visible = GpuContext::device_count();
    if visible == 0 {
        return Err(format!(
            "no GPU here: {}",
            gpu_parquet::gpu::cuda_present()
                .err()
                .unwrap_or_else(|| "no CUDA device".into())
        )
        .into());
    }
    let devices: Vec<usize> = match value("--devices") {
        Some(d) => d.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => (0..visible).collect(),
    };
    let settings = Settings::from_env(&[])?;
    let ds = Dataset::open(source)?;
    let bytes: u64 = ds.row_group_bytes().iter().flatten().sum();
    println!(
        "{} files, {} rows, {:.2} GB uncompressed; {visible} GPU(s) visible; best of {reps} hot reads",
        ds.files().len(),
        ds.num_rows(),
        bytes as f64 / 1e9
    );

    let configure = |b: gpu_parquet::ReaderBuilder| b.with_settings(&settings).with_backend(backend);
    let mut rows = Vec::new();
    for set in [vec![devices[0]], devices.clone()] {
        // The first read compiles or loads the kernels and warms the page cache.
        drop(ds.read_devices(&set, configure)?);
        let mut best: Option<MultiDeviceRead> = None;
        for _ in 0..reps.max(1) {
            let r = ds.read_devices(&set, configure)?;
            if best.as_ref().is_none_or(|b| r.wall < b.wall) {
                best = Some(r);
            }
        }
        let best = best.expect("at least one read");
        assert_eq!(best.num_rows() as u64, ds.num_rows(), "every row decoded once");
        rows.push((set, best));
        if devices.len() == 1 {
            break;
        }
    }

    println!();
    println!("{:<12} {:>9} {:>9}", "GPUs", "hot ms", "GB/s");
    for (set, r) in &rows {
        println!(
            "{:<12} {:>9.1} {:>9.2}",
            format!("{set:?}"),
            ms(r.wall),
            bytes as f64 / r.wall.as_secs_f64() / 1e9
        );
    }
    if let [(_, one), (_, many)] = rows.as_slice() {
        println!(
            "speed-up over one GPU: {:.2}x",
            one.wall.as_secs_f64() / many.wall.as_secs_f64()
        );
    }
    let (_, last) = rows.last().expect("a row");
    println!();
    print!("{}", last.summary().to_table());
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
