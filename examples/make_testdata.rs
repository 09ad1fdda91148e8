//! Regenerates the small Parquet files under `testdata/` (deterministic: seeded, no clock).
//!
//! ```text
//! cargo run --example make_testdata [OUT_DIR]     # default: testdata
//! ```
//!
//! | file                     | columns                         | encoding              | row groups |
//! |--------------------------|---------------------------------|-----------------------|------------|
//! | `flat_plain.parquet`     | 10 flat types, nulls            | plain, uncompressed   | 3 x 800    |
//! | `flat_snappy_dict.parquet` | same                          | dictionary, snappy    | 3 x 800    |
//! | `flat_zstd.parquet`      | same                            | dictionary, zstd      | 4 x 600    |
//! | `nested.parquet`         | id, struct, list, list<struct>  | snappy                | 2 x 1000   |
//! | `types.parquet`          | view, large and binary strings, decimals 32/64/128/256 | dictionary, snappy | 2 x 700 |
//!
//! Every file has a page index (column and offset index) and several data pages per column chunk.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Date32Array, Decimal32Array, Decimal64Array, Decimal128Array,
    Decimal256Array, Float32Array, Float64Array, Int32Array, Int64Array, LargeBinaryArray, LargeStringArray, ListArray,
    StringArray, StringViewArray, StructArray, TimestampMicrosecondArray,
};
use arrow::array::{DictionaryArray, UInt16Array};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use arrow::datatypes::{Int8Type, Int32Type, UInt16Type, i256};
use arrow::record_batch::RecordBatch;
use gpu_parquet::conformance::SeededRng;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `Some(f(v))` except for roughly one value in `one_in`, from one draw of the (xorshift64*, deterministic
/// across platforms and versions) generator.
fn opt<T>(rng: &mut SeededRng, one_in: u64, f: impl FnOnce(u64) -> T) -> Option<T> {
    let v = rng.next_u64();
    (!v.is_multiple_of(one_in)).then(|| f(v >> 8))
}

fn flat_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("i32", DataType::Int32, true),
        Field::new("i64", DataType::Int64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("price", DataType::Decimal128(12, 2), true),
        Field::new("day", DataType::Date32, true),
    ]))
}

fn flat_batch(schema: &Arc<Schema>, start: usize, n: usize, rng: &mut SeededRng) -> Res<RecordBatch> {
    let mut col =
        |one_in: u64, f: &dyn Fn(u64) -> i64| -> Vec<Option<i64>> { (0..n).map(|_| opt(rng, one_in, f)).collect() };
    let i32s = col(10, &|v| (v % 2000) as i64 - 1000);
    let i64s = col(7, &|v| (v % (1 << 40)) as i64);
    let f32s = col(9, &|v| (v % 100_000) as i64);
    let f64s = col(11, &|v| (v % 1_000_000) as i64);
    let strs = col(13, &|v| (v % 200) as i64);
    let flags = col(5, &|v| (v & 1) as i64);
    let ts = col(8, &|v| (v % 86_400_000_000) as i64);
    let price = col(6, &|v| (v % 10_000_000) as i64);
    let day = col(12, &|v| (v % 3650) as i64);
    let base_ts = 1_700_000_000_000_000i64;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values((start..start + n).map(|i| i as i64))),
        Arc::new(Int32Array::from(
            i32s.iter().map(|v| v.map(|v| v as i32)).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(i64s)),
        Arc::new(Float32Array::from(
            f32s.iter().map(|v| v.map(|v| v as f32 / 7.0)).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            f64s.iter().map(|v| v.map(|v| v as f64 / 1e3)).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            strs.iter()
                .map(|v| v.map(|v| format!("value-{v:03}")))
                .collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            flags.iter().map(|v| v.map(|v| v == 1)).collect::<Vec<_>>(),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(ts.iter().map(|v| v.map(|v| base_ts + v)).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(
            Decimal128Array::from(
                price
                    .iter()
                    .map(|v| v.map(|v| v as i128 - 5_000_000))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(12, 2)?,
        ),
        Arc::new(Date32Array::from(
            day.iter().map(|v| v.map(|v| 18_000 + v as i32)).collect::<Vec<_>>(),
        )),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn nested_schema() -> Arc<Schema> {
    let point = Fields::from(vec![
        Field::new("x", DataType::Float64, false),
        Field::new("label", DataType::Utf8, true),
    ]);
    let item = Fields::from(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("v", DataType::Float32, true),
    ]);
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("point", DataType::Struct(point), true),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
        Field::new(
            "pairs",
            DataType::List(Arc::new(Field::new("item", DataType::Struct(item), true))),
            true,
        ),
    ]))
}

fn nested_batch(schema: &Arc<Schema>, start: usize, n: usize, rng: &mut SeededRng) -> Res<RecordBatch> {
    let field_of = |i: usize| -> Res<Fields> {
        match schema.field(i).data_type() {
            DataType::Struct(f) => Ok(f.clone()),
            DataType::List(item) => match item.data_type() {
                DataType::Struct(f) => Ok(f.clone()),
                _ => Err("not a list of structs".into()),
            },
            _ => Err("not a struct".into()),
        }
    };
    let xs: Vec<f64> = (0..n).map(|i| (start + i) as f64 * 0.25).collect();
    let labels: Vec<Option<String>> = (0..n).map(|_| opt(rng, 4, |v| format!("p{}", v % 50))).collect();
    let point_valid: Vec<bool> = (0..n).map(|_| !rng.next_u64().is_multiple_of(10)).collect();
    let point = StructArray::try_new(
        field_of(1)?,
        vec![Arc::new(Float64Array::from(xs)), Arc::new(StringArray::from(labels))],
        Some(point_valid.into()),
    )?;

    let mut lens = Vec::new();
    let mut valid = Vec::new();
    let mut items = Vec::new();
    for _ in 0..n {
        let v = rng.next_u64();
        let len = (v % 4) as usize;
        valid.push(!v.is_multiple_of(17));
        lens.push(if !v.is_multiple_of(17) { len } else { 0 });
        for _ in 0..lens[lens.len() - 1] {
            items.push(opt(rng, 6, |v| format!("t{}", v % 30)));
        }
    }
    let tags = ListArray::try_new(
        Arc::new(Field::new("item", DataType::Utf8, true)),
        OffsetBuffer::from_lengths(lens),
        Arc::new(StringArray::from(items)),
        Some(valid.into()),
    )?;

    let mut lens = Vec::new();
    let (mut ks, mut vs) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let len = (rng.next_u64() % 3) as usize;
        lens.push(len);
        for _ in 0..len {
            ks.push((rng.next_u64() % 100) as i32);
            vs.push(opt(rng, 5, |v| (v % 1000) as f32 / 10.0));
        }
    }
    let pairs_items = StructArray::try_new(
        field_of(3)?,
        vec![Arc::new(Int32Array::from(ks)), Arc::new(Float32Array::from(vs))],
        None,
    )?;
    let DataType::List(item_field) = schema.field(3).data_type().clone() else {
        return Err("pairs is not a list".into());
    };
    let pairs = ListArray::try_new(
        item_field,
        OffsetBuffer::from_lengths(lens),
        Arc::new(pairs_items),
        None,
    )?;

    Ok(RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values((start..start + n).map(|i| i as i64))),
            Arc::new(point),
            Arc::new(tags),
            Arc::new(pairs),
        ],
    )?)
}

/// The Arrow types whose Parquet columns need more than the physical values: the file's Arrow schema
/// asks for views, 64-bit offsets or narrower or wider decimals than Parquet's logical type gives.
fn types_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("view", DataType::Utf8View, true),
        Field::new("short_view", DataType::Utf8View, true),
        Field::new("binary_view", DataType::BinaryView, true),
        Field::new("large", DataType::LargeUtf8, true),
        Field::new("large_binary", DataType::LargeBinary, true),
        Field::new("binary", DataType::Binary, true),
        Field::new("d32", DataType::Decimal32(9, 2), true),
        Field::new("d64", DataType::Decimal64(18, 3), true),
        Field::new("d128_int32", DataType::Decimal128(7, 2), true),
        Field::new("d128_fixed", DataType::Decimal128(30, 4), true),
        Field::new("d256_int64", DataType::Decimal256(15, 1), true),
        Field::new("d256_fixed", DataType::Decimal256(60, 5), true),
        Field::new(
            "category",
            DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new(
            "code",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Int64)),
            true,
        ),
        Field::new(
            "label",
            DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::LargeUtf8)),
            true,
        ),
    ]))
}

fn types_batch(schema: &Arc<Schema>, start: usize, n: usize, rng: &mut SeededRng) -> Res<RecordBatch> {
    let mut col = |one_in: u64| -> Vec<Option<u64>> { (0..n).map(|_| opt(rng, one_in, |v| v)).collect() };
    // Strings of 0 to 40 bytes (inline up to 12 in a view, longer ones in its data buffer), from a
    // few hundred distinct values so the dictionary holds them.
    let text = |v: u64| {
        let len = (v % 41) as usize;
        format!("{:x}-{}", v % 300, "abcdefghijklmnopqrstuvwxyz0123456789ABCDE")[..len.min(4)].to_string()
            + &"x".repeat(len.saturating_sub(4))
    };
    let view = col(7);
    let short = col(5);
    let bin = col(9);
    let large = col(6);
    let large_bin = col(8);
    let plain_bin = col(10);
    let (d32, d64, d128a, d128b, d256a, d256b) = (col(4), col(5), col(6), col(7), col(8), col(9));
    let (category, code, label) = (col(6), col(7), col(8));
    let signed = |v: u64, m: u64| (v % m) as i64 - (m / 2) as i64;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values((start..start + n).map(|i| i as i64))),
        Arc::new(StringViewArray::from(
            view.iter().map(|v| v.map(text)).collect::<Vec<_>>(),
        )),
        Arc::new(StringViewArray::from(
            short
                .iter()
                .map(|v| v.map(|v| format!("s{}", v % 1000)))
                .collect::<Vec<_>>(),
        )),
        Arc::new(BinaryViewArray::from_iter(
            bin.iter().map(|v| v.map(|v| text(v).into_bytes())),
        )),
        Arc::new(LargeStringArray::from(
            large.iter().map(|v| v.map(text)).collect::<Vec<_>>(),
        )),
        Arc::new(LargeBinaryArray::from_iter(
            large_bin.iter().map(|v| v.map(|v| text(v).into_bytes())),
        )),
        Arc::new(BinaryArray::from_iter(
            plain_bin.iter().map(|v| v.map(|v| (v % 256).to_le_bytes().to_vec())),
        )),
        Arc::new(
            Decimal32Array::from(
                d32.iter()
                    .map(|v| v.map(|v| signed(v, 2_000_000_000) as i32))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(9, 2)?,
        ),
        Arc::new(
            Decimal64Array::from(d64.iter().map(|v| v.map(|v| signed(v, 1 << 60))).collect::<Vec<_>>())
                .with_precision_and_scale(18, 3)?,
        ),
        Arc::new(
            Decimal128Array::from(
                d128a
                    .iter()
                    .map(|v| v.map(|v| signed(v, 10_000_000) as i128))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(7, 2)?,
        ),
        Arc::new(
            Decimal128Array::from(
                d128b
                    .iter()
                    .map(|v| v.map(|v| signed(v, 1 << 62) as i128 * 1_000_000_007))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(30, 4)?,
        ),
        Arc::new(
            Decimal256Array::from(
                d256a
                    .iter()
                    .map(|v| v.map(|v| i256::from_i128(signed(v, 1 << 48) as i128)))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(15, 1)?,
        ),
        Arc::new(
            Decimal256Array::from(
                d256b
                    .iter()
                    .map(|v| {
                        v.map(|v| {
                            i256::from_i128(signed(v, 1 << 62) as i128 * (1 << 60)).wrapping_mul(i256::from(-7_777_777))
                        })
                    })
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(60, 5)?,
        ),
        // Categoricals as pandas writes them: few distinct values, the Arrow schema keeping the dictionary.
        Arc::new(
            category
                .iter()
                .map(|v| v.map(|v| ["red", "green", "blue", "a rather long category name"][(v % 4) as usize]))
                .collect::<DictionaryArray<Int8Type>>(),
        ),
        Arc::new(DictionaryArray::<Int32Type>::try_new(
            Int32Array::from(code.iter().map(|v| v.map(|v| (v % 50) as i32)).collect::<Vec<_>>()),
            Arc::new(Int64Array::from_iter_values((0..50).map(|i| i * 1_000_003 - 7))),
        )?),
        Arc::new(DictionaryArray::<UInt16Type>::try_new(
            UInt16Array::from(label.iter().map(|v| v.map(|v| (v % 300) as u16)).collect::<Vec<_>>()),
            Arc::new(LargeStringArray::from_iter_values(
                (0..300).map(|i| format!("label-{i}")),
            )),
        )?),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn props(compression: Compression, dictionary: bool) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(compression)
        .set_dictionary_enabled(dictionary)
        // Page-level statistics give a column index; the offset index is on by default.
        .set_statistics_enabled(EnabledStatistics::Page)
        // Several data pages per chunk (the row limit is checked once per write batch).
        .set_data_page_row_count_limit(200)
        .set_write_batch_size(100)
        .set_created_by("gpu-parquet make_testdata".into())
        .build()
}

type BatchFn = fn(&Arc<Schema>, usize, usize, &mut SeededRng) -> Res<RecordBatch>;

fn write(
    path: &Path,
    schema: Arc<Schema>,
    make: BatchFn,
    groups: usize,
    rows: usize,
    props: WriterProperties,
    seed: u64,
) -> Res<()> {
    let mut rng = SeededRng::new(seed);
    let tmp = path.with_extension("tmp");
    let mut w = ArrowWriter::try_new(File::create(&tmp)?, schema.clone(), Some(props))?;
    for g in 0..groups {
        w.write(&make(&schema, g * rows, rows, &mut rng)?)?;
        w.flush()?;
    }
    w.close()?;
    std::fs::rename(&tmp, path)?;
    println!("{}: {} bytes", path.display(), std::fs::metadata(path)?.len());
    Ok(())
}

fn main() -> Res<()> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "testdata".into()));
    std::fs::create_dir_all(&out)?;
    let zstd = Compression::ZSTD(ZstdLevel::try_new(3)?);
    write(
        &out.join("flat_plain.parquet"),
        flat_schema(),
        flat_batch,
        3,
        800,
        props(Compression::UNCOMPRESSED, false),
        0x9e37_79b9_7f4a_7c15,
    )?;
    write(
        &out.join("flat_snappy_dict.parquet"),
        flat_schema(),
        flat_batch,
        3,
        800,
        props(Compression::SNAPPY, true),
        0x9e37_79b9_7f4a_7c15,
    )?;
    write(
        &out.join("flat_zstd.parquet"),
        flat_schema(),
        flat_batch,
        4,
        600,
        props(zstd, true),
        0xdead_beef,
    )?;
    write(
        &out.join("nested.parquet"),
        nested_schema(),
        nested_batch,
        2,
        1000,
        props(Compression::SNAPPY, true),
        0x1234_5678,
    )?;
    write(
        &out.join("types.parquet"),
        types_schema(),
        types_batch,
        2,
        700,
        props(Compression::SNAPPY, true),
        0x5eed_7e57,
    )?;
    Ok(())
}
