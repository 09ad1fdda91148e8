//! Helpers shared by the integration tests: finding the parquet-testing corpus, listing its files, the
//! byte regions of a Parquet file, arrow-rs's own read (the reference results are compared with), and a
//! host fetch. Each test binary compiles its own copy with
//! `mod common;` and uses only some of it.

#![allow(dead_code)]

/// Says why a test is skipping, on stderr, past the test harness's output capture (which only takes
/// `print!`/`eprint!`), so the reason shows in a plain `cargo test` run, as on CI.
pub fn skip(reason: &str) {
    use std::io::Write;
    // libtest names each test's thread after the test.
    let test = match std::thread::current().name() {
        Some(name) if !name.is_empty() && name != "main" => format!("{name}: "),
        _ => String::new(),
    };
    let _ = writeln!(std::io::stderr(), "{test}skipped: {reason}");
}

use std::fs::File;
use std::path::{Path, PathBuf};

/// Whether the GPU decoder can run here (a CUDA driver and NVRTC); when not, prints why the calling
/// test skips.
pub fn gpu_decoder_available() -> bool {
    if let Err(why) = gpu_parquet::gpu::cuda_present() {
        skip(&format!("no CUDA driver ({why})"));
        return false;
    }
    if let Err(why) = gpu_parquet::gpu::nvrtc::nvrtc_present() {
        skip(&why);
        return false;
    }
    true
}

use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use gpu_parquet::io::host::HostBackend;
use gpu_parquet::io::{Fetched, IoBackend};
use gpu_parquet::panic_guard::contain_panics;
use gpu_parquet::{Error, Location, ParquetSource, ReadPlan};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

/// Where the parquet-testing checkout may be, in order: `GPU_PARQUET_TESTING`, then
/// `../shared/parquet-testing` from the current directory, then from the crate root.
fn testing_roots() -> impl Iterator<Item = PathBuf> {
    [
        std::env::var_os("GPU_PARQUET_TESTING").map(PathBuf::from),
        Some(PathBuf::from("../shared/parquet-testing")),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/parquet-testing")),
    ]
    .into_iter()
    .flatten()
}

/// The parquet-testing corpus (the first root with a `data/` folder); when there is none, prints why
/// the calling test skips and returns `None`.
pub fn corpus() -> Option<PathBuf> {
    let found = testing_roots().find(|p| p.join("data").is_dir());
    if found.is_none() {
        skip("parquet-testing corpus not found (set GPU_PARQUET_TESTING)");
    }
    found
}

/// The folder `sub` of the first parquet-testing root that has it, or `None` (nothing printed).
pub fn testing_dir(sub: &str) -> Option<PathBuf> {
    testing_roots().map(|p| p.join(sub)).find(|p| p.is_dir())
}

/// Files under `dir` (recursively) that pass `keep`, sorted.
pub fn files_under(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if keep(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Whether a path's file name ends with `suffix` (`.parquet`, `.parquet.encrypted`, ...).
pub fn name_ends_with(p: &Path, suffix: &str) -> bool {
    p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(suffix))
}

/// Byte ranges of a Parquet file: the column data, and the footer's metadata.
pub fn regions(bytes: &[u8]) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let n = bytes.len();
    let meta_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().expect("4 bytes")) as usize;
    let footer_start = n - 8 - meta_len;
    (4..footer_start, footer_start..n - 8)
}

/// Fetches `plan` into host memory with a host backend of `threads` threads (panics on failure).
pub fn host_fetch(source: &ParquetSource, plan: &ReadPlan, threads: usize) -> Fetched<Bytes> {
    let f = HostBackend::new(threads)
        .expect("backend")
        .fetch(source, plan)
        .expect("fetches");
    Fetched {
        buffer: f.buffer.into_bytes(),
        log: f.log,
    }
}

/// arrow-rs reading a whole file its own way (panics contained, as they may occur on bad data).
pub fn arrow_rs_read(path: &Path) -> Result<RecordBatch, String> {
    let loc = Location::file(path);
    contain_panics(&loc, || {
        let file = File::open(path).map_err(|e| Error::io(loc.clone(), "open", e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| Error::parquet(loc.clone(), e))?;
        collect(reader, &loc)
    })
    .map_err(|e| e.to_string())
}

/// arrow-rs reading a file after dropping dictionary page offsets that cannot be one (0, or not before
/// the first data page), and with the file's row count set to its row groups' where they disagree:
/// the deliberate differences between our reader and arrow-rs's (the first as in pyarrow and cuDF;
/// the second because arrow-rs caps batches at the file's row count, so a footer saying 0 rows over
/// row groups holding some reads as empty). Written here independently of the library's own fixes.
pub fn arrow_rs_read_sanitized(path: &Path) -> Result<RecordBatch, String> {
    let meta = File::open(path).map_err(|e| e.to_string()).and_then(|f| {
        ParquetMetaDataReader::new()
            .parse_and_finish(&f)
            .map_err(|e| e.to_string())
    })?;
    arrow_rs_read_with_metadata(path, meta)
}

/// arrow-rs reading `path` with the metadata `meta` (sanitized as [`arrow_rs_read_sanitized`] says),
/// for files whose footer arrow-rs cannot decode itself.
pub fn arrow_rs_read_with_metadata(path: &Path, meta: ParquetMetaData) -> Result<RecordBatch, String> {
    let loc = Location::file(path);
    contain_panics(&loc, || {
        let file = File::open(path).map_err(|e| Error::io(loc.clone(), "open", e))?;
        let perr = |e| Error::parquet(loc.clone(), e);
        let meta = with_row_groups_row_count(meta);
        let mut builder = meta.into_builder().set_page_index(None);
        let mut groups = Vec::new();
        for rg in builder.take_row_groups() {
            let mut cols = Vec::new();
            for c in rg.columns() {
                let bogus = c
                    .dictionary_page_offset()
                    .is_some_and(|d| d <= 0 || d > c.data_page_offset());
                let c = if bogus {
                    c.clone()
                        .into_builder()
                        .set_dictionary_page_offset(None)
                        .build()
                        .map_err(perr)?
                } else {
                    c.clone()
                };
                cols.push(c);
            }
            groups.push(rg.into_builder().set_column_metadata(cols).build().map_err(perr)?);
        }
        let meta: ParquetMetaData = builder.set_row_groups(groups).build();
        let arrow_meta = ArrowReaderMetadata::try_new(meta.into(), ArrowReaderOptions::new()).map_err(perr)?;
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, arrow_meta)
            .build()
            .map_err(perr)?;
        collect(reader, &loc)
    })
    .map_err(|e| e.to_string())
}

/// `meta` with the file's row count replaced by the sum of its row groups' counts.
pub fn with_row_groups_row_count(meta: ParquetMetaData) -> ParquetMetaData {
    let rows: i64 = meta.row_groups().iter().map(|rg| rg.num_rows()).sum();
    let fm = meta.file_metadata();
    if fm.num_rows() == rows {
        return meta;
    }
    let file_meta = parquet::file::metadata::FileMetaData::new(
        fm.version(),
        rows,
        fm.created_by().map(str::to_string),
        fm.key_value_metadata().cloned(),
        fm.schema_descr_ptr(),
        fm.column_orders().cloned(),
    );
    ParquetMetaData::new(file_meta, meta.row_groups().to_vec())
}

/// Whether a file's footer gives a row count other than its row groups' sum (arrow-rs then caps its
/// batches at the smaller count).
pub fn row_count_disagrees(path: &Path) -> bool {
    File::open(path)
        .ok()
        .and_then(|f| ParquetMetaDataReader::new().parse_and_finish(&f).ok())
        .is_some_and(|m| m.file_metadata().num_rows() != m.row_groups().iter().map(|rg| rg.num_rows()).sum::<i64>())
}

/// Every batch of an arrow-rs reader, concatenated; errors located at `loc`.
pub fn collect(reader: ParquetRecordBatchReader, loc: &Location) -> Result<RecordBatch, Error> {
    let schema = arrow::record_batch::RecordBatchReader::schema(&reader);
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::parquet(loc.clone(), e))?;
    arrow::compute::concat_batches(&schema, &batches).map_err(|e| Error::parquet(loc.clone(), e))
}

/// The reference for a file: arrow-rs's own read. Where that fails (or the footer's row count is not
/// its row groups', which arrow-rs caps batches at), arrow-rs's decode given, in turn:
/// - the footer sanitized as [`arrow_rs_read_sanitized`] says;
/// - that, with each chunk stretched to where the next chunk (or the footer) begins, as a reader that
///   trusts the layout over chunk sizes reads it (pyarrow pads the chunks of old parquet-mr files,
///   whose sizes leave out the dictionary page header).
///
/// Where arrow-rs cannot decode the footer at all, the same with the footer as the library decodes
/// it (skipping fields of the wrong Thrift type, as Thrift's own readers do): then only the page
/// decoding is independent, and the tests that name such files also check their values against
/// pyarrow's.
pub fn reference(path: &Path) -> Result<RecordBatch, String> {
    let plain = arrow_rs_read(path);
    let plain_err = match plain {
        Ok(b) if !row_count_disagrees(path) => return Ok(b),
        Ok(b) => format!("arrow-rs read {} rows, capped by the footer's row count", b.num_rows()),
        Err(e) => e,
    };
    let footer = File::open(path).map_err(|e| e.to_string()).and_then(|f| {
        ParquetMetaDataReader::new()
            .parse_and_finish(&f)
            .map_err(|e| e.to_string())
    });
    let meta = match footer {
        Ok(meta) => meta,
        Err(_) => match ParquetSource::open(path) {
            Ok(source) => source.metadata().as_ref().clone(),
            Err(_) => return Err(plain_err),
        },
    };
    arrow_rs_read_with_metadata(path, meta.clone())
        .or_else(|_| arrow_rs_read_with_metadata(path, stretched_to_next_chunk(path, meta)?))
        .map_err(|_| plain_err)
}

/// `meta` with each column chunk's compressed size stretched to where the next chunk (or the footer)
/// of `path` begins. Independent of the library's own chunk checks.
pub fn stretched_to_next_chunk(path: &Path, meta: ParquetMetaData) -> Result<ParquetMetaData, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let n = bytes.len();
    let footer_start = n
        .checked_sub(8)
        .and_then(|end| {
            let meta_len = u32::from_le_bytes(bytes[end..end + 4].try_into().ok()?) as usize;
            end.checked_sub(meta_len)
        })
        .ok_or("too short for its footer")?;
    let start = |c: &parquet::file::metadata::ColumnChunkMetaData| {
        c.dictionary_page_offset()
            .filter(|&d| d > 0 && d < c.data_page_offset())
            .unwrap_or(c.data_page_offset())
    };
    let mut starts: Vec<i64> = meta
        .row_groups()
        .iter()
        .flat_map(|rg| rg.columns())
        .map(start)
        .collect();
    starts.push(footer_start as i64);
    starts.sort_unstable();
    let mut builder = meta.into_builder();
    let mut groups = Vec::new();
    for rg in builder.take_row_groups() {
        let mut cols = Vec::new();
        for c in rg.columns() {
            let from = start(c);
            let next = starts.iter().find(|&&s| s > from).ok_or("a chunk past the footer")?;
            let c = c.clone().into_builder().set_total_compressed_size(next - from).build();
            cols.push(c.map_err(|e| e.to_string())?);
        }
        groups.push(
            rg.into_builder()
                .set_column_metadata(cols)
                .build()
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(builder.set_row_groups(groups).build())
}

/// The crate's `testdata/` folder: from the current directory (the crate root, as on the GPU machine,
/// where the build machine's paths do not exist), else from the crate root this was built in.
pub fn testdata_dir() -> PathBuf {
    let here = PathBuf::from("testdata");
    if here.is_dir() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
    }
}

/// The thrift compact encoding of a PageLocation (offset, compressed size, first row), as an
/// OffsetIndex holds it.
pub fn encode_page_location(offset: i64, size: i32, first_row: i64) -> Vec<u8> {
    let varint = |out: &mut Vec<u8>, v: i64| {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    };
    let mut out = vec![0x16];
    varint(&mut out, offset);
    out.push(0x15);
    varint(&mut out, size as i64);
    out.push(0x16);
    varint(&mut out, first_row);
    out.push(0);
    out
}

/// Damages the OffsetIndex of the file at `path` in place: page `page` of leaf `leaf` in row group
/// `row_group` changed by `change` (offset, size, first row → new values, which must encode in as
/// many bytes; the location must be found once in the file).
pub fn change_page_location(
    path: &Path,
    row_group: usize,
    leaf: usize,
    page: usize,
    change: impl Fn(i64, i32, i64) -> (i64, i32, i64),
) {
    let source = ParquetSource::open(path).unwrap();
    let loc = source
        .metadata()
        .page_index()
        .unwrap()
        .offset_index(row_group, leaf)
        .unwrap()
        .page_locations()[page]
        .clone();
    let mut bytes = std::fs::read(path).unwrap();
    let old = encode_page_location(loc.offset, loc.compressed_page_size, loc.first_row_index);
    let hits: Vec<usize> = bytes
        .windows(old.len())
        .enumerate()
        .filter(|(_, w)| *w == old)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits.len(), 1, "PageLocation {loc:?} found {} times", hits.len());
    let (o, s, f) = change(loc.offset, loc.compressed_page_size, loc.first_row_index);
    let new = encode_page_location(o, s, f);
    assert_eq!(new.len(), old.len(), "the change keeps the encoding's length");
    bytes[hits[0]..hits[0] + new.len()].copy_from_slice(&new);
    std::fs::write(path, bytes).unwrap();
}

/// Same columns (by name and type) and the same values, value for value.
pub fn assert_same(got: &RecordBatch, want: &RecordBatch, what: &str) {
    assert_eq!(got.num_rows(), want.num_rows(), "{what}: rows");
    assert_eq!(got.schema().fields(), want.schema().fields(), "{what}: fields");
    for i in 0..want.num_columns() {
        assert_eq!(
            got.column(i).to_data(),
            want.column(i).to_data(),
            "{what}: column {}",
            want.schema().field(i).name()
        );
    }
}
