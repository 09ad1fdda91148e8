//! Rewrites a Parquet file sorted by one column, with what selective reads prune on: row-group and page
//! statistics, the page index (column and offset indexes) and, optionally, bloom filters. The
//! selective-scan benchmark's files come from it (TPC-H `lineitem` sorted by `l_shipdate`:
//! `tools/make_lineitem.sh` writes it beside the snappy file where this example's binary is there).
//!
//! ```sh
//! cargo run --release --example sort_parquet -- IN OUT --by l_shipdate \
//!     [--row-group-rows 2097152] [--page-bytes 1048576] [--compression snappy|zstd|none] [--bloom c1,c2]
//! ```
//!
//! Row groups are encoded in parallel (parquet's `ArrowRowGroupWriterFactory`) and appended in order,
//! so the output is the same as a single `ArrowWriter` would write.

use std::fs::File;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::{SortOptions, concat_batches, sort_to_indices, take_record_batch};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::compute_leaves;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Args {
    input: String,
    output: String,
    by: String,
    row_group_rows: usize,
    page_bytes: usize,
    compression: Compression,
    bloom: Vec<String>,
}

fn parse_args() -> Result<Args> {
    let mut positional = Vec::new();
    let mut by = None;
    let mut row_group_rows = 2 << 20;
    let mut page_bytes = 1 << 20;
    let mut compression = Compression::SNAPPY;
    let mut bloom = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--by" => by = Some(value("--by")?),
            "--row-group-rows" => row_group_rows = value("--row-group-rows")?.parse()?,
            "--page-bytes" => page_bytes = value("--page-bytes")?.parse()?,
            "--compression" => {
                compression = match value("--compression")?.as_str() {
                    "snappy" => Compression::SNAPPY,
                    "zstd" => Compression::ZSTD(ZstdLevel::try_new(1)?),
                    "none" => Compression::UNCOMPRESSED,
                    other => return Err(format!("--compression: snappy, zstd or none, not {other:?}").into()),
                }
            }
            "--bloom" => bloom = value("--bloom")?.split(',').map(str::to_string).collect(),
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}").into()),
            _ => positional.push(arg),
        }
    }
    let [input, output] = <[String; 2]>::try_from(positional)
        .map_err(|_| "usage: sort_parquet IN OUT --by COLUMN [--row-group-rows N] [--page-bytes N] [--compression C] [--bloom c1,c2]")?;
    let by = by.ok_or("--by COLUMN is required")?;
    if row_group_rows == 0 || page_bytes == 0 {
        return Err("--row-group-rows and --page-bytes must be positive".into());
    }
    Ok(Args {
        input,
        output,
        by,
        row_group_rows,
        page_bytes,
        compression,
        bloom,
    })
}

/// Every row group of `path`, read in parallel, as one batch of the file's Arrow schema.
fn read_all(path: &str) -> Result<RecordBatch> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
    let schema = builder.schema().clone();
    let groups = builder.metadata().num_row_groups();
    let batches: Vec<RecordBatch> = (0..groups)
        .into_par_iter()
        .map(|g| -> Result<Vec<RecordBatch>> {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?
                .with_row_groups(vec![g])
                .with_batch_size(1 << 20)
                .build()?;
            Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    Ok(concat_batches(&schema, &batches)?)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let started = std::time::Instant::now();
    let table = read_all(&args.input)?;
    let by = table
        .schema()
        .index_of(&args.by)
        .map_err(|_| format!("{}: no column {:?}", args.input, args.by))?;
    let order = sort_to_indices(table.column(by), Some(SortOptions::default()), None)?;
    eprintln!(
        "read and sorted {} rows in {:.1} s",
        table.num_rows(),
        started.elapsed().as_secs_f64()
    );

    let mut props = WriterProperties::builder()
        .set_compression(args.compression)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_data_page_size_limit(args.page_bytes)
        .set_max_row_group_row_count(Some(args.row_group_rows))
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: by as i32,
            descending: false,
            nulls_first: true,
        }]));
    for column in &args.bloom {
        table
            .schema()
            .index_of(column)
            .map_err(|_| format!("--bloom: no column {column:?}"))?;
        props = props.set_column_bloom_filter_enabled(ColumnPath::from(column.as_str()), true);
    }
    let writer = ArrowWriter::try_new(File::create(&args.output)?, table.schema(), Some(props.build()))?;
    let (mut file_writer, factory) = writer.into_serialized_writer()?;

    // Row groups of `row_group_rows` sorted rows, encoded in parallel, a wave of one per core at a time
    // (memory stays bounded), appended in order.
    let groups: Vec<(usize, usize)> = (0..table.num_rows())
        .step_by(args.row_group_rows)
        .map(|start| (start, args.row_group_rows.min(table.num_rows() - start)))
        .collect();
    let wave = rayon::current_num_threads().max(1);
    for (w, chunk) in groups.chunks(wave).enumerate() {
        let encoded = chunk
            .par_iter()
            .enumerate()
            .map(|(k, &(start, len))| -> Result<Vec<_>> {
                let indices: &UInt32Array = &order.slice(start, len);
                let rows = take_record_batch(&table, indices)?;
                let mut writers = factory.create_column_writers(w * wave + k)?;
                let mut next = writers.iter_mut();
                for (field, column) in rows.schema().fields().iter().zip(rows.columns()) {
                    for leaf in compute_leaves(field, column as &ArrayRef)? {
                        next.next().ok_or("more leaves than column writers")?.write(&leaf)?;
                    }
                }
                writers.into_iter().map(|c| Ok(c.close()?)).collect()
            })
            .collect::<Result<Vec<_>>>()?;
        for chunks in encoded {
            let mut row_group = file_writer.next_row_group()?;
            for chunk in chunks {
                chunk.append_to_row_group(&mut row_group)?;
            }
            row_group.close()?;
        }
    }
    let meta = file_writer.close()?;
    eprintln!(
        "wrote {} ({} row groups, {} rows, sorted by {}) in {:.1} s",
        args.output,
        meta.num_row_groups(),
        table.num_rows(),
        args.by,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
