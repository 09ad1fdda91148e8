//! The corruption suite: files written here with arrow-rs (every route of the decoder: plain,
//! dictionary, delta, byte stream split, nulls, a list, views, 64-bit offsets, a fixed-length decimal
//! (dictionary in v1, DELTA_BYTE_ARRAY in v2), a fixed-size list of fixed-width items,
//! a dictionary-typed column whose dictionary overflows into plain pages;
//! uncompressed and Snappy; data pages v1 and v2), then damaged on purpose at known places: truncated at every section boundary, bytes flipped in
//! the footer, the page headers and the page data, metadata that lies (chunks past the end or
//! overlapping, negative offsets, huge value and row counts), dictionary-index bit widths over 32 and
//! 64, page sizes that lie (compressed and uncompressed), and a file changed during the read.
//!
//! Every damaged file goes through every decoder this machine has: the host path (host backend,
//! arrow-rs), the GPU decode pipeline on its host references (`decode_reference`, which CI runs), and
//! on a GPU machine the GPU decoder itself (else it prints why it skips). Each must give an error
//! naming the file (and, for damage inside a column chunk, the column and row group where the
//! decoder can tell), or a table equal to arrow-rs's own read of the same damaged file; never a
//! panic, never a hang, never a different table.

mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arrow::array::{
    Array, ArrayRef, Decimal128Array, DictionaryArray, FixedSizeListArray, Float32Array, Int32Array, Int64Array,
    LargeStringArray, ListArray, StringArray, StringViewArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use arrow::record_batch::RecordBatch;
use gpu_parquet::decode::gpu::decode_reference_with;
use gpu_parquet::decode::host_headers::parse_step_headers;
use gpu_parquet::decode::host_kernels::page_headers::parse_pages;
use gpu_parquet::decode::pipeline::PageHints;
use gpu_parquet::io::select::AnyBackend;
use gpu_parquet::{
    BackendKind, Error, IoPolicy, Location, ParquetSource, PlanOptions, Projection, ReadPlan, Reader, RowGroupSelection,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

/// Longest a decoder may take on one damaged file (they take milliseconds; this catches hangs), unless
/// `GPU_PARQUET_TEST_TIMEOUT_S` says otherwise (compute-sanitizer slows every launch).
const TIMEOUT: Duration = Duration::from_secs(30);

fn timeout() -> Duration {
    std::env::var("GPU_PARQUET_TEST_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(TIMEOUT, Duration::from_secs)
}

const ROWS: usize = 3000;

fn table() -> RecordBatch {
    let ids: Int64Array = (0..ROWS as i64).map(|i| i * 7 - 1000).collect();
    let codes: Int32Array = (0..ROWS as i32).map(|i| i % 37).collect();
    let deltas: Int32Array = (0..ROWS as i32).map(|i| i * 3 + (i % 5)).collect();
    let floats: Float32Array = (0..ROWS).map(|i| (i % 4 != 0).then_some(i as f32 * 0.5)).collect();
    let names: StringArray = (0..ROWS)
        .map(|i| (i % 6 != 0).then(|| format!("name-{}", i % 23)))
        .collect();
    let lists = ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..ROWS).map(|i| (i % 9 != 0).then(|| (0..(i % 4) as i32).map(Some).collect::<Vec<_>>())),
    );
    // Views (short and long strings), 64-bit offsets and a FIXED_LEN_BYTE_ARRAY decimal: the layouts
    // the GPU builds after decoding.
    let views: StringViewArray = (0..ROWS).map(|i| (i % 5 != 0).then(|| "v".repeat(i % 29))).collect();
    let large: LargeStringArray = (0..ROWS)
        .map(|i| (i % 7 != 0).then(|| format!("large-{}", i % 41)))
        .collect();
    // Dictionary-typed, its dictionary past its limit after a few entries: dictionary pages, then plain.
    let category: DictionaryArray<Int32Type> = (0..ROWS)
        .map(|i| (i % 11 != 0).then(|| format!("category-{}", i % 300)))
        .collect::<Vec<_>>()
        .iter()
        .map(Option::as_deref)
        .collect();
    let money = Decimal128Array::from_iter((0..ROWS).map(|i| (i % 8 != 0).then_some(i as i128 * 1_000_000_007 - 5)))
        .with_precision_and_scale(30, 2)
        .expect("decimal");
    // A fixed-size list of fixed-width items (the GPU's padding kernels build it).
    let pairs = FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..ROWS).map(|i| (i % 10 != 3).then(|| vec![Some(i as i32), (i % 3 != 0).then_some(-(i as i32))])),
        2,
    );
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("code", DataType::Int32, false),
        Field::new("delta", DataType::Int32, false),
        Field::new("f", DataType::Float32, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("list", lists.data_type().clone(), true),
        Field::new("view", DataType::Utf8View, true),
        Field::new("large", DataType::LargeUtf8, true),
        Field::new("money", money.data_type().clone(), true),
        Field::new("category", category.data_type().clone(), true),
        Field::new("pairs", pairs.data_type().clone(), true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ids),
        Arc::new(codes),
        Arc::new(deltas),
        Arc::new(floats),
        Arc::new(names),
        Arc::new(lists),
        Arc::new(views),
        Arc::new(large),
        Arc::new(money),
        Arc::new(category),
        Arc::new(pairs),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("batch")
}

/// The undamaged files: 3 row groups of several pages, uncompressed (v1 pages) and Snappy (v2 pages).
fn write_base(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (name, compression, version) in [
        ("plain-v1", Compression::UNCOMPRESSED, WriterVersion::PARQUET_1_0),
        ("snappy-v2", Compression::SNAPPY, WriterVersion::PARQUET_2_0),
    ] {
        let mut props = WriterProperties::builder();
        if version == WriterVersion::PARQUET_2_0 {
            // The fixed-length decimal as DELTA_BYTE_ARRAY (its v1 twin keeps the dictionary).
            props = props
                .set_column_dictionary_enabled(ColumnPath::from("money"), false)
                .set_column_encoding(ColumnPath::from("money"), Encoding::DELTA_BYTE_ARRAY);
        }
        let props = props
            .set_compression(compression)
            .set_writer_version(version)
            .set_max_row_group_row_count(Some(ROWS / 3))
            .set_data_page_row_count_limit(256)
            .set_write_batch_size(128)
            .set_column_dictionary_enabled(ColumnPath::from("id"), false)
            .set_column_dictionary_enabled(ColumnPath::from("delta"), false)
            .set_column_encoding(ColumnPath::from("delta"), Encoding::DELTA_BINARY_PACKED)
            .set_column_dictionary_enabled(ColumnPath::from("f"), false)
            .set_column_encoding(ColumnPath::from("f"), Encoding::BYTE_STREAM_SPLIT)
            .set_column_dictionary_page_size_limit(ColumnPath::from("category"), 512)
            .build();
        let path = dir.join(format!("{name}.parquet"));
        let file = std::fs::File::create(&path).expect("create");
        let batch = table();
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        out.push(path);
    }
    out
}

/// Where the damage is: the whole file, or one column chunk (leaf column path, row group).
#[derive(Debug, Clone)]
enum Scope {
    File,
    Chunk(String, usize),
}

#[derive(Debug)]
struct Case {
    name: String,
    bytes: Vec<u8>,
    scope: Scope,
}

/// A page of the base file: its chunk and its header as the parser read it.
struct PageAt {
    column: String,
    row_group: usize,
    /// File offset of the page header.
    header: usize,
    /// File offset of the page body.
    body: usize,
    info: gpu_parquet::decode::layout::PageInfo,
}

fn pages_of(path: &Path, bytes: &[u8]) -> (ParquetSource, Vec<PageAt>) {
    let source = ParquetSource::open(path).expect("base file opens");
    let mut pages = Vec::new();
    for (g, row) in source.checked_chunks().iter().enumerate() {
        for (c, chunk) in row.iter().enumerate() {
            let start = chunk.offset as usize;
            let chunk_bytes = &bytes[start..start + chunk.len as usize];
            for info in parse_pages(chunk_bytes).expect("base pages parse") {
                pages.push(PageAt {
                    column: source.column_path(c),
                    row_group: g,
                    header: start + info.header_offset as usize,
                    body: start + info.data_offset as usize,
                    info,
                });
            }
        }
    }
    (source, pages)
}

fn footer_start(bytes: &[u8]) -> usize {
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    n - 8 - footer_len
}

/// The file's bytes before the footer, then `meta` written as its footer.
fn with_footer(bytes: &[u8], meta: &ParquetMetaData) -> Vec<u8> {
    let mut out = bytes[..footer_start(bytes)].to_vec();
    ParquetMetaDataWriter::new(&mut out, meta)
        .finish()
        .expect("footer written");
    out
}

fn metadata_of(bytes: &[u8]) -> ParquetMetaData {
    ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::copy_from_slice(bytes))
        .expect("base footer")
}

/// The same metadata with column `col` of row group `g` changed by `f`.
fn lie(
    meta: &ParquetMetaData,
    g: usize,
    col: usize,
    f: impl FnOnce(
        parquet::file::metadata::ColumnChunkMetaDataBuilder,
    ) -> parquet::file::metadata::ColumnChunkMetaDataBuilder,
) -> ParquetMetaData {
    let mut groups: Vec<_> = meta.row_groups().to_vec();
    let mut cols: Vec<_> = groups[g].columns().to_vec();
    cols[col] = f(cols[col].clone().into_builder()).build().expect("column metadata");
    groups[g] = groups[g]
        .clone()
        .into_builder()
        .set_column_metadata(cols)
        .build()
        .expect("row group metadata");
    meta.clone().into_builder().set_row_groups(groups).build()
}

/// Rewrites the zigzag varint of a Thrift compact i32 field at `at` (just after its field header)
/// to `value` when the new encoding has the same length; `None` otherwise.
fn patch_varint(bytes: &[u8], at: usize, value: i32) -> Option<Vec<u8>> {
    let old_len = bytes[at..].iter().position(|b| b & 0x80 == 0)? + 1;
    let mut z = ((value << 1) ^ (value >> 31)) as u32;
    let mut enc = Vec::new();
    loop {
        if z < 0x80 {
            enc.push(z as u8);
            break;
        }
        enc.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    (enc.len() == old_len).then(|| {
        let mut out = bytes.to_vec();
        out[at..at + old_len].copy_from_slice(&enc);
        out
    })
}

fn cases(path: &Path) -> Vec<Case> {
    let bytes = std::fs::read(path).expect("base bytes");
    let (source, pages) = pages_of(path, &bytes);
    let n = bytes.len();
    let footer = footer_start(&bytes);
    let mut out = Vec::new();
    let mut push = |name: String, bytes: Vec<u8>, scope: Scope| out.push(Case { name, bytes, scope });

    // Pages damaged: every page of the middle row group, the first page of each other chunk.
    let sampled: Vec<&PageAt> = pages
        .iter()
        .enumerate()
        .filter(|(k, p)| {
            p.row_group == 1 || *k == 0 || pages[k - 1].column != p.column || pages[k - 1].row_group != p.row_group
        })
        .map(|(_, p)| p)
        .collect();

    // Truncation at every section boundary: after the magic, at the sampled pages' headers and
    // bodies, at the footer, inside the length and the closing magic.
    let mut cuts = vec![4, footer, n - 8, n - 4, n - 1];
    for p in &sampled {
        cuts.extend([p.header, p.body, p.body + p.info.compressed_size as usize / 2]);
    }
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        push(format!("truncated at {cut}"), bytes[..cut].to_vec(), Scope::File);
    }

    // Flipped bytes: every byte of the first three page headers (three masks), then a few bytes of
    // each sampled page's header and body; the footer at 40 places.
    for (k, p) in sampled.iter().enumerate() {
        let (positions, masks): (Vec<usize>, &[u8]) = if k < 3 {
            ((p.header..p.body).collect(), &[0xff, 0x01, 0x80])
        } else {
            (vec![p.header, p.header + 2, p.header + 4, p.body - 1], &[0xff, 0x01])
        };
        let body = [p.body, p.body + p.info.compressed_size.max(1) as usize / 2];
        for (at, masks) in positions
            .into_iter()
            .map(|a| (a, masks))
            .chain(body.map(|a| (a, &[0xffu8][..])))
        {
            for &mask in masks {
                let mut b = bytes.clone();
                b[at] ^= mask;
                push(
                    format!(
                        "byte {at} ^ {mask:#04x} (page at {} of {} rg {})",
                        p.header, p.column, p.row_group
                    ),
                    b,
                    Scope::Chunk(p.column.clone(), p.row_group),
                );
            }
        }
    }
    for at in (footer..n - 8).step_by(((n - 8 - footer) / 40).max(1)) {
        let mut b = bytes.clone();
        b[at] ^= 0xff;
        push(format!("footer byte {at} ^ 0xff"), b, Scope::File);
    }

    // Metadata that lies, written as a new footer.
    let meta = metadata_of(&bytes);
    let chunk = |g: usize, c: usize| source.checked_chunks()[g][c];
    let first = meta.row_group(1).column(0).clone();
    let next = meta.row_group(1).column(1).clone();
    let lies: Vec<(String, ParquetMetaData, Scope)> = vec![
        (
            "chunk offset past the end".into(),
            lie(&meta, 1, 0, |c| {
                c.set_data_page_offset(n as i64 + 100).set_dictionary_page_offset(None)
            }),
            Scope::Chunk("id".into(), 1),
        ),
        (
            "chunk size past the end".into(),
            lie(&meta, 1, 0, |c| c.set_total_compressed_size(n as i64)),
            Scope::Chunk("id".into(), 1),
        ),
        (
            "negative chunk offset".into(),
            lie(&meta, 1, 0, |c| {
                c.set_data_page_offset(-5).set_dictionary_page_offset(None)
            }),
            Scope::Chunk("id".into(), 1),
        ),
        (
            "chunks overlapping".into(),
            lie(&meta, 1, 1, |c| {
                c.set_data_page_offset(first.data_page_offset())
                    .set_dictionary_page_offset(first.dictionary_page_offset())
            }),
            Scope::Chunk("code".into(), 1),
        ),
        (
            "chunk size one byte short".into(),
            lie(&meta, 1, 1, |c| c.set_total_compressed_size(next.compressed_size() - 1)),
            Scope::Chunk("code".into(), 1),
        ),
        (
            "huge num_values".into(),
            lie(&meta, 1, 0, |c| c.set_num_values(1 << 40)),
            Scope::Chunk("id".into(), 1),
        ),
        (
            "huge row count".into(),
            {
                let mut groups: Vec<_> = meta.row_groups().to_vec();
                groups[1] = groups[1]
                    .clone()
                    .into_builder()
                    .set_num_rows(1 << 40)
                    .build()
                    .expect("rg");
                meta.clone().into_builder().set_row_groups(groups).build()
            },
            Scope::File,
        ),
        (
            "row count one short".into(),
            {
                let mut groups: Vec<_> = meta.row_groups().to_vec();
                let rows = groups[2].num_rows();
                groups[2] = groups[2]
                    .clone()
                    .into_builder()
                    .set_num_rows(rows - 1)
                    .build()
                    .expect("rg");
                meta.clone().into_builder().set_row_groups(groups).build()
            },
            Scope::File,
        ),
    ];
    let _ = chunk;
    for (name, m, scope) in lies {
        push(name, with_footer(&bytes, &m), scope);
    }

    // Page contents that lie.
    for p in &sampled {
        let scope = Scope::Chunk(p.column.clone(), p.row_group);
        let i = &p.info;
        // Dictionary-encoded data pages of a required column in v1 start with the indices' bit width.
        let dict_data = (i.page_type == 0 || i.page_type == 3) && i.encoding == Encoding::RLE_DICTIONARY as i32;
        let required = p.column == "code";
        if dict_data && required && i.is_compressed == 1 && i.page_type == 0 && !path_is_snappy(path) {
            for width in [0u8, 1, 33, 64, 65, 200, 255] {
                let mut b = bytes.clone();
                b[p.body] = width;
                push(
                    format!("dictionary index bit width {width} (page at {})", p.header),
                    b,
                    scope.clone(),
                );
            }
        }
        // The header's uncompressed and compressed sizes (fields 2 and 3, each after a 0x15 field
        // header): off by one and by a lot, where the varint keeps its length.
        if bytes[p.header + 2] == 0x15 {
            let at = p.header + 3;
            for v in [
                i.uncompressed_size - 1,
                i.uncompressed_size + 1,
                i.uncompressed_size * 2,
                0,
            ] {
                if let Some(b) = patch_varint(&bytes, at, v) {
                    push(
                        format!(
                            "uncompressed size {v} for {} (page at {})",
                            i.uncompressed_size, p.header
                        ),
                        b,
                        scope.clone(),
                    );
                }
            }
            let len = bytes[at..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
            if bytes[at + len] == 0x15 {
                for v in [i.compressed_size - 1, i.compressed_size + 1, i.compressed_size * 3] {
                    if let Some(b) = patch_varint(&bytes, at + len + 1, v) {
                        push(
                            format!("compressed size {v} for {} (page at {})", i.compressed_size, p.header),
                            b,
                            scope.clone(),
                        );
                    }
                }
            }
        }
    }
    out
}

fn path_is_snappy(path: &Path) -> bool {
    path.to_string_lossy().contains("snappy")
}

/// The decoders this machine has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Decoder {
    /// Host backend, arrow-rs.
    Host,
    /// Host backend, the GPU pipeline on its host references.
    Reference,
    /// The same, its page headers parsed on the host from the file (as a GPU read of a file in the
    /// page cache parses them).
    ReferenceHostHeaders,
    /// The GPU decoder, its chunks read by one of the GPU backends.
    Gpu(GpuBackend),
}

/// The backends that read into device memory.
#[derive(Debug, Clone, Copy, PartialEq)]
enum GpuBackend {
    Staged,
    /// Staged with `O_DIRECT` (aligned reads, partial blocks trimmed).
    StagedDirect,
    /// cuFile (nvidia-fs or its compat mode), where it registers the files.
    Cufile,
}

fn policy_of(backend: GpuBackend) -> IoPolicy {
    IoPolicy {
        direct_io: backend == GpuBackend::StagedDirect,
        ..IoPolicy::default()
    }
}

type Backends = Mutex<Vec<(GpuBackend, Arc<AnyBackend>)>>;
/// The backends [`shared_backend`] built, by kind.
static BACKENDS: OnceLock<Backends> = OnceLock::new();

/// One backend of each GPU kind for the whole suite, shared by every read (and by the suite's
/// threads), as a long-running process would: a damaged file must leave it usable for the next one,
/// and the suite does not pay for pinned buffers and threads on each of its thousands of reads.
fn shared_backend(backend: GpuBackend) -> Result<Arc<AnyBackend>, Error> {
    let mut built = BACKENDS
        .get_or_init(Backends::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some((_, b)) = built.iter().find(|(k, _)| *k == backend) {
        return Ok(b.clone());
    }
    let kind = match backend {
        GpuBackend::Staged | GpuBackend::StagedDirect => BackendKind::Staged,
        GpuBackend::Cufile => BackendKind::Cufile,
    };
    let b = Arc::new(AnyBackend::new(kind, &policy_of(backend), 0)?);
    built.push((backend, b.clone()));
    Ok(b)
}

/// Drops the shared backends (their pinned buffers, streams, cuFile driver), so that a sanitizer's leak
/// check at exit sees only what the reads themselves left behind.
fn drop_shared_backends() {
    if let Some(b) = BACKENDS.get() {
        b.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

fn decode_with(decoder: Decoder, path: &Path) -> Result<RecordBatch, Error> {
    match decoder {
        Decoder::Host => Reader::builder(path)
            .with_backend(BackendKind::Host)
            .build()?
            .read_batches()?
            .concat(),
        Decoder::Reference | Decoder::ReferenceHostHeaders => {
            let source = ParquetSource::open(path)?;
            let plan = ReadPlan::build(
                &source,
                &Projection::All,
                &RowGroupSelection::All,
                PlanOptions::default(),
            )?;
            let reader = Reader::builder(path).with_backend(BackendKind::Host).build()?;
            let fetched = reader.read()?.into_buffer();
            let gpu_parquet::io::select::AnyBuffer::Host(host) = fetched else {
                unreachable!("the host backend reads into host memory");
            };
            let headers = match decoder {
                Decoder::ReferenceHostHeaders => {
                    let file = std::fs::File::open(path).map_err(|e| Error::io(Location::file(path), "open", e))?;
                    Some(
                        parse_step_headers(&file, &plan)
                            .map_err(|e| Error::io(Location::file(path), "page headers", e))?,
                    )
                }
                _ => None,
            };
            let (batch, _, _) = decode_reference_with(
                &source,
                &plan,
                &host.into_bytes(),
                &PageHints::default(),
                headers.as_ref(),
            )?;
            batch.to_host()
        }
        Decoder::Gpu(backend) => Reader::builder(path)
            .with_io(shared_backend(backend)?)
            // The plan aligned as the backend's reads are (O_DIRECT).
            .with_policy(policy_of(backend))
            // `GPU_PARQUET_SNAPPY` chooses the Snappy decoders under test.
            .with_tuning(gpu_parquet::Settings::from_env(&[])?.tuning)
            .build()?
            .read_device()?
            .table
            .to_host(),
    }
}

/// Runs `f` on a thread of its own, failing the test when it takes over [`timeout`] or panics.
fn bounded<T: Send + 'static>(what: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let limit = timeout();
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = t.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no answer in {limit:?} (a hang)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

#[derive(Debug, Default)]
struct Tally {
    cases: usize,
    refused: usize,
    same_as_arrow_rs: usize,
    named_chunk: usize,
    /// What went wrong, one line per case and decoder.
    defects: Vec<String>,
}

fn run_suite(decoders: &[Decoder]) -> Tally {
    let dir = tempfile::tempdir().expect("tempdir");
    // One thread per base file.
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = write_base(dir.path())
            .into_iter()
            .map(|base| {
                let dir = dir.path();
                s.spawn(move || run_file(&base, dir, decoders))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("suite thread")).collect()
    });
    let mut tally = Tally::default();
    for t in tallies {
        tally.cases += t.cases;
        tally.refused += t.refused;
        tally.same_as_arrow_rs += t.same_as_arrow_rs;
        tally.named_chunk += t.named_chunk;
        tally.defects.extend(t.defects);
    }
    tally
}

fn run_file(base: &Path, dir: &Path, decoders: &[Decoder]) -> Tally {
    let mut tally = Tally::default();
    let want = common::arrow_rs_read(base).expect("arrow-rs reads the base file");
    for d in decoders {
        let got = decode_with(*d, base).unwrap_or_else(|e| panic!("{d:?} on the undamaged {}: {e}", base.display()));
        assert_eq!(got, want, "{d:?} on the undamaged {}", base.display());
    }
    let stem = base.file_stem().expect("name").to_string_lossy().to_string();
    let (shard, shards) = shard();
    for (k, case) in cases(base).into_iter().enumerate().filter(|(k, _)| k % shards == shard) {
        let path = dir.join(format!("{stem}-case-{k}.parquet"));
        std::fs::write(&path, &case.bytes).expect("write case");
        let theirs = common::arrow_rs_read(&path);
        for &d in decoders {
            let what = format!("{d:?} on {} ({}, {})", case.name, base.display(), path.display());
            let p = path.clone();
            let ours = bounded(what.clone(), move || decode_with(d, &p));
            tally.cases += 1;
            match ours {
                Err(e) => {
                    tally.refused += 1;
                    let msg = e.to_string();
                    if matches!(e, Error::DecoderPanic { .. }) && d != Decoder::Host {
                        tally.defects.push(format!("{what}: our decoder panicked: {msg}"));
                    }
                    if !msg.contains(&path.display().to_string()) {
                        tally
                            .defects
                            .push(format!("{what}: the error does not name the file: {msg}"));
                    }
                    if let Scope::Chunk(column, g) = &case.scope
                        && msg.contains(&format!("column '{column}'"))
                        && msg.contains(&format!("row group {g}"))
                    {
                        tally.named_chunk += 1;
                    }
                }
                Ok(batch) => match &theirs {
                    Ok(t) if &batch == t => tally.same_as_arrow_rs += 1,
                    Ok(_) => tally
                        .defects
                        .push(format!("{what}: decoded, but not as arrow-rs reads the same bytes")),
                    Err(e) => tally
                        .defects
                        .push(format!("{what}: decoded a file arrow-rs refuses ({e})")),
                },
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    tally
}

/// `GPU_PARQUET_TEST_SHARD=K/N` runs the cases whose number is K modulo N (default 0/1: all): under
/// compute-sanitizer the GPU suite outlasts one call on the GPU machine, so it runs in shards.
fn shard() -> (usize, usize) {
    let Ok(v) = std::env::var("GPU_PARQUET_TEST_SHARD") else {
        return (0, 1);
    };
    let parsed = v
        .split_once('/')
        .and_then(|(k, n)| Some((k.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
    match parsed {
        Some((k, n)) if n > 0 && k < n => (k, n),
        _ => panic!("GPU_PARQUET_TEST_SHARD={v}: want K/N with K < N"),
    }
}

/// `GPU_PARQUET_TEST_BACKENDS=staged,direct,cufile` (default all three) chooses the backends the GPU
/// suite reads through: the kernels are the same behind each, so a sanitizer run may take one.
fn gpu_backends() -> Vec<GpuBackend> {
    let Ok(v) = std::env::var("GPU_PARQUET_TEST_BACKENDS") else {
        return vec![GpuBackend::Staged, GpuBackend::StagedDirect, GpuBackend::Cufile];
    };
    v.split(',')
        .map(|name| match name.trim() {
            "staged" => GpuBackend::Staged,
            "direct" => GpuBackend::StagedDirect,
            "cufile" => GpuBackend::Cufile,
            other => panic!("GPU_PARQUET_TEST_BACKENDS: unknown backend {other:?} (staged, direct, cufile)"),
        })
        .collect()
}

fn assert_no_defects(tally: &Tally) {
    assert!(
        tally.defects.is_empty(),
        "{} defects:\n{}",
        tally.defects.len(),
        tally.defects.join("\n")
    );
}

#[test]
fn damaged_files_give_clear_errors_or_arrow_rs_tables_on_the_host_decoders() {
    let tally = run_suite(&[Decoder::Host, Decoder::Reference, Decoder::ReferenceHostHeaders]);
    println!("{tally:#?}");
    assert_no_defects(&tally);
    assert!(tally.cases > 1500 / shard().1, "{tally:?}");
    assert!(
        tally.refused > tally.cases / 4,
        "most damage must be noticed: {tally:?}"
    );
    assert!(
        tally.named_chunk > 100 / shard().1,
        "chunk damage names its chunk: {tally:?}"
    );
}

#[test]
fn damaged_files_give_clear_errors_or_arrow_rs_tables_on_the_gpu() {
    if !common::gpu_decoder_available() {
        return;
    }
    let wanted = gpu_backends();
    let mut decoders: Vec<Decoder> = [GpuBackend::Staged, GpuBackend::StagedDirect]
        .into_iter()
        .filter(|b| wanted.contains(b))
        .map(Decoder::Gpu)
        .collect();
    // cuFile joins where it reads an undamaged file (it refuses to register files on machines
    // without nvidia-fs or the udev data its compat mode needs).
    if wanted.contains(&GpuBackend::Cufile) {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = write_base(dir.path()).remove(0);
        match decode_with(Decoder::Gpu(GpuBackend::Cufile), &base) {
            Ok(_) => decoders.push(Decoder::Gpu(GpuBackend::Cufile)),
            Err(e) => println!("skipped for cuFile: it does not read here ({e})"),
        }
    }
    println!("GPU decoder over {decoders:?}");
    let tally = run_suite(&decoders);
    drop_shared_backends();
    println!("{tally:#?}");
    assert_no_defects(&tally);
    assert!(tally.refused > tally.cases / 4, "{tally:?}");
}

/// A file rewritten in place, grown or truncated between opening and reading is refused by name:
/// what was read may mix two versions of the file.
#[test]
fn a_file_changed_during_the_read_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_base(dir.path()).remove(0);
    let original = std::fs::read(&base).expect("bytes");
    type Change = fn(&Path, &[u8]);
    let changes: [(&str, Change); 3] = [
        ("rewritten in place, same size", |p, b| {
            let mut b = b.to_vec();
            b[100] ^= 1;
            std::fs::write(p, &b).expect("rewrite");
            // Make the change visible even where timestamps are coarse.
            let f = std::fs::File::options().write(true).open(p).expect("open");
            f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
                .expect("mtime");
        }),
        ("grown", |p, b| {
            let mut b = b.to_vec();
            b.extend_from_slice(&[0; 100]);
            std::fs::write(p, &b).expect("grow");
        }),
        ("truncated after its chunks", |p, b| {
            let f = std::fs::File::options().write(true).open(p).expect("open");
            f.set_len(b.len() as u64 - 4).expect("truncate");
        }),
    ];
    for (what, change) in changes {
        std::fs::write(&base, &original).expect("restore");
        let reader = Reader::builder(&base)
            .with_backend(BackendKind::Host)
            .build()
            .expect("opens");
        change(&base, &original);
        match reader.read() {
            Err(Error::FileChanged { location, message }) => {
                assert_eq!(location.file, base, "{what}");
                assert!(message.contains("changed"), "{what}: {message}");
            }
            Err(e) => panic!("{what}: another error: {e}"),
            Ok(_) => panic!("{what}: the read succeeded"),
        }
        // A fresh reader of the file as it now is reads it (or refuses it for what it is).
        std::fs::write(&base, &original).expect("restore");
        assert!(
            Reader::builder(&base)
                .with_backend(BackendKind::Host)
                .build()
                .expect("opens")
                .read()
                .is_ok(),
            "{what}"
        );
    }
}
