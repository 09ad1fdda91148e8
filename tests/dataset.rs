//! Datasets (`gpu_parquet::dataset`): a hive-partitioned directory, a glob and a list of files read as
//! one stream on the host path, equal to the files read one by one with their partition columns
//! appended; hidden files skipped; schema and partition-key mismatches naming both files; a damaged
//! file naming itself.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use gpu_parquet::dataset::{Dataset, DatasetSource};
use gpu_parquet::{BackendKind, Error};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// A file of `rows` rows starting at `first`, in row groups of 100.
fn write(path: &Path, first: i64, rows: i64, float_x: bool) -> RecordBatch {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(first..first + rows));
    let x: ArrayRef = if float_x {
        Arc::new(Float64Array::from_iter_values((first..first + rows).map(|i| i as f64)))
    } else {
        Arc::new(Int32Array::from_iter_values((first..first + rows).map(|i| i as i32)))
    };
    let s: ArrayRef = Arc::new(StringArray::from_iter(
        (first..first + rows).map(|i| (i % 3 != 0).then(|| format!("s{i}"))),
    ));
    let batch = RecordBatch::try_from_iter([("id", ids), ("x", x), ("s", s)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    batch
}

fn read_all(
    ds: &Dataset,
    configure: fn(gpu_parquet::ReaderBuilder) -> gpu_parquet::ReaderBuilder,
) -> Result<(RecordBatch, Vec<usize>), Error> {
    let mut batches = Vec::new();
    let mut files = Vec::new();
    for b in ds.batches(configure) {
        let b = b?;
        files.push(b.file);
        batches.push(b.batch);
    }
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| ds.schema().clone());
    Ok((concat_batches(&schema, &batches).unwrap(), files))
}

fn host(b: gpu_parquet::ReaderBuilder) -> gpu_parquet::ReaderBuilder {
    b.with_backend(BackendKind::Host)
}

/// `batch` with constant partition columns appended.
fn with_partitions(batch: &RecordBatch, parts: &[(&str, ArrayRef)]) -> RecordBatch {
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut cols = batch.columns().to_vec();
    for (name, a) in parts {
        fields.push(Field::new(*name, a.data_type().clone(), true));
        cols.push(a.clone());
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

#[test]
fn a_hive_directory_reads_as_its_files_with_partition_columns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Written out of order: the dataset reads in path order.
    let layout: [(&str, i64, i64); 4] = [
        ("year=2025/city=Paris/part-0.parquet", 1000, 250),
        ("year=2024/city=New%20York/part-0.parquet", 0, 230),
        ("year=2024/city=New%20York/part-1.parquet", 230, 20),
        ("year=2024/city=__HIVE_DEFAULT_PARTITION__/part-0.parquet", 500, 120),
    ];
    let mut written = std::collections::BTreeMap::new();
    for (rel, first, rows) in layout {
        written.insert(rel.to_string(), write(&root.join(rel), first, rows, false));
    }
    // Hidden entries are skipped.
    std::fs::write(root.join("year=2024/_SUCCESS"), b"").unwrap();
    std::fs::write(root.join(".hidden.parquet"), b"not parquet").unwrap();
    std::fs::create_dir_all(root.join("_temporary/x")).unwrap();
    std::fs::write(root.join("_temporary/x/junk"), b"junk").unwrap();

    let ds = Dataset::open(DatasetSource::Directory(root.to_path_buf())).expect("dataset");
    let names: Vec<String> = ds
        .files()
        .iter()
        .map(|f| f.path.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        written.keys().cloned().collect::<Vec<_>>(),
        "files in path order, hidden ones left out"
    );
    assert_eq!(ds.num_rows(), 620);
    let fields: Vec<(String, DataType)> = ds
        .partition_fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    assert_eq!(
        fields,
        vec![("year".into(), DataType::Int32), ("city".into(), DataType::Utf8)]
    );

    let (got, files) = read_all(&ds, host).expect("read");
    let mut want = Vec::new();
    for (rel, batch) in &written {
        let n = batch.num_rows();
        let year: i32 = rel[5..9].parse().unwrap();
        let city: ArrayRef = if rel.contains("__HIVE_DEFAULT_PARTITION__") {
            arrow::array::new_null_array(&DataType::Utf8, n)
        } else if rel.contains("Paris") {
            Arc::new(StringArray::from(vec!["Paris"; n]))
        } else {
            Arc::new(StringArray::from(vec!["New York"; n]))
        };
        want.push(with_partitions(
            batch,
            &[("year", Arc::new(Int32Array::from(vec![year; n]))), ("city", city)],
        ));
    }
    let want = concat_batches(&want[0].schema(), &want).unwrap();
    assert_eq!(got, want);
    assert_eq!(got.schema().as_ref(), ds.schema().as_ref());
    // Several groups per file (row groups of 100), files in order.
    assert!(
        files.windows(2).all(|w| w[0] <= w[1]) && files.len() > ds.files().len(),
        "{files:?}"
    );

    // A projection: the chosen columns, then the partitions.
    let (got, _) = read_all(&ds, |b| b.with_backend(BackendKind::Host).with_columns(["s"])).expect("projected read");
    let names: Vec<String> = got.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["s", "year", "city"]);
    assert_eq!(got.column(0).as_ref(), want.column(2).as_ref());
}

#[test]
fn globs_and_lists_read_in_their_order_without_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(&dir.path().join("a.parquet"), 0, 150, true);
    let b = write(&dir.path().join("b.parquet"), 150, 50, true);
    std::fs::write(dir.path().join("notes.txt"), b"not matched").unwrap();
    let pattern = format!("{}/*.parquet", dir.path().display());
    let ds = Dataset::open(DatasetSource::Glob(pattern)).expect("glob");
    assert!(ds.partition_fields().is_empty());
    let (got, _) = read_all(&ds, host).unwrap();
    assert_eq!(got, concat_batches(&a.schema(), &[a.clone(), b.clone()]).unwrap());
    // A list keeps its order.
    let ds = Dataset::open(DatasetSource::Files(vec![
        dir.path().join("b.parquet"),
        dir.path().join("a.parquet"),
    ]))
    .unwrap();
    let (got, files) = read_all(&ds, host).unwrap();
    assert_eq!(got, concat_batches(&a.schema(), &[b, a]).unwrap());
    assert_eq!(files.first(), Some(&0));
}

fn refused(source: DatasetSource) -> String {
    match Dataset::open(source) {
        Ok(_) => panic!("opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn mismatches_name_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let a: PathBuf = dir.path().join("t/a.parquet");
    let b: PathBuf = dir.path().join("t/b.parquet");
    write(&a, 0, 10, false);
    write(&b, 0, 10, true);
    let msg = refused(DatasetSource::Directory(dir.path().join("t")));
    assert!(
        msg.contains(&a.display().to_string()) && msg.contains(&b.display().to_string()),
        "{msg}"
    );
    assert!(
        msg.contains("'x'") && msg.contains("Int32") && msg.contains("Float64"),
        "{msg}"
    );

    let p: PathBuf = dir.path().join("p");
    let c = p.join("k=1/c.parquet");
    let d = p.join("k=2/j=3/d.parquet");
    write(&c, 0, 10, false);
    write(&d, 0, 10, false);
    let msg = refused(DatasetSource::Directory(p));
    assert!(
        msg.contains(&c.display().to_string()) && msg.contains(&d.display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("partition keys"), "{msg}");

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("_x")).unwrap();
    assert!(refused(DatasetSource::Directory(empty)).contains("no files"));
}

#[test]
fn a_damaged_file_names_itself_and_ends_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a.parquet"), 0, 300, false);
    let bad = dir.path().join("b.parquet");
    write(&bad, 300, 300, false);
    let ds = Dataset::open(DatasetSource::Directory(dir.path().to_path_buf())).unwrap();
    // Damage a page of b's second row group after the dataset was opened: it fails when read.
    let mut bytes = std::fs::read(&bad).unwrap();
    let source = gpu_parquet::ParquetSource::open(&bad).unwrap();
    let chunk = source.checked_chunks()[1][0];
    for k in 0..chunk.len.min(24) as usize {
        bytes[chunk.offset as usize + k] = 0xff;
    }
    std::fs::write(&bad, &bytes).unwrap();
    let results: Vec<_> = ds.batches(host).collect();
    let last = results
        .last()
        .expect("something")
        .as_ref()
        .expect_err("the damage is an error");
    assert!(last.to_string().contains(&bad.display().to_string()), "{last}");
    let good: usize = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|b| b.batch.num_rows())
        .sum();
    assert!(good >= 300, "a's rows came first: {good}");
    assert!(results.iter().rev().skip(1).all(|r| r.is_ok()), "one error, at the end");
}

/// Several GPUs (or the same GPU twice): the dataset shared out by row groups, decoded on each GPU,
/// gathered in dataset order, equals the host read; every row group read once; the GPUs' counters
/// add up to the files' chunk bytes, all through the staged path. Without a GPU the read is refused
/// plainly (this part runs in CI).
#[test]
fn several_gpus_read_the_dataset_as_the_host_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (rel, first, rows) in [
        ("year=2024/part-0.parquet", 0, 430),
        ("year=2024/part-1.parquet", 430, 70),
        ("year=2025/part-0.parquet", 1000, 310),
    ] {
        write(&root.join(rel), first, rows, true);
    }
    let ds = Dataset::open(DatasetSource::Directory(root.to_path_buf())).expect("dataset");
    let (want, _) = read_all(&ds, host).expect("host read");
    if !common::gpu_decoder_available() {
        let e = ds.read_devices(&[0], |b| b).expect_err("no GPU here");
        assert!(matches!(e, Error::Unavailable { .. }), "{e}");
        assert!(e.to_string().contains("GPU 0"), "{e}");
        return;
    }
    let chunk_bytes: u64 = ds
        .files()
        .iter()
        .map(|f| {
            let r = gpu_parquet::Reader::builder(&f.path)
                .with_backend(BackendKind::Host)
                .build()
                .unwrap();
            r.plan().chunks.iter().map(|c| c.len).sum::<u64>()
        })
        .sum();
    let visible = gpu_parquet::gpu::GpuContext::device_count();
    let e = ds.read_devices(&[visible], |b| b).expect_err("one GPU too many");
    assert!(e.to_string().contains(&format!("GPU {visible}")), "{e}");
    for devices in [vec![0], vec![0, 0, 0], (0..visible).collect::<Vec<_>>()] {
        let r = ds
            .read_devices(&devices, |b| b.with_backend(BackendKind::Staged))
            .unwrap_or_else(|e| panic!("{devices:?}: {e}"));
        let got = r.to_host(&ds).expect("to host");
        let got = concat_batches(&want.schema(), &got).expect("one schema");
        assert_eq!(got, want, "{devices:?}");
        assert_eq!(r.num_rows() as u64, ds.num_rows());
        let mut seen: Vec<(usize, usize)> = Vec::new();
        for (share, &device) in r.devices.iter().zip(&devices) {
            assert_eq!(share.device, device);
            for p in &share.parts {
                seen.extend(p.part.row_groups.iter().map(|&rg| (p.part.file, rg)));
                for b in &p.read.table.batches {
                    let buffer = &b.columns[0].array.buffers[0];
                    assert_eq!(buffer.context().ordinal(), device, "decoded on the GPU its share names");
                }
            }
        }
        let every: Vec<(usize, usize)> = ds
            .row_group_bytes()
            .iter()
            .enumerate()
            .flat_map(|(f, g)| (0..g.len()).map(move |rg| (f, rg)))
            .collect();
        assert_eq!(seen, every, "{devices:?}: each row group once, in dataset order");
        let useful: u64 = r
            .devices
            .iter()
            .flat_map(|d| &d.parts)
            .map(|p| p.read.io.useful_bytes)
            .sum();
        assert_eq!(useful, chunk_bytes, "{devices:?}: the chunks' bytes, each once");
        let counts = r.counts();
        assert!(counts.total_bytes() >= chunk_bytes, "{devices:?}");
        assert_eq!(
            counts.bytes[gpu_parquet::io::IoPath::Staged.index()],
            counts.total_bytes()
        );
        assert!(r.cufile_stats_check.is_none());
    }
}

/// Integer partition values are Int32 where every value fits, as pyarrow infers them, else Int64.
#[test]
fn integer_partitions_are_int32_where_they_fit_else_int64() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("day=1/part-0.parquet"), 0, 10, false);
    write(&root.join("day=2/part-0.parquet"), 10, 10, false);
    let ds = Dataset::open(DatasetSource::Directory(root.to_path_buf())).expect("dataset");
    assert_eq!(ds.partition_fields()[0].data_type(), &DataType::Int32);
    let (got, _) = read_all(&ds, host).expect("read");
    let day = got.column_by_name("day").expect("day column");
    assert_eq!(day.data_type(), &DataType::Int32);

    write(&root.join("day=4294967296/part-0.parquet"), 20, 10, false);
    let ds = Dataset::open(DatasetSource::Directory(root.to_path_buf())).expect("dataset");
    assert_eq!(ds.partition_fields()[0].data_type(), &DataType::Int64);
    let (got, _) = read_all(&ds, host).expect("read");
    let day = got.column_by_name("day").expect("day column");
    let day = day.as_any().downcast_ref::<Int64Array>().expect("Int64");
    assert_eq!(day.value(day.len() - 1), 4_294_967_296);
}

/// `select_columns`: the files' columns and partition columns chosen together, the partition
/// columns' values as before; an unknown name and partition columns alone are clear errors.
#[test]
fn a_selection_may_name_partition_columns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = write(&root.join("year=2024/city=Oslo/part-0.parquet"), 0, 150, false);
    let b = write(&root.join("year=2025/city=Rome/part-0.parquet"), 150, 120, false);
    let ds = Dataset::open(DatasetSource::Directory(root.to_path_buf())).expect("dataset");
    let picked = ds.select_columns(&["s", "year"]).expect("select");
    let schema: Vec<&str> = picked.schema().fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(schema, ["s", "year"]);
    assert_eq!(picked.partition_fields().len(), 1);
    let (got, files) = read_all(&picked, host).expect("read");
    assert_eq!(files.first(), Some(&0));
    let want = |batch: &RecordBatch, year: i32| {
        let s = batch.project(&[2]).unwrap();
        let n = s.num_rows();
        with_partitions(&s, &[("year", Arc::new(Int32Array::from_value(year, n)) as ArrayRef)])
    };
    let want = concat_batches(&got.schema(), &[want(&a, 2024), want(&b, 2025)]).unwrap();
    assert_eq!(got, want);

    let e = ds.select_columns(&["id", "nope"]).unwrap_err().to_string();
    assert!(e.contains("'nope'") && e.contains("city"), "{e}");
    let e = ds.select_columns(&["year"]).unwrap_err().to_string();
    assert!(e.contains("at least one"), "{e}");
}

/// A dataset's readers start from the footers `Dataset::open` read: a file rewritten after it is
/// an error naming the file, not a read of the new bytes under the old footer's plan.
#[test]
fn a_dataset_reads_each_footer_once_and_notices_a_rewritten_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("part-0.parquet");
    write(&path, 0, 300, false);
    let ds = Dataset::open(DatasetSource::Files(vec![path.clone()])).expect("dataset");
    assert_eq!(ds.sources().len(), 1);
    assert_eq!(ds.sources()[0].path(), path.as_path());
    // Rewritten with other rows (and another size): the open source no longer matches the file.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&path, 0, 50, true);
    let e = read_all(&ds, host).expect_err("the file changed").to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
}

/// `Dataset::batches` with a GPU decode asked for: on a machine without a GPU (or a host backend) a
/// clear error saying the GPU decode needs a GPU backend.
#[test]
fn a_dataset_decodes_on_the_gpu_only_when_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("part-0.parquet");
    write(&path, 0, 120, false);
    let ds = Dataset::open(DatasetSource::Files(vec![path])).expect("dataset");
    let mut batches = ds.batches(|b| b.with_backend(BackendKind::Host).with_decode(gpu_parquet::Decode::Gpu));
    let e = batches
        .next()
        .expect("one item")
        .expect_err("no GPU decode on the host backend");
    assert!(e.to_string().contains("GPU backend"), "{e}");
    assert!(batches.next().is_none());
}

/// `Dataset::with_filter`: its terms on partition columns skip whole files (a partition column may
/// be filtered on without being selected), the others filter each file's rows, equal to the files'
/// rows that pass, computed here; a term mixing both kinds, and a filter no file passes, are handled.
#[test]
fn a_filter_skips_files_by_partition_and_rows_by_value() {
    use arrow::compute::filter_record_batch;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = write(&root.join("year=2024/city=Oslo/part-0.parquet"), 0, 250, false);
    write(&root.join("year=2025/city=Rome/part-0.parquet"), 250, 120, false);
    let c = write(&root.join("year=2024/city=Rome/part-0.parquet"), 400, 130, false);
    let ds = Dataset::open(DatasetSource::Directory(root.to_path_buf())).expect("dataset");
    let filter = gpu_parquet::filter::Expr::parse("year = 2024 and x >= 120 and s is not null").unwrap();
    // Either order: the filter names `year` and `x`, which the selection drops.
    let one = ds
        .with_filter(filter.clone())
        .unwrap()
        .select_columns(&["id", "city"])
        .unwrap();
    let two = ds.select_columns(&["id", "city"]).unwrap().with_filter(filter).unwrap();
    assert_eq!(one.files().len(), 2, "the year=2025 file is skipped");
    assert_eq!(one.files(), two.files());
    let want = |batch: &RecordBatch, city: &str| {
        let x = batch.column(1).as_any().downcast_ref::<Int32Array>().unwrap();
        let mask: arrow::array::BooleanArray = (0..batch.num_rows())
            .map(|i| Some(x.value(i) >= 120 && batch.column(2).is_valid(i)))
            .collect();
        let kept = filter_record_batch(&batch.project(&[0]).unwrap(), &mask).unwrap();
        let n = kept.num_rows();
        with_partitions(
            &kept,
            &[("city", Arc::new(StringArray::from(vec![city; n])) as ArrayRef)],
        )
    };
    // Path order: year=2024/city=Oslo, then year=2024/city=Rome.
    let want = [want(&a, "Oslo"), want(&c, "Rome")];
    let want = concat_batches(&want[0].schema(), &want).unwrap();
    for picked in [&one, &two] {
        let (got, _) = read_all(picked, host).expect("filtered read");
        assert_eq!(got, want);
    }

    let e = ds
        .with_filter(gpu_parquet::filter::Expr::parse("year = 2024 or x > 3").unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("mixes partition columns (year)") && e.contains("(x)"), "{e}");
    let e = ds
        .with_filter(gpu_parquet::filter::Expr::parse("city = 3").unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("city"), "{e}");
    let none = ds
        .with_filter(gpu_parquet::filter::Expr::parse("city in ('Lima', 'Kyiv')").unwrap())
        .unwrap();
    assert!(none.files().is_empty());
    assert_eq!(none.num_rows(), 0);
    assert_eq!(
        read_all(&ds, host).unwrap().0.num_rows(),
        500,
        "the unfiltered dataset is unchanged"
    );
    assert_eq!(none.batches(host).count(), 0);
}
