//! The README's Rust quick start: read, stream under a budget, decode onto the GPU, read a hive dataset.
//! `cargo run --release --example quick_start [FILE]` (default: the bundled sample file).
use gpu_parquet::dataset::{Dataset, DatasetSource};
use gpu_parquet::filter::Expr;
use gpu_parquet::{BackendKind, Reader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "testdata/flat_snappy_dict.parquet".into());
    // 1. Two columns' chunks (onto the GPU where there is one, else host memory), and where every byte went.
    let chunks = Reader::builder(&path).with_columns(["id", "s"]).build()?.read()?;
    print!("{}", chunks.report().to_table());
    let table = chunks.decode()?.concat()?; // an arrow RecordBatch on the host
    println!(
        "{} rows, columns {:?}",
        table.num_rows(),
        table.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>()
    );

    // 2. Stream under a memory budget (bytes): a group of row groups at a time, the next read meanwhile.
    for group in Reader::builder(&path).with_memory_limit(128 << 10).build()?.stream()? {
        let group = group?;
        let groups = group.row_groups().to_vec();
        println!("row groups {groups:?}: {} rows", group.decode()?.num_rows());
    }

    // A filter: row groups the statistics, bloom filters and page index rule out are not read; a host
    // decode keeps the matching rows.
    let filter = Expr::parse("id < 100")?;
    let reader = Reader::builder(&path)
        .with_filter(filter)
        .with_backend(BackendKind::Host)
        .build()?;
    println!("filtered: {} rows", reader.read_batches()?.num_rows());

    // 3. Decoded on the GPU into Arrow device columns (where there is one).
    if gpu_parquet::gpu::cuda_present().is_ok() {
        let read = Reader::builder(&path).build()?.read_device()?;
        println!(
            "{} rows decoded on the GPU; first column on the host: {:?}",
            read.table.num_rows(),
            read.table.to_host()?.column(0).len()
        );
    }

    // 4. A hive dataset (dir/year=2024/...): partition columns come after the file's columns, each
    //    read when named (or all when no columns are chosen); filter terms on them skip files.
    let dir = std::env::temp_dir().join("gpu-parquet-quick-start/year=2024");
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(&path, dir.join("part-0.parquet"))?;
    let ds = Dataset::open(DatasetSource::Directory(dir.parent().unwrap().into()))?
        .select_columns(&["id", "year"])?
        .with_filter(Expr::parse("year = 2024 and id < 10")?)?;
    for batch in ds.batches(|r| r.with_backend(BackendKind::Host)) {
        let b = batch?.batch;
        println!(
            "dataset: {} rows, columns {:?}",
            b.num_rows(),
            b.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>()
        );
    }
    Ok(())
}
