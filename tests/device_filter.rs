//! The GPU row filter (`decode::row_filter`, `kernels/row_filter.cu`) on a GPU: batches uploaded to
//! the device, filtered there by random predicates, compacted or masked; the host copy must equal
//! arrow-rs's `cmp`/`boolean` kernels followed by `filter_record_batch`, and the host references'
//! result, value for value (types and null counts too). A bad offset buffer is an error naming the
//! column and row, never an access outside the buffers (run under compute-sanitizer on the GPU
//! machine).
//!
//! On a machine without a CUDA driver (or without NVRTC) every test prints "skipped: <reason>" and
//! returns. Run from the crate root, `--test-threads=1`.

mod common;

use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::kernels::{boolean, cmp};
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema};
use arrow::record_batch::RecordBatch;
use gpu_parquet::Location;
use gpu_parquet::decode::gpu::{DecoderOptions, GpuDecoder};
use gpu_parquet::decode::row_filter::{CmpOp, FilterMode, Filtered, RowPredicate, Scalar, filter_record_batch};
use gpu_parquet::decode::table::{DecodedWhere, DeviceArray, DeviceBatch, DeviceColumn, upload_array};
use gpu_parquet::filter::FilterPasses;
use gpu_parquet::gpu::nvrtc::nvrtc_present;
use gpu_parquet::gpu::{DeviceBuffer, GpuContext, Stream};
use gpu_parquet::{Settings, arrow};

fn gpu() -> Option<(Arc<GpuContext>, GpuDecoder)> {
    if let Err(why) = nvrtc_present() {
        common::skip(&why);
        return None;
    }
    if let Err(why) = gpu_parquet::gpu::cuda_present() {
        common::skip(&format!("no CUDA driver ({why})"));
        return None;
    }
    // With a driver present, a context or kernels that cannot be had are failures, not skips.
    let ctx = GpuContext::new(0).unwrap_or_else(|e| panic!("GPU 0: {e}"));
    let options: DecoderOptions = Settings::from_env(&[]).expect("settings").decoder_options();
    let decoder = GpuDecoder::new(&ctx, &options).unwrap_or_else(|e| panic!("kernels: {e}"));
    Some((ctx, decoder))
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const WORDS: [&str; 6] = [
    "",
    "a",
    "abc",
    "b",
    "a string longer than twelve",
    "a string longer than twelve!",
];

/// A batch of `n` rows: integers, floats with NaN, strings of three layouts, binaries, booleans,
/// decimals, a dictionary, a struct and a list, about a fifth of each null.
fn batch(rng: &mut Rng, n: usize) -> RecordBatch {
    let mut valid = || -> Vec<bool> { (0..n).map(|_| !rng.chance(20)).collect() };
    let (v1, v2, v3, v4, v5, v6, v7, v8, v9, v10) = (
        valid(),
        valid(),
        valid(),
        valid(),
        valid(),
        valid(),
        valid(),
        valid(),
        valid(),
        valid(),
    );
    let mut r = Rng(rng.next() | 1);
    let ints: Vec<i64> = (0..n).map(|_| r.below(11) as i64 - 5).collect();
    let word = |i: usize| WORDS[(ints[i].unsigned_abs() as usize) % WORDS.len()];
    let pick = |v: &[bool], i: usize| v[i];
    let i32s: Int32Array = (0..n).map(|i| pick(&v1, i).then_some(ints[i] as i32)).collect();
    let f64s: Float64Array = (0..n)
        .map(|i| pick(&v2, i).then_some(if ints[i] == 5 { f64::NAN } else { ints[i] as f64 * 0.5 }))
        .collect();
    let utf8: StringArray = (0..n).map(|i| pick(&v3, i).then_some(word(i))).collect();
    let large: LargeBinaryArray = (0..n).map(|i| pick(&v4, i).then_some(word(i).as_bytes())).collect();
    let views: StringViewArray = (0..n).map(|i| pick(&v5, i).then_some(word(i))).collect();
    let bools: BooleanArray = (0..n).map(|i| pick(&v6, i).then_some(ints[i] > 0)).collect();
    let decimals = (0..n)
        .map(|i| pick(&v7, i).then_some(ints[i] as i128 * (1 << 80)))
        .collect::<Decimal128Array>()
        .with_precision_and_scale(38, 2)
        .expect("decimal");
    let dict: DictionaryArray<Int32Type> = (0..n).map(|i| pick(&v8, i).then_some(word(i))).collect();
    let fields = Fields::from(vec![Field::new("x", DataType::Int32, true)]);
    let strukt = StructArray::new(
        fields,
        vec![Arc::new(i32s.clone()) as ArrayRef],
        Some(NullBuffer::from(v9.clone())),
    );
    let lens: Vec<usize> = (0..n).map(|i| (ints[i].unsigned_abs() % 3) as usize).collect();
    let items: Int32Array = (0..lens.iter().sum::<usize>()).map(|k| Some(k as i32 % 7)).collect();
    let list = ListArray::new(
        Arc::new(Field::new("item", DataType::Int32, true)),
        OffsetBuffer::<i32>::from_lengths(lens),
        Arc::new(items),
        Some(NullBuffer::from(v10)),
    );
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(i32s),
        Arc::new(f64s),
        Arc::new(utf8),
        Arc::new(large),
        Arc::new(views),
        Arc::new(bools),
        Arc::new(decimals),
        Arc::new(dict),
        Arc::new(strukt),
        Arc::new(list),
    ];
    let schema = Schema::new(
        arrays
            .iter()
            .enumerate()
            .map(|(k, a)| Field::new(format!("c{k}"), a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(Arc::new(schema), arrays).expect("batch")
}

fn upload(stream: &Stream, b: &RecordBatch) -> DeviceBatch {
    let columns = b
        .columns()
        .iter()
        .enumerate()
        .map(|(k, a)| DeviceColumn {
            name: format!("c{k}"),
            array: upload_array(&a.to_data(), &mut |bytes: &[u8]| DeviceBuffer::from_host(stream, bytes))
                .expect("upload"),
            decoded: DecodedWhere::Gpu,
        })
        .collect();
    DeviceBatch {
        schema: b.schema(),
        num_rows: b.num_rows(),
        columns,
        row_groups: vec![0],
        location: Location::file("device_filter.parquet"),
    }
}

/// Predicates over [`batch`]'s columns, and arrow-rs's results.
fn predicates() -> Vec<RowPredicate> {
    let cmp = RowPredicate::compare;
    vec![
        cmp(0, CmpOp::Gt, Scalar::Int32(0)),
        cmp(1, CmpOp::LtEq, Scalar::Float64(f64::NAN)).and(cmp(1, CmpOp::NotEq, Scalar::Float64(0.5))),
        cmp(2, CmpOp::GtEq, Scalar::Bytes(b"abc".to_vec())).or(RowPredicate::IsNull(3)),
        cmp(4, CmpOp::Eq, Scalar::Bytes(b"a string longer than twelve".to_vec())).not(),
        RowPredicate::in_list(7, vec![Scalar::Bytes(b"b".to_vec()), Scalar::Bytes(Vec::new())]),
        cmp(5, CmpOp::Eq, Scalar::Boolean(true)).and(cmp(6, CmpOp::Lt, Scalar::Int128(0))),
        RowPredicate::IsNotNull(8).and(RowPredicate::IsNull(9).not()),
        cmp(3, CmpOp::Lt, Scalar::Bytes(b"b".to_vec())),
    ]
}

fn arrow_mask(b: &RecordBatch, p: &RowPredicate) -> BooleanArray {
    let lit = |v: &Scalar, t: &DataType| -> ArrayRef {
        match (v, t) {
            (Scalar::Int32(x), _) => Arc::new(Int32Array::from(vec![*x])),
            (Scalar::Float64(x), _) => Arc::new(Float64Array::from(vec![*x])),
            (Scalar::Boolean(x), _) => Arc::new(BooleanArray::from(vec![*x])),
            (Scalar::Int128(x), DataType::Decimal128(p, s)) => Arc::new(
                Decimal128Array::from(vec![*x])
                    .with_precision_and_scale(*p, *s)
                    .expect("decimal"),
            ),
            (Scalar::Bytes(x), DataType::LargeBinary) => Arc::new(LargeBinaryArray::from(vec![x.as_slice()])),
            (Scalar::Bytes(x), DataType::Utf8View) => {
                Arc::new(StringViewArray::from(vec![std::str::from_utf8(x).expect("utf8")]))
            }
            (Scalar::Bytes(x), _) => Arc::new(StringArray::from(vec![std::str::from_utf8(x).expect("utf8")])),
            other => panic!("no literal for {other:?}"),
        }
    };
    match p {
        RowPredicate::Compare { column, op, value, .. } => {
            let c = b.column(*column);
            let t = match c.data_type() {
                DataType::Dictionary(_, v) => v.as_ref().clone(),
                t => t.clone(),
            };
            let s = arrow::array::Scalar::new(lit(value, &t));
            match op {
                CmpOp::Eq => cmp::eq(c, &s),
                CmpOp::NotEq => cmp::neq(c, &s),
                CmpOp::Lt => cmp::lt(c, &s),
                CmpOp::LtEq => cmp::lt_eq(c, &s),
                CmpOp::Gt => cmp::gt(c, &s),
                CmpOp::GtEq => cmp::gt_eq(c, &s),
            }
            .expect("cmp")
        }
        RowPredicate::InList { column, values, .. } => {
            let none = BooleanArray::new(
                arrow::buffer::BooleanBuffer::new_unset(b.num_rows()),
                b.column(*column).logical_nulls(),
            );
            values.iter().fold(none, |acc, v| {
                let one = arrow_mask(b, &RowPredicate::compare(*column, CmpOp::Eq, v.clone()));
                boolean::or_kleene(&acc, &one).expect("or")
            })
        }
        RowPredicate::IsNull(c) => arrow::compute::is_null(b.column(*c)).expect("is_null"),
        RowPredicate::IsNotNull(c) => arrow::compute::is_not_null(b.column(*c)).expect("is_not_null"),
        RowPredicate::And(x, y) => boolean::and_kleene(&arrow_mask(b, x), &arrow_mask(b, y)).expect("and"),
        RowPredicate::Or(x, y) => boolean::or_kleene(&arrow_mask(b, x), &arrow_mask(b, y)).expect("or"),
        RowPredicate::Not(x) => boolean::not(&arrow_mask(b, x)).expect("not"),
    }
}

fn nulls_false(m: &BooleanArray) -> BooleanArray {
    if m.nulls().is_some() {
        arrow::compute::prep_null_mask_filter(m)
    } else {
        m.clone()
    }
}

#[test]
fn gpu_filter_equals_arrow_and_the_references() {
    let Some((ctx, decoder)) = gpu() else { return };
    let stream = Stream::new(&ctx).expect("stream");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for n in [0usize, 1, 100, 4097, 70_000] {
        let host = batch(&mut rng, n);
        for p in predicates() {
            let mask = arrow_mask(&host, &p);
            let want = arrow::compute::filter_record_batch(&host, &mask).expect("arrow filter");
            let (reference, _) = filter_record_batch(&host, &p, FilterMode::Compact).expect("reference");
            assert_eq!(reference.as_ref(), Some(&want), "references, {n} rows, {p:?}");
            let got = upload(&stream, &host)
                .filter(&p, &decoder, FilterMode::Compact)
                .unwrap_or_else(|e| panic!("{n} rows, {p:?}: {e}"));
            let Filtered::Rows(rows) = got else {
                panic!("rows asked for")
            };
            let got = rows.to_host().expect("host copy");
            assert_eq!(got.num_rows(), want.num_rows(), "{n} rows, {p:?}");
            for (k, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
                assert_eq!(g.data_type(), w.data_type(), "column {k}");
                assert_eq!(g.null_count(), w.null_count(), "column {k} nulls, {n} rows, {p:?}");
                assert_eq!(g.as_ref(), w.as_ref(), "column {k}, {n} rows, {p:?}");
            }
            let masked = upload(&stream, &host)
                .filter(&p, &decoder, FilterMode::Mask)
                .unwrap_or_else(|e| panic!("{n} rows, {p:?}: {e}"));
            let Filtered::Mask { mask: m, selected, .. } = masked else {
                panic!("a mask asked for")
            };
            assert_eq!(selected, want.num_rows());
            // The mask compacts a batch of the same rows (the payload of a two-pass scan).
            let compacted = upload(&stream, &host)
                .compact(&m, &decoder)
                .unwrap_or_else(|e| panic!("{n} rows, {p:?}: {e}"));
            assert_eq!(compacted.to_host().expect("host copy"), want, "compacted by the mask");
            let m = m.to_host().expect("host copy");
            assert_eq!(m.as_boolean(), &nulls_false(&mask), "mask, {n} rows, {p:?}");
        }
    }
}

#[test]
fn gpu_filter_names_a_bad_offset_buffer() {
    let Some((ctx, decoder)) = gpu() else { return };
    let stream = Stream::new(&ctx).expect("stream");
    // Offsets past the characters from row 2 on; the filter must say so, reading nothing outside.
    let offsets: Vec<u8> = [0i32, 1, 2, 90, 91, 92].iter().flat_map(|x| x.to_le_bytes()).collect();
    let array = DeviceArray {
        data_type: DataType::Utf8,
        len: 5,
        null_count: 0,
        validity: None,
        buffers: vec![
            DeviceBuffer::from_host(&stream, &offsets).expect("upload"),
            DeviceBuffer::from_host(&stream, b"aaaaa").expect("upload"),
        ],
        children: Vec::new(),
    };
    let batch = DeviceBatch {
        schema: Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)])),
        num_rows: 5,
        columns: vec![DeviceColumn {
            name: "s".into(),
            array,
            decoded: DecodedWhere::Gpu,
        }],
        row_groups: vec![0],
        location: Location::file("device_filter.parquet"),
    };
    let p = RowPredicate::compare(0, CmpOp::Eq, Scalar::Bytes(b"a".to_vec()));
    let e = batch.filter(&p, &decoder, FilterMode::Compact).unwrap_err().to_string();
    assert!(e.contains("'s'") && e.contains("row 2"), "{e}");
}

/// The same batches and predicates through the host references (here, without a GPU): the oracle of
/// the GPU test is checked wherever CI runs.
#[test]
fn host_references_equal_arrow_on_the_same_batches() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for n in [0usize, 1, 100, 4097, 70_000] {
        let host = batch(&mut rng, n);
        for p in predicates() {
            let mask = arrow_mask(&host, &p);
            let want = arrow::compute::filter_record_batch(&host, &mask).expect("arrow filter");
            let (got, _) = filter_record_batch(&host, &p, FilterMode::Compact).expect("reference");
            assert_eq!(got.as_ref(), Some(&want), "{n} rows, {p:?}");
            let device_like = DeviceBatch::<Vec<u8>> {
                schema: host.schema(),
                num_rows: n,
                columns: host
                    .columns()
                    .iter()
                    .enumerate()
                    .map(|(k, a)| DeviceColumn {
                        name: format!("c{k}"),
                        array: upload_array(&a.to_data(), &mut |b: &[u8]| Ok(b.to_vec())).expect("upload"),
                        decoded: DecodedWhere::Gpu,
                    })
                    .collect(),
                row_groups: vec![0],
                location: Location::file("device_filter.parquet"),
            };
            let Filtered::Rows(rows) = device_like.filter_host(&p, FilterMode::Compact).expect("filter") else {
                panic!("rows asked for")
            };
            assert_eq!(rows.to_host().expect("host copy"), want, "{n} rows, {p:?}");
        }
    }
}

/// [`batch`] written as a Parquet file of a few row groups (dictionary-encoded where arrow-rs does,
/// its Arrow schema embedded, so the views, dictionary and decimal types come back).
fn write_file(dir: &std::path::Path, host: &RecordBatch) -> std::path::PathBuf {
    let path = dir.join("filter.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(8_000))
        .build();
    let file = std::fs::File::create(&path).expect("create");
    let mut w = parquet::arrow::ArrowWriter::try_new(file, host.schema(), Some(props)).expect("writer");
    w.write(host).expect("write");
    w.close().expect("close");
    path
}

/// Batches as the decode pipeline assembles them (the host references' decode of a written file),
/// filtered through the references: equal to arrow-rs's filter of the same decoded batch.
#[test]
fn pipeline_batches_filter_as_arrow_does() {
    use gpu_parquet::decode::gpu::decode_reference;
    use gpu_parquet::{ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
    let dir = tempfile::tempdir().expect("dir");
    let host = batch(&mut Rng(77), 20_000);
    let path = write_file(dir.path(), &host);
    let source = ParquetSource::open(&path).expect("open");
    let plan = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .expect("plan");
    let fetched = common::host_fetch(&source, &plan, 2).buffer;
    for p in predicates() {
        let (decoded, _) = decode_reference(&source, &plan, &fetched).expect("decode");
        assert!(decoded.columns.iter().all(|c| c.decoded == DecodedWhere::Gpu));
        let whole = decoded.to_host().expect("host copy");
        let want = arrow::compute::filter_record_batch(&whole, &arrow_mask(&whole, &p)).expect("filter");
        let Filtered::Rows(rows) = decoded.filter_host(&p, FilterMode::Compact).expect("filter") else {
            panic!("rows asked for")
        };
        assert_eq!(rows.to_host().expect("host copy"), want, "{p:?}");
    }
}

/// A file read onto the GPU by the reader, each step's batch filtered there: equal to arrow-rs's filter
/// of the batch's host copy.
#[test]
fn gpu_filter_of_batches_read_by_the_reader() {
    let Some((_ctx, decoder)) = gpu() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let host = batch(&mut Rng(78), 70_000);
    let path = write_file(dir.path(), &host);
    let options: DecoderOptions = Settings::from_env(&[]).expect("settings").decoder_options();
    for p in predicates() {
        let read = gpu_parquet::Reader::builder(&path)
            .with_backend(gpu_parquet::BackendKind::Auto)
            .with_decoder_options(options.clone())
            .build()
            .expect("reader")
            .read_device()
            .expect("read");
        for (k, b) in read.table.batches.into_iter().enumerate() {
            let whole = b.to_host().expect("host copy");
            let want = arrow::compute::filter_record_batch(&whole, &arrow_mask(&whole, &p)).expect("filter");
            let Filtered::Rows(rows) = b
                .filter(&p, &decoder, FilterMode::Compact)
                .unwrap_or_else(|e| panic!("step {k}, {p:?}: {e}"))
            else {
                panic!("rows asked for")
            };
            assert_eq!(rows.to_host().expect("host copy"), want, "step {k}, {p:?}");
        }
    }
}

/// arrow-rs's read of `columns` of the file, filtered exactly by `filter` (`Predicate::filter` over
/// the whole file's columns, then the projection).
fn arrow_rs_filtered(path: &std::path::Path, filter: &gpu_parquet::filter::Expr, columns: &[String]) -> RecordBatch {
    let file = std::fs::File::open(path).expect("open");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("arrow-rs")
        .build()
        .expect("arrow-rs reader");
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    let all = arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("concat");
    let p = filter.bind(&all.schema(), &Location::default()).expect("bind");
    let kept = p.filter(&all).expect("exact filter");
    // In the file's order, as the reader gives them.
    let mut keep: Vec<usize> = columns
        .iter()
        .map(|c| kept.schema().index_of(c).expect("column"))
        .collect();
    keep.sort_unstable();
    kept.project(&keep).expect("project")
}

/// Filters over [`batch`]'s columns for a reader.
const READER_FILTERS: [&str; 7] = [
    "c1 >= 0 and c2 != 'abc'",
    // -0 equals 0 (not so in arrow-rs's total order); NaN matches only `!=`.
    "c1 = -0 or c6 between -1 and 1",
    "c1 != 2 and not (c1 < 1.5) and c7 in ('a', 'b', 'abc')",
    "c2 not in ('a', 'b') or c1 is null",
    "c4 >= 'b' and c5",
    "c3 = 'abc' or c0 is null",
    "c0 > -10",
];

/// Projections of [`batch`]'s columns: struct and list payload with the filter's columns added, and
/// all.
fn projections() -> [Vec<String>; 2] {
    [
        vec!["c8".into(), "c9".into(), "c2".into()],
        (0..10).map(|k| format!("c{k}")).collect(),
    ]
}

/// The same filters read on the host (the reader's exact filter after arrow-rs's decode): the
/// reference of the GPU test below, checked where there is no GPU too.
#[test]
fn a_filtered_host_read_equals_arrow_rs_filtered_exactly() {
    use gpu_parquet::filter::Expr;
    let dir = tempfile::tempdir().expect("dir");
    let path = write_file(dir.path(), &batch(&mut Rng(79), 20_000));
    for text in READER_FILTERS {
        let e = Expr::parse(text).expect("parse");
        for columns in projections() {
            let want = arrow_rs_filtered(&path, &e, &columns);
            let got = gpu_parquet::Reader::builder(&path)
                .with_backend(gpu_parquet::BackendKind::Host)
                .with_columns(columns.clone())
                .with_filter(e.clone())
                .build()
                .expect("reader")
                .read_batches()
                .expect("read")
                .concat()
                .expect("concat");
            assert_eq!(got, want, "{text}, {columns:?}");
            assert!(want.num_rows() > 0, "{text} keeps rows");
        }
    }
}

/// `with_filter` and a GPU decode: the reader's device batches are filtered on the GPU (compacted, or
/// masked), the filter's own columns dropped, and equal arrow-rs's read filtered exactly (floats as
/// IEEE 754 and pyarrow compare them).
#[test]
fn a_filtered_gpu_read_equals_arrow_rs_filtered_exactly() {
    use gpu_parquet::filter::Expr;
    use gpu_parquet::{Decode, StepOutput};
    let Some((_ctx, _decoder)) = gpu() else { return };
    let dir = tempfile::tempdir().expect("dir");
    // Struct and list columns among the payload; floats with NaN; views, a dictionary, decimals.
    let path = write_file(dir.path(), &batch(&mut Rng(79), 70_000));
    let options: DecoderOptions = Settings::from_env(&[]).expect("settings").decoder_options();
    for text in READER_FILTERS {
        let e = Expr::parse(text).expect("parse");
        for columns in projections() {
            let want = arrow_rs_filtered(&path, &e, &columns);
            // Compacted in two passes (the filter's columns first) and in one; masked (one pass).
            for (mode, passes) in [
                (FilterMode::Compact, FilterPasses::Two),
                (FilterMode::Compact, FilterPasses::One),
                (FilterMode::Mask, FilterPasses::Two),
            ] {
                let reader = gpu_parquet::Reader::builder(&path)
                    .with_backend(gpu_parquet::BackendKind::Auto)
                    .with_decoder_options(options.clone())
                    .with_decode(Decode::Gpu)
                    .with_columns(columns.clone())
                    .with_filter(e.clone())
                    .with_filter_mode(mode)
                    .with_filter_passes(passes)
                    .build()
                    .expect("reader");
                let read = reader.read_device().unwrap_or_else(|err| panic!("{text}: {err}"));
                let report = read.decode.filter.as_ref().expect("a filter report");
                assert_eq!(report.on, "gpu", "{text}: {:?}", report.reason);
                // Two passes wherever a step's row groups are not all accepted by the statistics.
                let pruning = reader.pruning().expect("pruning");
                let evaluated = pruning.row_groups_all_accepted < pruning.row_groups_selected;
                assert_eq!(
                    report.passes.is_some(),
                    mode == FilterMode::Compact && passes == FilterPasses::Two && evaluated,
                    "{text}, {columns:?}, {mode:?}, {passes:?}"
                );
                assert_eq!(report.rows_kept, want.num_rows() as u64, "{text}");
                assert!(!read.filtered_on_host());
                assert_eq!(
                    read.masks.len(),
                    if mode == FilterMode::Mask {
                        read.table.batches.len()
                    } else {
                        0
                    }
                );
                let got = read.to_host().expect("host copy");
                assert_eq!(got.schema(), want.schema(), "{text}, {columns:?}");
                assert_eq!(got, want, "{text}, {columns:?}, {mode:?}, {passes:?}");
                if mode == FilterMode::Compact {
                    assert_eq!(read.table.num_rows(), want.num_rows(), "{text}");
                }
                // The streamed scan yields the same rows, step by step.
                let mut steps = Vec::new();
                for step in reader.scan().expect("scan") {
                    let StepOutput::Device(d) = step.expect("step") else {
                        panic!("device steps")
                    };
                    steps.push(d.to_host().expect("host copy"));
                }
                if !steps.is_empty() {
                    let streamed = arrow::compute::concat_batches(&steps[0].schema(), &steps).expect("concat");
                    assert_eq!(streamed, want, "scan of {text}, {columns:?}, {mode:?}, {passes:?}");
                }
            }
        }
    }
}

/// A filtered GPU read of a file of small pages with page indexes (issue 43, page-level I/O): it
/// fetches the dictionary pages and the data pages holding the surviving rows, fewer bytes than
/// the row groups' chunks, reports them as the host read does, and equals arrow-rs's read filtered
/// exactly; the same filter read on the host fetches the same pieces.
#[test]
fn a_filtered_gpu_read_fetches_only_the_surviving_pages() {
    use gpu_parquet::Decode;
    use gpu_parquet::filter::Expr;
    let Some((_ctx, _decoder)) = gpu() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("pages.parquet");
    let n = 40_000usize;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..n as i64)),
        Arc::new(StringArray::from_iter(
            (0..n).map(|i| (i % 11 != 3).then(|| format!("n{:03}", i % 37))),
        )),
        Arc::new(Float64Array::from_iter(
            (0..n).map(|i| (i % 7 != 0).then_some(i as f64 / 4.0)),
        )),
    ];
    let host = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    // `id` and `score` plain: dictionary-encoded, their 10,000 distinct values per row group put
    // most of each chunk in its dictionary page, which a page-level read fetches whole (on the
    // H200: 150,896 of the row group's 189,271 bytes for one page of rows). `name` keeps its
    // dictionary.
    let plain = |c: &str| parquet::schema::types::ColumnPath::from(c);
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(500)
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Page)
        .set_column_dictionary_enabled(plain("id"), false)
        .set_column_dictionary_enabled(plain("score"), false)
        .build();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path).expect("create"), schema, Some(props))
            .expect("writer");
    w.write(&host).expect("write");
    w.close().expect("close");
    let options: DecoderOptions = Settings::from_env(&[]).expect("settings").decoder_options();
    for text in [
        "id >= 12345 and id < 12400",
        "(id >= 100 and id < 900) or (id >= 31000 and id < 31001) or name = 'n005' and id < 3000",
    ] {
        let e = Expr::parse(text).expect("parse");
        let all: Vec<String> = vec!["id".into(), "name".into(), "score".into()];
        let want = arrow_rs_filtered(&path, &e, &all);
        let reader = gpu_parquet::Reader::builder(&path)
            .with_backend(gpu_parquet::BackendKind::Auto)
            .with_decoder_options(options.clone())
            .with_decode(Decode::Gpu)
            .with_filter(e.clone())
            .build()
            .expect("reader");
        let whole: u64 = reader
            .plan()
            .row_groups
            .iter()
            .map(|&g| reader.source().checked_chunks()[g].iter().map(|c| c.len).sum::<u64>())
            .sum();
        let read = reader.read_device().unwrap_or_else(|err| panic!("{text}: {err}"));
        // The pages' bytes: an O_DIRECT read of the staged backend pads each piece to 4 KiB blocks,
        // which counts as overhead (of pages of 4 KiB here, as much again).
        let fetched = read.io.useful_bytes;
        assert!(
            fetched < whole / 2,
            "{text}: {fetched} bytes of pages fetched ({} read in all) of the chunks' {whole}",
            read.io.total.total_bytes()
        );
        let page_io = reader.pruning().and_then(|p| p.page_io.as_ref()).expect("page_io");
        assert_eq!(
            page_io.columns.iter().map(|c| c.bytes_fetched).sum::<u64>(),
            reader.plan().useful_bytes(),
            "{text}"
        );
        assert_eq!(read.to_host().expect("host copy"), want, "{text}");
        let on_host = gpu_parquet::Reader::builder(&path)
            .with_backend(gpu_parquet::BackendKind::Host)
            .with_filter(e)
            .build()
            .expect("reader");
        let pieces = |r: &gpu_parquet::Reader| -> Vec<(u64, u64)> {
            r.plan().chunks.iter().map(|c| (c.offset, c.len)).collect()
        };
        assert_eq!(pieces(&on_host), pieces(&reader), "{text}: the same pieces");
    }
}
