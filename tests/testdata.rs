//! The committed files under `testdata/` have the shape `examples/make_testdata.rs` gives them.
//!
//! Byte equality with a fresh run is not asserted (the writer's version string and layout choices
//! may change with `parquet` upgrades); schema, row groups, codecs, dictionaries, page indexes and
//! decoded contents are.

use std::path::PathBuf;

use arrow::array::Array;
use arrow::datatypes::DataType;
use gpu_parquet::ParquetSource;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding};

fn testdata(name: &str) -> PathBuf {
    // The current directory first (the project root, also on the GPU machine), then the crate root.
    let local = PathBuf::from("testdata").join(name);
    if local.is_file() {
        return local;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

struct Shape {
    file: &'static str,
    row_groups: usize,
    rows_per_group: i64,
    codec: fn(Compression) -> bool,
    dictionary: bool,
    leaves: &'static [&'static str],
}

const FLAT: &[&str] = &["id", "i32", "i64", "f32", "f64", "s", "flag", "ts", "price", "day"];

const SHAPES: &[Shape] = &[
    Shape {
        file: "flat_plain.parquet",
        row_groups: 3,
        rows_per_group: 800,
        codec: |c| c == Compression::UNCOMPRESSED,
        dictionary: false,
        leaves: FLAT,
    },
    Shape {
        file: "flat_snappy_dict.parquet",
        row_groups: 3,
        rows_per_group: 800,
        codec: |c| c == Compression::SNAPPY,
        dictionary: true,
        leaves: FLAT,
    },
    Shape {
        file: "flat_zstd.parquet",
        row_groups: 4,
        rows_per_group: 600,
        codec: |c| matches!(c, Compression::ZSTD(_)),
        dictionary: true,
        leaves: FLAT,
    },
    Shape {
        file: "nested.parquet",
        row_groups: 2,
        rows_per_group: 1000,
        codec: |c| c == Compression::SNAPPY,
        dictionary: true,
        leaves: &[
            "id",
            "point.x",
            "point.label",
            "tags.list.item",
            "pairs.list.item.k",
            "pairs.list.item.v",
        ],
    },
    Shape {
        file: "types.parquet",
        row_groups: 2,
        rows_per_group: 700,
        codec: |c| c == Compression::SNAPPY,
        dictionary: true,
        leaves: &[
            "id",
            "view",
            "short_view",
            "binary_view",
            "large",
            "large_binary",
            "binary",
            "d32",
            "d64",
            "d128_int32",
            "d128_fixed",
            "d256_int64",
            "d256_fixed",
            "category",
            "code",
            "label",
        ],
    },
];

#[test]
fn committed_files_have_their_shape() {
    let mut total = 0;
    for shape in SHAPES {
        let path = testdata(shape.file);
        total += std::fs::metadata(&path)
            .map(|m| m.len())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let source = ParquetSource::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let md = source.metadata();
        let leaves: Vec<String> = (0..md.file_metadata().schema_descr().num_columns())
            .map(|c| source.column_path(c))
            .collect();
        assert_eq!(leaves, shape.leaves, "{}", shape.file);
        assert_eq!(md.num_row_groups(), shape.row_groups, "{}", shape.file);
        let index = md
            .page_index()
            .unwrap_or_else(|| panic!("{}: no page index", shape.file));
        for (g, rg) in md.row_groups().iter().enumerate() {
            assert_eq!(rg.num_rows(), shape.rows_per_group, "{} row group {g}", shape.file);
            for (c, chunk) in rg.columns().iter().enumerate() {
                let what = format!("{} row group {g} column {}", shape.file, leaves[c]);
                assert!((shape.codec)(chunk.compression()), "{what}: {:?}", chunk.compression());
                let has_dict = chunk.dictionary_page_offset().is_some();
                // Booleans are never dictionary-encoded.
                if leaves[c] != "flag" {
                    assert_eq!(has_dict, shape.dictionary, "{what}: dictionary page");
                }
                if !shape.dictionary {
                    assert!(chunk.encodings().all(|e| e != Encoding::RLE_DICTIONARY), "{what}");
                }
                let pages = index
                    .offset_index(g, c)
                    .unwrap_or_else(|| panic!("{what}: no offset index"))
                    .page_locations()
                    .len();
                assert!(pages >= 2, "{what}: {pages} data pages, expected several");
            }
        }
    }
    assert!(total < 1 << 20, "testdata/ holds {total} bytes; keep it under 1 MiB");
}

#[test]
fn committed_files_decode_with_nulls() {
    for shape in SHAPES {
        let path = testdata(shape.file);
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            rows as i64,
            shape.rows_per_group * shape.row_groups as i64,
            "{}",
            shape.file
        );
        let schema = batches[0].schema();
        for (i, field) in schema.fields().iter().enumerate() {
            let nulls: usize = batches.iter().map(|b| b.column(i).null_count()).sum();
            // `id` is required; every other column was written with nulls.
            if field.name() == "id" {
                assert_eq!(nulls, 0, "{}", shape.file);
                assert_eq!(field.data_type(), &DataType::Int64);
            } else if field.is_nullable() && !matches!(field.data_type(), DataType::List(_)) || field.name() == "tags" {
                assert!(nulls > 0, "{}: column {} has no null", shape.file, field.name());
            }
        }
        if shape.leaves == FLAT {
            let types: Vec<String> = schema.fields().iter().map(|f| f.data_type().to_string()).collect();
            assert_eq!(
                types,
                [
                    "Int64",
                    "Int32",
                    "Int64",
                    "Float32",
                    "Float64",
                    "Utf8",
                    "Boolean",
                    "Timestamp(µs, \"UTC\")",
                    "Decimal128(12, 2)",
                    "Date32"
                ],
                "{}",
                shape.file
            );
        }
    }
}
