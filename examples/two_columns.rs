//! A short job: load two columns and compute on them.
use arrow::array::{Float64Array, Int64Array};
use arrow::compute::sum;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reader = gpu_parquet::Reader::builder("testdata/flat_snappy_dict.parquet")
        .with_columns(["id", "f64"])
        .build()?; // backend Auto: onto the GPU where there is one, else host memory
    let chunks = reader.read()?; // the column chunks, and the path report
    print!("{}", chunks.report().to_table());
    let table = chunks.decode()?.concat()?; // Arrow arrays (decoded on the host)
    let id = table.column(0).as_any().downcast_ref::<Int64Array>().ok_or("id")?;
    let f64 = table.column(1).as_any().downcast_ref::<Float64Array>().ok_or("f64")?;
    println!(
        "rows {}: sum(id) = {:?}, sum(f64) = {:?}",
        table.num_rows(),
        sum(id),
        sum(f64)
    );
    Ok(())
}
