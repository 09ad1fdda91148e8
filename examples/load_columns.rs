//! The main job: chosen columns of a Parquet file onto the GPU where there is one (else into host
//! memory), and the per-column report of the path every byte took.
//!
//! Usage: `cargo run --release --example load_columns -- FILE [COLUMN ...]`
//! (settings from the `GPU_PARQUET_*` variables, as the CLI reads them).

use gpu_parquet::io::select::AnyBuffer;
use gpu_parquet::{Reader, Settings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args.next().ok_or("usage: load_columns FILE [COLUMN ...]")?;
    let columns: Vec<String> = args.collect();

    let settings = Settings::from_env(&[])?;
    let mut builder = Reader::builder(&file).with_settings(&settings);
    if !columns.is_empty() {
        builder = builder.with_columns(columns);
    }
    let reader = builder.build()?;
    let chunks = reader.read()?;

    match chunks.buffer() {
        AnyBuffer::Device(d) => println!(
            "{} bytes of column chunks on GPU {} ({} chunks)",
            d.num_bytes(),
            d.context().ordinal(),
            chunks.plan().chunks.len()
        ),
        AnyBuffer::Host(h) => println!(
            "{} bytes of column chunks in host memory ({} chunks)",
            h.as_slice().len(),
            chunks.plan().chunks.len()
        ),
    }
    print!("{}", chunks.report().to_table());
    Ok(())
}
