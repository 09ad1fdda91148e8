//! The host references of the DELTA_* and BYTE_STREAM_SPLIT kernels (`decode::host_kernels::delta`, twins
//! of `kernels/delta.cu`) against arrow-rs: files ArrowWriter writes with each encoding, and the
//! parquet-testing files that use them. Each column chunk goes page by page through the descriptors
//! (as on the GPU: levels to `vidx`, the decode steps, string offsets, the DELTA_BYTE_ARRAY copy) and
//! through the stand-alone decoders, and every row is compared with arrow-rs's. Then hostile pages:
//! cut and flipped streams, bad descriptors, each an error code and never a panic.

mod common;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, FixedSizeBinaryArray, Float32Array, Float64Array, Int32Array, Int64Array,
    StringArray,
};
use arrow::datatypes::{DataType, Float32Type, Float64Type, Int32Type, Int64Type};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use gpu_parquet::decode::host_kernels::{Arena, delta};
use gpu_parquet::decode::layout::{ColumnDesc, ErrorCode, PageDesc, encoding as enc, physical as pt};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::Page;
use parquet::column::reader::ColumnReader;
use parquet::file::properties::{DeltaBinaryPackedEncoderOptions, WriterProperties, WriterVersion};
use parquet::file::reader::{FileReader, SerializedFileReader};

/// One value per row: its bytes (the physical value little-endian, or the byte array's bytes), `None`
/// for a null.
type Rows = Vec<Option<Vec<u8>>>;

/// A data page split as the decode steps see it: which rows are present, and the values stream.
#[derive(Clone)]
struct RawPage {
    encoding: u32,
    present: Vec<bool>,
    values: Vec<u8>,
}

/// A flat column chunk (one row group's column): its type and data pages.
#[derive(Clone)]
struct Chunk {
    row_group: usize,
    column: usize,
    physical: u32,
    type_len: u32,
    max_def: u32,
    pages: Vec<RawPage>,
}

fn physical_code(t: PhysicalType) -> u32 {
    match t {
        PhysicalType::BOOLEAN => pt::BOOLEAN,
        PhysicalType::INT32 => pt::INT32,
        PhysicalType::INT64 => pt::INT64,
        PhysicalType::INT96 => pt::INT96,
        PhysicalType::FLOAT => pt::FLOAT,
        PhysicalType::DOUBLE => pt::DOUBLE,
        PhysicalType::BYTE_ARRAY => pt::BYTE_ARRAY,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => pt::FIXED_LEN_BYTE_ARRAY,
    }
}

/// The encodings the kernels under test decode; `None` for the others.
fn our_encoding(e: Encoding) -> Option<u32> {
    match e {
        Encoding::DELTA_BINARY_PACKED => Some(enc::DELTA_BINARY_PACKED),
        Encoding::DELTA_LENGTH_BYTE_ARRAY => Some(enc::DELTA_LENGTH_BYTE_ARRAY),
        Encoding::DELTA_BYTE_ARRAY => Some(enc::DELTA_BYTE_ARRAY),
        Encoding::BYTE_STREAM_SPLIT => Some(enc::BYTE_STREAM_SPLIT),
        _ => None,
    }
}

/// `n` levels of the RLE/bit-packed hybrid encoding of width 1 (flat nullable columns), written here
/// rather than taken from the decoder under test.
fn def_levels(bytes: &[u8], n: usize) -> Vec<bool> {
    let mut out = Vec::with_capacity(n);
    let mut pos = 0;
    while out.len() < n {
        let mut header = 0u64;
        let mut shift = 0;
        loop {
            let b = bytes[pos];
            pos += 1;
            header |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        if header & 1 == 1 {
            let groups = (header >> 1) as usize;
            for i in 0..groups * 8 {
                if out.len() < n {
                    out.push(bytes[pos + i / 8] >> (i % 8) & 1 == 1);
                }
            }
            pos += groups;
        } else {
            let run = (header >> 1) as usize;
            let v = bytes[pos] & 1 == 1;
            pos += 1;
            out.extend(std::iter::repeat_n(v, run.min(n - out.len())));
        }
    }
    out
}

/// The flat column chunks of a file whose data pages all use one of the encodings under test.
fn chunks(file: &Bytes) -> Vec<Chunk> {
    let reader = SerializedFileReader::new(file.clone()).expect("open");
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let mut out = Vec::new();
    for row_group in 0..reader.num_row_groups() {
        let rg = reader.get_row_group(row_group).expect("row group");
        for column in 0..schema.num_columns() {
            let d = schema.column(column);
            if d.max_rep_level() != 0 || d.max_def_level() > 1 {
                continue;
            }
            let max_def = d.max_def_level() as u32;
            let mut pages = Vec::new();
            let mut all_ours = true;
            for page in rg.get_column_page_reader(column).expect("pages") {
                let (buf, n, encoding, levels) = match page.expect("page") {
                    Page::DataPage {
                        buf,
                        num_values,
                        encoding,
                        def_level_encoding,
                        ..
                    } => {
                        let n = num_values as usize;
                        if max_def == 0 {
                            (buf, n, encoding, None)
                        } else {
                            assert_eq!(def_level_encoding, Encoding::RLE);
                            let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
                            let levels = def_levels(&buf[4..4 + len], n);
                            (buf.slice(4 + len..), n, encoding, Some(levels))
                        }
                    }
                    Page::DataPageV2 {
                        buf,
                        num_values,
                        encoding,
                        def_levels_byte_len,
                        rep_levels_byte_len,
                        ..
                    } => {
                        let n = num_values as usize;
                        let (rep, def) = (rep_levels_byte_len as usize, def_levels_byte_len as usize);
                        let levels = (max_def > 0).then(|| def_levels(&buf[rep..rep + def], n));
                        (buf.slice(rep + def..), n, encoding, levels)
                    }
                    Page::DictionaryPage { .. } => {
                        all_ours = false;
                        continue;
                    }
                };
                let Some(encoding) = our_encoding(encoding) else {
                    all_ours = false;
                    continue;
                };
                pages.push(RawPage {
                    encoding,
                    present: levels.unwrap_or_else(|| vec![true; n]),
                    values: buf.to_vec(),
                });
            }
            if all_ours && !pages.is_empty() {
                out.push(Chunk {
                    row_group,
                    column,
                    physical: physical_code(d.physical_type()),
                    type_len: match d.physical_type() {
                        PhysicalType::INT32 | PhysicalType::FLOAT => 4,
                        PhysicalType::INT64 | PhysicalType::DOUBLE => 8,
                        PhysicalType::FIXED_LEN_BYTE_ARRAY => d.type_length() as u32,
                        _ => 0,
                    },
                    max_def,
                    pages,
                });
            }
        }
    }
    out
}

/// A decode step over one chunk, in an arena: the page and column descriptors, as the orchestrator
/// builds them after `gp_levels` (whose `vidx` and `num_non_null` are computed here from the levels).
struct Step {
    arena: Arena,
    pages: Vec<PageDesc>,
    col: ColumnDesc,
}

impl Step {
    fn new(chunk: &Chunk) -> Step {
        let mut arena = Arena::new();
        let rows: usize = chunk.pages.iter().map(|p| p.present.len()).sum();
        let dense_width = chunk.type_len.max(4);
        let mut vidx = Vec::with_capacity(rows);
        let mut pages = Vec::new();
        for p in &chunk.pages {
            let mut k = 0;
            let row_start = vidx.len() as u32;
            for &present in &p.present {
                vidx.push(if present { k } else { -1 });
                k += i32::from(present);
            }
            pages.push(PageDesc {
                values: arena.upload(&p.values),
                values_len: p.values.len() as u64,
                num_values: p.present.len() as u32,
                row_start,
                num_non_null: k as u32,
                encoding: p.encoding,
                physical: chunk.physical,
                type_len: chunk.type_len,
                max_def: chunk.max_def,
                def_bit_width: chunk.max_def,
                ..PageDesc::default()
            });
        }
        let col = ColumnDesc {
            num_rows: rows as u64,
            vidx: arena.upload_slice(&vidx),
            dense: arena.alloc(rows * dense_width as usize),
            dense_width,
            out_width: chunk.type_len,
            str_src: arena.alloc(rows * 8),
            str_len: arena.alloc(rows * 4),
            physical: chunk.physical,
            ..ColumnDesc::default()
        };
        Step { arena, pages, col }
    }

    /// Runs every value step (each skips pages of other encodings), as the kernels launch.
    fn decode_values(&mut self) {
        let cols = [self.col];
        delta::delta_binary_packed(&mut self.arena, &mut self.pages, &cols);
        delta::delta_length_byte_array(&mut self.arena, &mut self.pages, &cols);
        delta::delta_byte_array_lengths(&mut self.arena, &mut self.pages, &cols);
        delta::byte_stream_split(&mut self.arena, &mut self.pages, &cols);
    }

    /// The value index of each row (`vidx`).
    fn vidx(&self) -> Vec<i32> {
        self.arena.read(self.col.vidx, self.col.num_rows as usize).unwrap()
    }

    /// The string offsets (the offsets kernel's job, done here): a row's length is its value's
    /// `str_len`, 0 for a null. Allocates the characters; returns the total.
    fn offsets(&mut self) -> u64 {
        let rows = self.col.num_rows as usize;
        let lens: Vec<u32> = self.arena.read(self.col.str_len, rows).unwrap();
        let vidx = self.vidx();
        let mut offsets = vec![0i32];
        for p in &self.pages {
            for i in 0..p.num_values as usize {
                let row = p.row_start as usize + i;
                let len = match vidx[row] {
                    k if k < 0 => 0,
                    k => lens[p.row_start as usize + k as usize] as i32,
                };
                offsets.push(offsets.last().unwrap() + len);
            }
        }
        let total = *offsets.last().unwrap() as u64;
        self.col.out_offsets = self.arena.upload_slice(&offsets);
        self.col.out_values = self.arena.alloc(total as usize);
        self.col.chars_capacity = total;
        total
    }

    fn copy(&mut self) {
        delta::delta_byte_array_copy(&mut self.arena, &mut self.pages, &[self.col]);
    }

    fn errors(&self) -> Vec<(u32, u32)> {
        self.pages.iter().map(|p| (p.error, p.error_detail)).collect()
    }

    /// The decoded rows: fixed-width values from `dense`; byte arrays from `out_values` for
    /// DELTA_BYTE_ARRAY pages and from `str_src` (what `gp_copy_strings` copies) for the others.
    fn rows(&self) -> Rows {
        let vidx = self.vidx();
        let mut out = Vec::new();
        for p in &self.pages {
            for i in 0..p.num_values as u64 {
                let row = u64::from(p.row_start) + i;
                let k = vidx[row as usize];
                if k < 0 {
                    out.push(None);
                    continue;
                }
                let at = u64::from(p.row_start) + k as u64;
                let bytes = if self.col.physical != pt::BYTE_ARRAY {
                    let addr = self.col.dense + at * u64::from(self.col.dense_width);
                    self.arena.get(addr, u64::from(p.type_len))
                } else if p.encoding == enc::DELTA_BYTE_ARRAY {
                    let off: Vec<i32> = self.arena.read(self.col.out_offsets + row * 4, 2).unwrap();
                    self.arena
                        .get(self.col.out_values + off[0] as u64, (off[1] - off[0]) as u64)
                } else {
                    let src = self.arena.read::<u64>(self.col.str_src + at * 8, 1).unwrap()[0];
                    let len = self.arena.read::<u32>(self.col.str_len + at * 4, 1).unwrap()[0];
                    self.arena.get(src, u64::from(len))
                };
                out.push(Some(bytes.expect("decoded value in the arena").to_vec()));
            }
        }
        out
    }
}

/// Decodes a chunk through the descriptors (all steps); asserts no page has an error.
fn decode_chunk(chunk: &Chunk) -> Rows {
    let mut step = Step::new(chunk);
    step.decode_values();
    assert!(step.errors().iter().all(|e| e.0 == 0), "errors {:?}", step.errors());
    if chunk.physical == pt::BYTE_ARRAY {
        step.offsets();
        step.copy();
        assert!(
            step.errors().iter().all(|e| e.0 == 0),
            "copy errors {:?}",
            step.errors()
        );
    }
    step.rows()
}

/// Decodes a chunk with the stand-alone decoders, page by page.
fn decode_chunk_standalone(chunk: &Chunk) -> Rows {
    let mut out = Vec::new();
    for p in &chunk.pages {
        let n = p.present.iter().filter(|&&x| x).count();
        let w = chunk.type_len as usize;
        let values: Vec<Vec<u8>> = match p.encoding {
            enc::DELTA_BINARY_PACKED if chunk.physical == pt::INT32 => {
                let (v, _) = delta::decode_delta_binary_packed_i32(&p.values, n).unwrap();
                v.iter().map(|x| x.to_le_bytes().to_vec()).collect()
            }
            enc::DELTA_BINARY_PACKED => {
                let (v, _) = delta::decode_delta_binary_packed_i64(&p.values, n).unwrap();
                v.iter().map(|x| x.to_le_bytes().to_vec()).collect()
            }
            enc::DELTA_LENGTH_BYTE_ARRAY => delta::decode_delta_length_byte_array(&p.values, n)
                .unwrap()
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect(),
            enc::DELTA_BYTE_ARRAY => delta::decode_delta_byte_array(&p.values, n).unwrap(),
            enc::BYTE_STREAM_SPLIT => delta::decode_byte_stream_split(&p.values, n, w)
                .unwrap()
                .chunks_exact(w)
                .map(<[u8]>::to_vec)
                .collect(),
            other => panic!("encoding {other}"),
        };
        let mut values = values.into_iter();
        out.extend(p.present.iter().map(|&x| if x { values.next() } else { None }));
    }
    out
}

/// A column of an Arrow array as rows.
fn arrow_rows(a: &ArrayRef) -> Rows {
    (0..a.len())
        .map(|i| {
            a.is_valid(i).then(|| match a.data_type() {
                DataType::Int32 => a.as_primitive::<Int32Type>().value(i).to_le_bytes().to_vec(),
                DataType::Int64 => a.as_primitive::<Int64Type>().value(i).to_le_bytes().to_vec(),
                DataType::Float32 => a.as_primitive::<Float32Type>().value(i).to_le_bytes().to_vec(),
                DataType::Float64 => a.as_primitive::<Float64Type>().value(i).to_le_bytes().to_vec(),
                DataType::Utf8 => a.as_string::<i32>().value(i).as_bytes().to_vec(),
                DataType::Binary => a.as_binary::<i32>().value(i).to_vec(),
                DataType::FixedSizeBinary(_) => a.as_fixed_size_binary().value(i).to_vec(),
                other => panic!("type {other}"),
            })
        })
        .collect()
}

/// A chunk's rows as arrow-rs's physical column reader decodes them (for files of any logical type).
fn physical_rows(file: &Bytes, chunk: &Chunk) -> Rows {
    let reader = SerializedFileReader::new(file.clone()).unwrap();
    let rg = reader.get_row_group(chunk.row_group).unwrap();
    let n = rg.metadata().num_rows() as usize;
    let mut defs = Vec::new();
    macro_rules! read {
        ($r:expr, $bytes:expr) => {{
            let mut r = $r;
            let mut values = Vec::new();
            let mut read = 0;
            while read < n {
                let (records, _, _) = r.read_records(n - read, Some(&mut defs), None, &mut values).unwrap();
                assert!(records > 0, "column reader stopped at {read} of {n}");
                read += records;
            }
            values.iter().map($bytes).collect::<Vec<Vec<u8>>>()
        }};
    }
    let values = match rg.get_column_reader(chunk.column).unwrap() {
        ColumnReader::Int32ColumnReader(r) => read!(r, |v: &i32| v.to_le_bytes().to_vec()),
        ColumnReader::Int64ColumnReader(r) => read!(r, |v: &i64| v.to_le_bytes().to_vec()),
        ColumnReader::FloatColumnReader(r) => read!(r, |v: &f32| v.to_le_bytes().to_vec()),
        ColumnReader::DoubleColumnReader(r) => read!(r, |v: &f64| v.to_le_bytes().to_vec()),
        ColumnReader::ByteArrayColumnReader(r) => read!(r, |v: &parquet::data_type::ByteArray| v.data().to_vec()),
        ColumnReader::FixedLenByteArrayColumnReader(r) => {
            read!(r, |v: &parquet::data_type::FixedLenByteArray| v.data().to_vec())
        }
        ColumnReader::BoolColumnReader(_) | ColumnReader::Int96ColumnReader(_) => panic!("not decoded here"),
    };
    if chunk.max_def == 0 {
        return values.into_iter().map(Some).collect();
    }
    let mut values = values.into_iter();
    defs.iter().map(|&d| (d == 1).then(|| values.next().unwrap())).collect()
}

/// Writes `batch` with `props` into memory.
fn write(batch: &RecordBatch, props: WriterProperties) -> Bytes {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
    Bytes::from(out)
}

/// Writer settings: `encoding` for every column, no dictionary, uncompressed, small pages (several per
/// chunk) and row groups of 2000 rows.
fn props(encoding: Encoding, version: WriterVersion, layout: Option<(usize, usize)>) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_writer_version(version)
        .set_dictionary_enabled(false)
        .set_encoding(encoding)
        .set_write_batch_size(300)
        .set_data_page_row_count_limit(700)
        .set_max_row_group_row_count(Some(2000));
    if let Some((block, minis)) = layout {
        b = b.set_delta_binary_packed_encoder_options(DeltaBinaryPackedEncoderOptions::try_new(block, minis).unwrap());
    }
    b.build()
}

/// Decodes every chunk of `file` through the descriptors and the stand-alone decoders and compares each
/// row with the arrow-rs arrays read back from it; returns the chunks decoded.
fn check_against_arrow(file: &Bytes, what: &str) -> usize {
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let reader = SerializedFileReader::new(file.clone()).unwrap();
    let rg_start: Vec<usize> = reader
        .metadata()
        .row_groups()
        .iter()
        .scan(0, |acc, rg| {
            let start = *acc;
            *acc += rg.num_rows() as usize;
            Some(start)
        })
        .collect();
    let all = chunks(file);
    for chunk in &all {
        let expected: Rows = batches
            .iter()
            .flat_map(|b| arrow_rows(b.column(chunk.column)))
            .skip(rg_start[chunk.row_group])
            .take(chunk.pages.iter().map(|p| p.present.len()).sum())
            .collect();
        let name = reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .column(chunk.column)
            .name()
            .to_string();
        let at = format!("{what}: column {name}, row group {}", chunk.row_group);
        assert_eq!(decode_chunk(chunk), expected, "{at} (descriptors)");
        assert_eq!(decode_chunk_standalone(chunk), expected, "{at} (stand-alone)");
    }
    all.len()
}

/// Deterministic pseudo-random numbers (xorshift).
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Null masks: none, every third row, and random runs.
fn validity(kind: usize, n: usize) -> Option<Vec<bool>> {
    let mut r = rng(n as u64 + 77);
    match kind {
        0 => None,
        1 => Some((0..n).map(|i| i % 3 != 1).collect()),
        _ => Some((0..n).map(|_| r() % 8 < 5).collect()),
    }
}

fn ints(n: usize, seed: u64) -> Vec<(&'static str, Vec<i64>)> {
    let mut r = rng(seed);
    let extremes = [i64::MIN, i64::MAX, 0, -1, 1, i64::MIN + 1, i64::MAX - 1, i64::MAX];
    vec![
        ("extremes", (0..n).map(|i| extremes[i % extremes.len()]).collect()),
        ("random", (0..n).map(|_| r() as i64).collect()),
        ("small", (0..n).map(|_| (r() % 2000) as i64 - 1000).collect()),
        ("sorted", (0..n as i64).map(|i| i * 37 - 5000).collect()),
        ("constant", vec![-7; n]),
        (
            "spikes",
            (0..n).map(|i| if i % 97 == 3 { i64::MIN } else { i as i64 }).collect(),
        ),
    ]
}

const VERSIONS: [WriterVersion; 2] = [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0];

/// A file ArrowWriter wrote for a test: what it holds, its bytes, and how many of its chunks use the
/// encodings under test (all of them).
struct Written {
    what: String,
    file: Bytes,
    chunks: usize,
}

/// DELTA_BINARY_PACKED files: INT32 and INT64 columns of each sample (extremes, random, sorted, constant,
/// ...), 1 to 4500 rows, with and without nulls, data pages v1 and v2, four block layouts.
fn dbp_files() -> Vec<Written> {
    let mut out = Vec::new();
    for n in [1, 2, 129, 4500] {
        for nulls in 0..3 {
            let mask = validity(nulls, n);
            let keep = |i: usize| mask.as_ref().is_none_or(|m| m[i]);
            let mut columns: Vec<(String, ArrayRef)> = Vec::new();
            for (name, v) in ints(n, n as u64) {
                let i32_extremes = [i32::MIN, i32::MAX, 0, -1, 1, i32::MAX];
                let v32: Vec<Option<i32>> = (0..n)
                    .map(|i| {
                        keep(i).then(|| {
                            if name == "extremes" {
                                i32_extremes[i % 6]
                            } else {
                                v[i] as i32
                            }
                        })
                    })
                    .collect();
                let v64: Vec<Option<i64>> = (0..n).map(|i| keep(i).then_some(v[i])).collect();
                columns.push((format!("i32_{name}"), Arc::new(Int32Array::from(v32))));
                columns.push((format!("i64_{name}"), Arc::new(Int64Array::from(v64))));
            }
            let batch = RecordBatch::try_from_iter(columns).unwrap();
            for version in VERSIONS {
                for layout in [None, Some((128, 1)), Some((256, 8)), Some((1024, 4))] {
                    out.push(Written {
                        what: format!("DELTA_BINARY_PACKED, {n} rows, nulls {nulls}, {version:?}, layout {layout:?}"),
                        file: write(&batch, props(Encoding::DELTA_BINARY_PACKED, version, layout)),
                        chunks: 12 * n.div_ceil(2000),
                    });
                }
            }
        }
    }
    out
}

fn strings(n: usize, seed: u64) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let mut r = rng(seed);
    let mut urls: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("https://example.com/{}/{}/item-{}", i % 7, i % 13, i).into_bytes())
        .collect();
    urls.sort();
    vec![
        ("empty", vec![Vec::new(); n]),
        ("urls", urls),
        (
            "mixed",
            (0..n)
                .map(|i| match r() % 6 {
                    0 => Vec::new(),
                    1 => "ünïcödé ✓".repeat(i % 4).into_bytes(),
                    2 => vec![b'a'; (r() % 700) as usize],
                    3 => format!("prefix/shared/{}", i / 5).into_bytes(),
                    _ => (0..r() % 12).map(|_| b'a' + (r() % 26) as u8).collect(),
                })
                .collect(),
        ),
        ("same", vec![b"repeated value".to_vec(); n]),
    ]
}

/// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY files: binary and string columns of each sample (empty,
/// sorted URLs, mixed lengths and shared prefixes, one repeated value), with and without nulls, v1 and v2.
fn byte_array_files() -> Vec<Written> {
    let mut out = Vec::new();
    for n in [1, 2, 300, 2500] {
        for nulls in 0..3 {
            let mask = validity(nulls, n);
            let mut columns: Vec<(String, ArrayRef)> = Vec::new();
            for (name, v) in strings(n, n as u64 + 5) {
                let opt: Vec<Option<&[u8]>> = v
                    .iter()
                    .enumerate()
                    .map(|(i, x)| mask.as_ref().is_none_or(|m| m[i]).then_some(x.as_slice()))
                    .collect();
                columns.push((format!("bin_{name}"), Arc::new(BinaryArray::from(opt.clone()))));
                let text: Vec<Option<String>> = opt
                    .iter()
                    .map(|x| x.map(|b| String::from_utf8_lossy(b).into_owned()))
                    .collect();
                columns.push((format!("str_{name}"), Arc::new(StringArray::from(text))));
            }
            let batch = RecordBatch::try_from_iter(columns).unwrap();
            for encoding in [Encoding::DELTA_LENGTH_BYTE_ARRAY, Encoding::DELTA_BYTE_ARRAY] {
                for version in VERSIONS {
                    out.push(Written {
                        what: format!("{encoding:?}, {n} rows, nulls {nulls}, {version:?}"),
                        file: write(&batch, props(encoding, version, None)),
                        chunks: 8 * n.div_ceil(2000),
                    });
                }
            }
        }
    }
    out
}

/// BYTE_STREAM_SPLIT files: FLOAT (NaN, infinities, -0), DOUBLE, INT32, INT64 and FIXED_LEN_BYTE_ARRAY
/// (3 and 16 bytes) columns, with and without nulls, v1 and v2.
fn byte_stream_split_files() -> Vec<Written> {
    let mut out = Vec::new();
    for n in [1, 3, 1000, 2600] {
        for nulls in 0..3 {
            let mask = validity(nulls, n);
            let keep = |i: usize| mask.as_ref().is_none_or(|m| m[i]);
            let mut r = rng(n as u64 + 11);
            let f: Vec<Option<f32>> = (0..n)
                .map(|i| keep(i).then(|| [f32::NAN, f32::INFINITY, -0.0, f32::MIN_POSITIVE][i % 4] + (i as f32) * 0.1))
                .collect();
            let d: Vec<Option<f64>> = (0..n).map(|i| keep(i).then(|| f64::from_bits(r()))).collect();
            let i32s: Vec<Option<i32>> = (0..n).map(|i| keep(i).then(|| r() as i32)).collect();
            let i64s: Vec<Option<i64>> = (0..n).map(|i| keep(i).then(|| r() as i64)).collect();
            let flba = |w: usize, r: &mut dyn FnMut() -> u64| {
                let v: Vec<Option<Vec<u8>>> = (0..n)
                    .map(|i| keep(i).then(|| (0..w).map(|_| r() as u8).collect()))
                    .collect();
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(v.into_iter(), w as i32).unwrap()
            };
            let batch = RecordBatch::try_from_iter([
                ("f32", Arc::new(Float32Array::from(f)) as ArrayRef),
                ("f64", Arc::new(Float64Array::from(d))),
                ("i32", Arc::new(Int32Array::from(i32s))),
                ("i64", Arc::new(Int64Array::from(i64s))),
                ("flba3", Arc::new(flba(3, &mut r))),
                ("flba16", Arc::new(flba(16, &mut r))),
            ])
            .unwrap();
            for version in VERSIONS {
                out.push(Written {
                    what: format!("BYTE_STREAM_SPLIT, {n} rows, nulls {nulls}, {version:?}"),
                    file: write(&batch, props(Encoding::BYTE_STREAM_SPLIT, version, None)),
                    chunks: 6 * n.div_ceil(2000),
                });
            }
        }
    }
    out
}

#[test]
fn delta_binary_packed_matches_arrow() {
    for w in dbp_files() {
        assert_eq!(check_against_arrow(&w.file, &w.what), w.chunks, "{}", w.what);
    }
}

#[test]
fn byte_arrays_match_arrow() {
    for w in byte_array_files() {
        assert_eq!(check_against_arrow(&w.file, &w.what), w.chunks, "{}", w.what);
    }
}

#[test]
fn byte_stream_split_matches_arrow() {
    for w in byte_stream_split_files() {
        assert_eq!(check_against_arrow(&w.file, &w.what), w.chunks, "{}", w.what);
    }
}

/// The parquet-testing files that use these encodings (parquet-mr, parquet-cpp and other writers), with
/// their names; none (saying why) without the corpus.
fn corpus_files() -> Vec<(&'static str, Bytes)> {
    let Some(root) = common::corpus() else {
        return Vec::new();
    };
    let names = [
        "delta_binary_packed.parquet",
        "delta_byte_array.parquet",
        "delta_length_byte_array.parquet",
        "delta_encoding_required_column.parquet",
        "delta_encoding_optional_column.parquet",
        "byte_stream_split.zstd.parquet",
        "byte_stream_split_extended.gzip.parquet",
    ];
    let mut out = Vec::new();
    for name in names {
        let path = root.join("data").join(name);
        match std::fs::read(&path) {
            Ok(file) => out.push((name, Bytes::from(file))),
            Err(e) => common::skip(&format!("{}: {e}", path.display())),
        }
    }
    out
}

/// Every chunk of the corpus files whose pages all use these encodings, compared with arrow-rs's
/// physical column reader.
#[test]
fn parquet_testing_files() {
    for (name, file) in corpus_files() {
        let all = chunks(&file);
        assert!(!all.is_empty(), "{name}: no chunk uses the encodings under test");
        for chunk in &all {
            let expected = physical_rows(&file, chunk);
            let at = format!("{name}: column {} of row group {}", chunk.column, chunk.row_group);
            assert_eq!(decode_chunk(chunk), expected, "{at} (descriptors)");
            assert_eq!(decode_chunk_standalone(chunk), expected, "{at} (stand-alone)");
        }
    }
}

/// A chunk of each encoding, written by arrow-rs, for the hostile tests.
fn sample_chunks() -> Vec<Chunk> {
    let n = 600;
    let mask = validity(1, n);
    let keep = |i: usize| mask.as_ref().is_none_or(|m| m[i]);
    let ints: Vec<Option<i64>> = (0..n).map(|i| keep(i).then_some((i as i64 * 7919) % 1000)).collect();
    let text: Vec<Option<String>> = (0..n).map(|i| keep(i).then(|| format!("key/{:04}", i / 3))).collect();
    let floats: Vec<Option<f64>> = (0..n).map(|i| keep(i).then_some(i as f64 / 7.0)).collect();
    let mut out = Vec::new();
    for (array, encoding) in [
        (
            Arc::new(Int64Array::from(ints.clone())) as ArrayRef,
            Encoding::DELTA_BINARY_PACKED,
        ),
        (
            Arc::new(Int32Array::from_iter(ints.iter().map(|x| x.map(|v| v as i32)))),
            Encoding::DELTA_BINARY_PACKED,
        ),
        (
            Arc::new(StringArray::from(text.clone())),
            Encoding::DELTA_LENGTH_BYTE_ARRAY,
        ),
        (Arc::new(StringArray::from(text)), Encoding::DELTA_BYTE_ARRAY),
        (Arc::new(Float64Array::from(floats)), Encoding::BYTE_STREAM_SPLIT),
    ] {
        let batch = RecordBatch::try_from_iter([("c", array)]).unwrap();
        let file = write(&batch, props(encoding, WriterVersion::PARQUET_2_0, None));
        out.push(chunks(&file).remove(0));
    }
    out
}

/// Runs the steps over a chunk whatever its pages hold: an error on a page, or values; never a panic.
/// Returns the page errors.
fn run_hostile(chunk: &Chunk) -> Vec<(u32, u32)> {
    let mut step = Step::new(chunk);
    step.decode_values();
    if chunk.physical == pt::BYTE_ARRAY {
        step.offsets();
        step.copy();
    }
    let errors = step.errors();
    for (e, _) in &errors {
        assert!(*e == 0 || ErrorCode::from_u32(*e).is_some(), "unknown code {e}");
    }
    if errors.iter().all(|e| e.0 == 0) {
        assert_eq!(step.rows().len(), step.col.num_rows as usize);
    }
    errors
}

#[test]
fn cut_streams_are_errors_not_panics() {
    for chunk in sample_chunks() {
        let page = &chunk.pages[0];
        let mut errors = 0;
        for cut in 0..page.values.len() {
            let mut c = chunk.clone();
            c.pages[0].values.truncate(cut);
            let e = run_hostile(&c);
            errors += usize::from(e[0].0 != 0);
            // Only the first page was cut: the others still decode.
            assert!(e[1..].iter().all(|e| e.0 == 0), "{e:?}");
        }
        // Every cut breaks the page, but those that remove only a last miniblock's padding (at most a
        // miniblock of 32 values of 64 bits).
        assert!(errors + 256 > page.values.len(), "{errors} of {}", page.values.len());
    }
}

#[test]
fn flipped_streams_are_errors_or_values() {
    let mut r = rng(99);
    for chunk in sample_chunks() {
        for _ in 0..300 {
            let mut c = chunk.clone();
            for _ in 0..1 + r() % 3 {
                let v = &mut c.pages[0].values;
                let i = (r() % v.len() as u64) as usize;
                v[i] ^= 1 << (r() % 8);
            }
            run_hostile(&c);
        }
    }
}

/// One page of `encoding` over `values`, `n` values all present, in a fresh step.
fn one_page(physical: u32, encoding: u32, values: &[u8], n: usize) -> Chunk {
    Chunk {
        row_group: 0,
        column: 0,
        physical,
        type_len: match physical {
            pt::INT32 | pt::FLOAT => 4,
            pt::INT64 | pt::DOUBLE => 8,
            _ => 0,
        },
        max_def: 0,
        pages: vec![RawPage {
            encoding,
            present: vec![true; n],
            values: values.to_vec(),
        }],
    }
}

fn code(e: ErrorCode) -> u32 {
    e as u32
}

/// A DELTA_BINARY_PACKED header: `block` values per block in `minis` miniblocks, `total` values, the
/// first `first` (zigzag already applied).
fn dbp_header(block: u64, minis: u64, total: u64, first: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for mut v in [block, minis, total, first] {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out
}

/// Pages crafted to meet one check each: (what, page, the page's error and detail after all steps).
fn crafted_pages() -> Vec<(String, Chunk, (u32, u32))> {
    use ErrorCode::*;
    let header = |total: u64, first: u64| dbp_header(128, 4, total, first);
    // One block: min delta 0, widths [w, 0, 0, 0], 32 deltas of w bits all ones.
    let block = |w: u8| {
        let mut b = header(3, 0);
        b.extend_from_slice(&[0, w, 0, 0, 0]);
        b.extend(std::iter::repeat_n(0xff, 32 * w as usize / 8));
        b
    };
    let mut out = vec![
        (
            "DBP on BYTE_ARRAY",
            one_page(pt::BYTE_ARRAY, enc::DELTA_BINARY_PACKED, &header(1, 0), 1),
            (code(BadEncoding), pt::BYTE_ARRAY),
        ),
        (
            "total below the values",
            one_page(pt::INT32, enc::DELTA_BINARY_PACKED, &header(3, 0), 5),
            (code(ShortPage), 3),
        ),
        (
            "empty stream",
            one_page(pt::INT32, enc::DELTA_BINARY_PACKED, &[], 0),
            (code(Overrun), 0),
        ),
        (
            "block size 0",
            one_page(pt::INT64, enc::DELTA_BINARY_PACKED, &dbp_header(0, 4, 1, 0), 1),
            (code(BadDeltaHeader), 0),
        ),
        (
            "16 values per miniblock",
            one_page(pt::INT64, enc::DELTA_BINARY_PACKED, &dbp_header(128, 8, 1, 0), 1),
            (code(BadDeltaHeader), 2),
        ),
        (
            "ULEB over 10 bytes",
            one_page(pt::INT64, enc::DELTA_BINARY_PACKED, &[0xff; 12], 1),
            (code(BadDeltaHeader), 0),
        ),
        (
            "INT32 first value",
            one_page(pt::INT32, enc::DELTA_BINARY_PACKED, &header(1, 1 << 32), 1),
            (code(BadDeltaHeader), 4),
        ),
        (
            "INT64 first value",
            one_page(pt::INT64, enc::DELTA_BINARY_PACKED, &header(1, 1 << 32), 1),
            (0, 0),
        ),
        (
            "DLBA on INT64",
            one_page(pt::INT64, enc::DELTA_LENGTH_BYTE_ARRAY, &header(1, 0), 1),
            (code(BadEncoding), pt::INT64),
        ),
        (
            "one empty string",
            one_page(pt::BYTE_ARRAY, enc::DELTA_LENGTH_BYTE_ARRAY, &header(1, 0), 1),
            (0, 0),
        ),
        // DELTA_BYTE_ARRAY on FIXED_LEN_BYTE_ARRAY is `gp_delta_byte_array_fixed`'s (tested with the
        // pipeline in reference_decoder.rs): the byte-array kernels leave such a page alone.
        (
            "DBA on FLBA",
            one_page(pt::FIXED_LEN_BYTE_ARRAY, enc::DELTA_BYTE_ARRAY, &header(1, 0), 1),
            (0, 0),
        ),
        // 7 bytes hold a DOUBLE stream of 0 values, INT32 streams of 1.
        (
            "BSS DOUBLE short",
            one_page(pt::DOUBLE, enc::BYTE_STREAM_SPLIT, &[0; 7], 1),
            (code(Overrun), 0),
        ),
        (
            "BSS INT32",
            one_page(pt::INT32, enc::BYTE_STREAM_SPLIT, &[0; 7], 1),
            (0, 0),
        ),
        (
            "BSS BOOLEAN",
            one_page(pt::BOOLEAN, enc::BYTE_STREAM_SPLIT, &[0; 7], 1),
            (code(BadEncoding), pt::BOOLEAN),
        ),
    ]
    .into_iter()
    .map(|(what, page, e)| (what.to_string(), page, e))
    .collect::<Vec<_>>();
    for (physical, bits) in [(pt::INT32, 32u8), (pt::INT64, 64)] {
        for w in [bits - 1, bits, bits + 1, 255] {
            let want = if w > bits {
                (code(BadBitWidth), u32::from(w))
            } else {
                (0, 0)
            };
            out.push((
                format!("width {w} of {bits}"),
                one_page(physical, enc::DELTA_BINARY_PACKED, &block(w), 3),
                want,
            ));
        }
    }
    // One length of 3 and two bytes: value 0 overruns.
    let mut dlba = header(1, 6);
    dlba.extend_from_slice(b"ab");
    out.push((
        "DLBA bytes short".into(),
        one_page(pt::BYTE_ARRAY, enc::DELTA_LENGTH_BYTE_ARRAY, &dlba, 1),
        (code(Overrun), 0),
    ));
    // A negative length (-1: zigzag 1).
    let mut neg = header(1, 1);
    neg.extend_from_slice(b"abc");
    out.push((
        "DLBA negative length".into(),
        one_page(pt::BYTE_ARRAY, enc::DELTA_LENGTH_BYTE_ARRAY, &neg, 1),
        (code(Overrun), 0),
    ));
    // Lengths declaring 2^60 values in blocks of 2^31 (widths 0): finding their end costs bytes, not time.
    let mut huge = dbp_header(1 << 31, 1, 1 << 60, 0);
    for _ in 0..50 {
        huge.extend_from_slice(&[0, 0]);
    }
    out.push((
        "DLBA huge count".into(),
        one_page(pt::BYTE_ARRAY, enc::DELTA_LENGTH_BYTE_ARRAY, &huge, 3),
        (code(Overrun), huge.len() as u32),
    ));
    out.push((
        "DBP huge count".into(),
        one_page(pt::INT64, enc::DELTA_BINARY_PACKED, &huge, 3),
        (0, 0),
    ));
    // DELTA_BYTE_ARRAY whose first prefix is 1 (zigzag 2).
    let mut dba = header(1, 2);
    dba.extend(header(1, 0));
    out.push((
        "DBA first prefix".into(),
        one_page(pt::BYTE_ARRAY, enc::DELTA_BYTE_ARRAY, &dba, 1),
        (code(BadPrefix), 0),
    ));
    // Values "a", "aa", "aa", ... (prefix 1, suffix "a") but a prefix of 3 at `bad`, about the kernels'
    // chunk boundaries: longer than the previous value.
    for bad in [1usize, 31, 32, 63, 64, 65, 255, 256, 257, 1023, 1024] {
        let n = bad + 10;
        let prefixes: Vec<i64> = (0..n).map(|k| if k == bad { 3 } else { i64::from(k > 0) }).collect();
        let mut page = delta::encode_delta_binary_packed(&prefixes, 128, 4, 32, 0);
        page.extend(delta::encode_delta_binary_packed(&vec![1; n], 128, 4, 32, 0));
        page.extend(std::iter::repeat_n(b'a', n));
        let want = (code(BadPrefix), bad as u32);
        out.push((
            format!("DBA prefix at {bad}"),
            one_page(pt::BYTE_ARRAY, enc::DELTA_BYTE_ARRAY, &page, n),
            want,
        ));
    }
    // Two prefix lengths (0, 0: a block of width 0) but three suffixes.
    let mut prefixes = header(2, 0);
    prefixes.extend_from_slice(&[0, 0, 0, 0, 0]);
    let mut mismatch = prefixes.clone();
    mismatch.extend(header(3, 0));
    out.push((
        "DBA count mismatch".into(),
        one_page(pt::BYTE_ARRAY, enc::DELTA_BYTE_ARRAY, &mismatch, 2),
        (code(BadDeltaHeader), prefixes.len() as u32),
    ));
    out
}

#[test]
fn descriptor_errors() {
    for (what, page, want) in crafted_pages() {
        assert_eq!(run_hostile(&page)[0], want, "{what}");
    }
}

#[test]
fn pages_with_an_error_are_skipped() {
    let chunk = &sample_chunks()[0];
    let mut step = Step::new(chunk);
    step.pages[0].error = code(ErrorCode::BadLevel);
    step.pages[0].error_detail = 77;
    step.decode_values();
    assert_eq!(step.errors()[0], (code(ErrorCode::BadLevel), 77));
    let dense = step.arena.read::<u64>(step.col.dense, 1).unwrap();
    assert_eq!(dense, [0], "nothing written for the page");
}

#[test]
fn copy_checks_offsets_rows_and_prefixes() {
    let chunk = &sample_chunks()[3];
    assert_eq!(chunk.pages[0].encoding, enc::DELTA_BYTE_ARRAY);
    let prepare = || {
        let mut step = Step::new(chunk);
        step.decode_values();
        step.offsets();
        step
    };
    // The mask drops every third row; the sixth present row gets a wrong end offset.
    let vidx = prepare().vidx();
    let present: Vec<usize> = (0..vidx.len()).filter(|&i| vidx[i] >= 0).collect();
    let row = present[5];
    let mut step = prepare();
    let mut offsets: Vec<i32> = step.arena.read(step.col.out_offsets, vidx.len() + 1).unwrap();
    offsets[row + 1] += 1;
    step.arena.write(step.col.out_offsets, &offsets);
    step.copy();
    assert_eq!(step.errors()[0], (code(ErrorCode::Overrun), row as u32));
    // One byte too little room for the characters: the last present row of the last page fails.
    let mut step = prepare();
    step.col.chars_capacity -= 1;
    step.copy();
    let last = step.pages.last().unwrap();
    let last_row = *present.last().unwrap() - last.row_start as usize;
    assert_eq!(
        *step.errors().last().unwrap(),
        (code(ErrorCode::Overrun), last_row as u32)
    );
    assert!(step.errors()[..step.pages.len() - 1].iter().all(|e| e.0 == 0));
    // A present row whose value index skips one.
    let mut step = prepare();
    let mut v = vidx.clone();
    v[present[2]] += 1;
    step.arena.write(step.col.vidx, &v);
    step.copy();
    assert_eq!(step.errors()[0], (code(ErrorCode::Overrun), present[2] as u32));
    // A prefix longer than the previous value.
    let mut step = prepare();
    let k = 3u64;
    let addr = step.col.dense + k * u64::from(step.col.dense_width);
    step.arena.write(addr, &[1000u32]);
    step.copy();
    assert_eq!(step.errors()[0], (code(ErrorCode::BadPrefix), present[3] as u32));
}

/// A required DELTA_BYTE_ARRAY column of `n` values "b", "bb", ..., 40 b's, "b", ... (each value but
/// every 40th: the previous one as prefix and one byte of suffix).
fn growing_dba_chunk(n: usize) -> Chunk {
    let len = |k: usize| (1 + k % 40) as i64;
    let prefixes: Vec<i64> = (0..n)
        .map(|k| if k == 0 { 0 } else { len(k - 1).min(len(k)) })
        .collect();
    let suffixes: Vec<i64> = (0..n).map(|k| len(k) - prefixes[k]).collect();
    let mut page = delta::encode_delta_binary_packed(&prefixes, 128, 4, 32, 0);
    page.extend(delta::encode_delta_binary_packed(&suffixes, 128, 4, 32, 0));
    page.extend(std::iter::repeat_n(b'b', suffixes.iter().sum::<i64>() as usize));
    one_page(pt::BYTE_ARRAY, enc::DELTA_BYTE_ARRAY, &page, n)
}

/// Sets value `k`'s prefix (after the lengths step) one past the previous value's length, still within
/// its own.
fn lengthen_prefix(step: &mut Step, k: u64) {
    let lens: Vec<u32> = step.arena.read(step.col.str_len + (k - 1) * 4, 2).unwrap();
    assert!(lens[1] > lens[0]);
    step.arena.write(step.col.dense + k * 4, &[lens[0] + 1]);
}

#[test]
fn copy_checks_prefixes_across_windows() {
    let chunk = growing_dba_chunk(600);
    let mut step = Step::new(&chunk);
    step.decode_values();
    step.offsets();
    step.copy();
    let want: Rows = (0..600).map(|k| Some(vec![b'b'; 1 + k % 40])).collect();
    assert_eq!(step.rows(), want);
    for bad in [1u64, 31, 32, 63, 64, 65, 255, 256, 257, 512] {
        let mut step = Step::new(&chunk);
        step.decode_values();
        step.offsets();
        lengthen_prefix(&mut step, bad);
        step.copy();
        assert_eq!(step.errors()[0], (code(ErrorCode::BadPrefix), bad as u32), "at {bad}");
    }
}

// ---- Cases for the CPU emulation of the kernels (tests/emulate/delta_emu.cpp) ----

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "-".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn joined<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(" ")
}

/// Appends one case: a chunk's pages, then what the references give after the value steps (errors,
/// `dense`, `str_len`, `str_src` relative to the page's values, -1 where unset) and, for byte arrays,
/// after `mutate` (the prefixes it changed, `vidx`, offsets and capacity the copy step gets) and the
/// copy step (errors, characters).
fn emulation_case(out: &mut String, name: &str, chunk: &Chunk, mutate: &dyn Fn(&mut Step)) {
    use std::fmt::Write;
    let mut step = Step::new(chunk);
    let rows = step.col.num_rows as usize;
    let dense_len = (rows * step.col.dense_width as usize) as u64;
    let errors = |step: &Step| joined(&step.errors().iter().flat_map(|e| [e.0, e.1]).collect::<Vec<_>>());
    writeln!(out, "CASE {name}").unwrap();
    let c = &step.col;
    writeln!(
        out,
        "COL {} {} {} {rows} {}",
        chunk.physical, chunk.type_len, chunk.max_def, c.dense_width
    )
    .unwrap();
    for (p, raw) in step.pages.iter().zip(&chunk.pages) {
        let (e, n, k, r) = (p.encoding, p.num_values, p.num_non_null, p.row_start);
        writeln!(out, "PAGE {e} {n} {k} {r} {}", hex(&raw.values)).unwrap();
    }
    step.decode_values();
    writeln!(out, "ERR {}", errors(&step)).unwrap();
    writeln!(out, "DENSE {}", hex(step.arena.get(step.col.dense, dense_len).unwrap())).unwrap();
    writeln!(
        out,
        "STRLEN {}",
        joined(&step.arena.read::<u32>(step.col.str_len, rows).unwrap())
    )
    .unwrap();
    let srcs: Vec<u64> = step.arena.read(step.col.str_src, rows).unwrap();
    let rel: Vec<i64> = (0..rows)
        .map(|at| {
            let page = step
                .pages
                .iter()
                .find(|p| (p.row_start..p.row_start + p.num_non_null).contains(&(at as u32)));
            match page {
                Some(p) if (p.values..=p.values + p.values_len).contains(&srcs[at]) => (srcs[at] - p.values) as i64,
                _ => -1,
            }
        })
        .collect();
    writeln!(out, "SRC {}", joined(&rel)).unwrap();
    if chunk.physical == pt::BYTE_ARRAY {
        step.offsets();
        let before = step.arena.read::<u32>(step.col.dense, rows).unwrap();
        mutate(&mut step);
        let after = step.arena.read::<u32>(step.col.dense, rows).unwrap();
        for k in (0..rows).filter(|&k| before[k] != after[k]) {
            writeln!(out, "PATCH {k} {}", after[k]).unwrap();
        }
        writeln!(out, "VIDX {}", joined(&step.vidx())).unwrap();
        let offsets: Vec<i32> = step.arena.read(step.col.out_offsets, rows + 1).unwrap();
        writeln!(out, "OFFSETS {}", joined(&offsets)).unwrap();
        writeln!(out, "CAP {}", step.col.chars_capacity).unwrap();
        step.copy();
        writeln!(out, "ERR2 {}", errors(&step)).unwrap();
        let total = offsets[rows].max(0) as u64;
        writeln!(
            out,
            "OUT {}",
            hex(step.arena.get(step.col.out_values, total).unwrap_or(&[]))
        )
        .unwrap();
    }
    writeln!(out, "END").unwrap();
}

/// Writes the cases `tests/emulate/delta_emu.cpp` runs the kernels on (to the file named by
/// `GP_DELTA_CASES`): every chunk of the files the tests above write and read, the crafted pages, cut,
/// flipped and random pages, and mutations before the copy step. See that file.
#[test]
#[ignore = "writes the CPU emulation's cases; run by hand"]
fn emulation_cases() {
    let Some(path) = std::env::var_os("GP_DELTA_CASES") else {
        common::skip("GP_DELTA_CASES names no file to write");
        return;
    };
    let mut out = String::new();
    let none = |_: &mut Step| {};
    let written = [dbp_files(), byte_array_files(), byte_stream_split_files()]
        .into_iter()
        .flatten();
    let files = written
        .map(|w| (w.what, w.file))
        .chain(corpus_files().into_iter().map(|(n, f)| (n.to_string(), f)));
    for (what, file) in files {
        for (i, c) in chunks(&file).iter().enumerate() {
            emulation_case(&mut out, &format!("{}#{i}", what.replace(' ', "")), c, &none);
        }
    }
    for (what, page, _) in crafted_pages() {
        emulation_case(&mut out, &what.replace(' ', "_"), &page, &none);
    }
    let mut r = rng(5);
    for (ci, chunk) in sample_chunks().iter().enumerate() {
        let len = chunk.pages[0].values.len();
        for cut in (0..len).step_by(1 + len / 150) {
            let mut c = chunk.clone();
            c.pages[0].values.truncate(cut);
            emulation_case(&mut out, &format!("cut{ci}_{cut}"), &c, &none);
        }
        for f in 0..200 {
            let mut c = chunk.clone();
            for _ in 0..1 + r() % 3 {
                let v = &mut c.pages[0].values;
                let i = (r() % v.len() as u64) as usize;
                v[i] ^= 1 << (r() % 8);
            }
            emulation_case(&mut out, &format!("flip{ci}_{f}"), &c, &none);
        }
    }
    let kinds = [
        (pt::INT32, enc::DELTA_BINARY_PACKED),
        (pt::INT64, enc::DELTA_BINARY_PACKED),
        (pt::BYTE_ARRAY, enc::DELTA_LENGTH_BYTE_ARRAY),
        (pt::BYTE_ARRAY, enc::DELTA_BYTE_ARRAY),
        (pt::FLOAT, enc::BYTE_STREAM_SPLIT),
        (pt::BYTE_ARRAY, enc::DELTA_BINARY_PACKED),
    ];
    for t in 0..400 {
        let (n, len) = ((r() % 300) as usize, (r() % 200) as usize);
        let values: Vec<u8> = (0..len)
            .map(|_| if r().is_multiple_of(3) { 0 } else { r() as u8 })
            .collect();
        let (physical, encoding) = kinds[t % kinds.len()];
        emulation_case(
            &mut out,
            &format!("random{t}"),
            &one_page(physical, encoding, &values, n),
            &none,
        );
    }
    let dba = &sample_chunks()[3];
    for m in 0..40usize {
        let mutate = move |step: &mut Step| {
            let rows = step.col.num_rows as usize;
            match m % 4 {
                0 => {
                    let mut o: Vec<i32> = step.arena.read(step.col.out_offsets, rows + 1).unwrap();
                    o[1 + m * 13 % rows] += 1;
                    step.arena.write(step.col.out_offsets, &o);
                }
                1 => step.col.chars_capacity -= (m as u64) % 5 + 1,
                2 => {
                    let mut v = step.vidx();
                    let i = m * 29 % rows;
                    v[i] = if v[i] < 0 { 0 } else { v[i] + 1 };
                    step.arena.write(step.col.vidx, &v);
                }
                _ => {
                    step.arena
                        .write(step.col.dense + (m * 31 % 300) as u64 * 4, &[(m as u32) % 12]);
                }
            }
        };
        emulation_case(&mut out, &format!("copy_mutation{m}"), dba, &mutate);
    }
    let growing = growing_dba_chunk(600);
    emulation_case(&mut out, "growing", &growing, &none);
    for bad in [1u64, 31, 32, 63, 64, 65, 255, 256, 257, 512] {
        let lengthen = move |s: &mut Step| lengthen_prefix(s, bad);
        emulation_case(&mut out, &format!("growing_prefix{bad}"), &growing, &lengthen);
    }
    std::fs::write(&path, out).unwrap();
}
