//! Datasets: many Parquet files of one schema read as one stream of record batches.
//!
//! A dataset is a directory (walked recursively), a glob pattern or a list of files. Every file must
//! have the same Arrow schema as the first (a mismatch names both files and the column); hidden
//! entries (names starting with `.` or `_`, such as `_SUCCESS` or `.crc` files) are skipped, as
//! pyarrow and Spark skip them. In a directory, hive-style partition folders (`key=value/`) become
//! columns after the file's own: `Int32` when every value of the key is an integer that fits (as
//! pyarrow infers them), `Int64` when every value is a 64-bit integer, `Utf8`
//! otherwise (values percent-decoded; `__HIVE_DEFAULT_PARTITION__` is null), in the order the keys
//! appear in the path. Every file must have the same keys.
//!
//! Each file's footer is read once, by [`Dataset::open`]; its readers start from that
//! [`ParquetSource`]. [`Dataset::batches`] scans the files in path order, one step of row groups at a
//! time, the scan reading and decoding the next steps while the caller works on the current one
//! (on the host by default, on the GPU when the reader is configured with
//! [`Decode::Gpu`]); each [`Reader`](crate::Reader) is configured by the caller (backend, columns,
//! settings, decode).
//!
//! ```
//! use gpu_parquet::dataset::{Dataset, DatasetSource};
//! use gpu_parquet::BackendKind;
//! let ds = Dataset::open(DatasetSource::Files(vec![
//!     "testdata/flat_plain.parquet".into(),
//!     "testdata/flat_plain.parquet".into(),
//! ]))?;
//! let mut rows = 0;
//! for batch in ds.batches(|b| b.with_backend(BackendKind::Host)) {
//!     rows += batch?.batch.num_rows();
//! }
//! assert_eq!(rows as u64, ds.num_rows());
//! # Ok::<(), gpu_parquet::Error>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, StringArray, new_null_array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::decode::gpu::GpuDecoder;
use crate::error::{Error, Location, Result};
use crate::filter::Expr;
use crate::io::select::AnyBackend;
use crate::metadata::ParquetSource;
use crate::reader::ReaderBuilder;
use crate::scan::{Decode, Scan, StepOutput};

/// Where a dataset's files are.
#[derive(Debug, Clone)]
pub enum DatasetSource {
    /// Every non-hidden file below this directory; `key=value` folders are partitions.
    Directory(PathBuf),
    /// The files a glob pattern matches (`data/*.parquet`, `data/**/*.parquet`), in path order.
    Glob(String),
    /// These files, in this order.
    Files(Vec<PathBuf>),
}

impl DatasetSource {
    /// What command-line arguments name: one directory, one glob pattern (it has `*`, `?` or `[`
    /// and names no existing file), or files in the order given.
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> Self {
        match args {
            [one] if Path::new(one.as_ref()).is_dir() => Self::Directory(one.as_ref().into()),
            [one] if one.as_ref().contains(['*', '?', '[']) && !Path::new(one.as_ref()).exists() => {
                Self::Glob(one.as_ref().to_string())
            }
            many => Self::Files(many.iter().map(|a| PathBuf::from(a.as_ref())).collect()),
        }
    }
}

/// One file of a dataset and its partition values (in [`Dataset::partition_fields`] order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetFile {
    /// The file.
    pub path: PathBuf,
    /// Its partition values, `None` for a null (`__HIVE_DEFAULT_PARTITION__`).
    pub partition_values: Vec<Option<String>>,
}

/// Files of one schema, read as one stream.
#[derive(Debug, Clone)]
pub struct Dataset {
    files: Vec<DatasetFile>,
    /// Each file opened, its footer read and validated once.
    sources: Vec<ParquetSource>,
    rows: Vec<u64>,
    /// Per file, each row group's uncompressed bytes (`total_byte_size`): how work is shared out.
    row_group_bytes: Vec<Vec<u64>>,
    partitions: Vec<Field>,
    schema: SchemaRef,
    /// The files' columns read ([`Dataset::select_columns`]; `None`: all).
    columns: Option<Vec<String>>,
    /// Every partition key and each file's value of it, whatever the selection keeps: what a
    /// filter on partition columns tests ([`Dataset::with_filter`]).
    all_partitions: Vec<Field>,
    all_values: Vec<Vec<Option<String>>>,
    /// The filter's terms on the files' own columns, given to each file's reader.
    filter: Option<Expr>,
}

/// A batch of a dataset: which file it came from, and its rows with the partition columns.
#[derive(Debug, Clone)]
pub struct DatasetBatch {
    /// Index into [`Dataset::files`].
    pub file: usize,
    /// The rows: the file's selected columns, then the partition columns.
    pub batch: RecordBatch,
}

/// The null value of a hive partition.
const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

impl Dataset {
    /// Lists the files, checks that they share one schema and one set of partition keys, and reads
    /// each footer (validated as [`ParquetSource::open`] does).
    pub fn open(source: DatasetSource) -> Result<Self> {
        let (root, paths) = list_files(&source)?;
        let mut files = Vec::with_capacity(paths.len());
        let mut keys: Option<(PathBuf, Vec<String>)> = None;
        for path in paths {
            let parts = match &root {
                Some(r) => partition_segments(r, &path)?,
                None => Vec::new(),
            };
            let names: Vec<String> = parts.iter().map(|(k, _)| k.clone()).collect();
            match &keys {
                None => keys = Some((path.clone(), names)),
                Some((first, want)) if *want != names => {
                    return Err(Error::InvalidRequest {
                        location: Location::file(&path),
                        message: format!(
                            "its partition keys {names:?} differ from {want:?} of {} (every file of a dataset needs the same keys)",
                            first.display()
                        ),
                    });
                }
                Some(_) => {}
            }
            files.push(DatasetFile {
                path,
                partition_values: parts.into_iter().map(|(_, v)| v).collect(),
            });
        }
        let keys = keys.map(|(_, k)| k).unwrap_or_default();

        let mut file_schema: Option<(PathBuf, SchemaRef)> = None;
        let mut rows = Vec::with_capacity(files.len());
        let mut row_group_bytes = Vec::with_capacity(files.len());
        let mut sources = Vec::with_capacity(files.len());
        for f in &files {
            let source = ParquetSource::open(&f.path)?;
            sources.push(source.clone());
            row_group_bytes.push(
                source
                    .metadata()
                    .row_groups()
                    .iter()
                    .map(|g| g.total_byte_size().max(0) as u64)
                    .collect(),
            );
            rows.push(
                source
                    .metadata()
                    .row_groups()
                    .iter()
                    .map(|g| g.num_rows().max(0) as u64)
                    .sum(),
            );
            let schema = arrow_schema(&source)?;
            match &file_schema {
                None => file_schema = Some((f.path.clone(), schema)),
                Some((first, want)) => {
                    if let Some(diff) = schema_difference(want, &schema) {
                        return Err(Error::InvalidRequest {
                            location: Location::file(&f.path),
                            message: format!(
                                "its schema differs from that of {}, the dataset's first file: {diff}",
                                first.display()
                            ),
                        });
                    }
                }
            }
        }
        let (_, file_schema) = file_schema.expect("a dataset has at least one file");

        let partitions: Vec<Field> = keys
            .iter()
            .enumerate()
            .map(|(k, key)| {
                let values = || files.iter().filter_map(|f| f.partition_values[k].as_deref());
                // As pyarrow infers them: Int32 where every value fits, else Int64, else strings.
                let data_type = if values().all(|v| v.parse::<i32>().is_ok()) {
                    DataType::Int32
                } else if values().all(|v| v.parse::<i64>().is_ok()) {
                    DataType::Int64
                } else {
                    DataType::Utf8
                };
                Field::new(key, data_type, true)
            })
            .collect();
        for p in &partitions {
            if file_schema.field_with_name(p.name()).is_ok() {
                return Err(Error::InvalidRequest {
                    location: Location::file(&files[0].path),
                    message: format!("the partition key '{}' is also a column of the files", p.name()),
                });
            }
        }
        let mut fields: Vec<Field> = file_schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(partitions.iter().cloned());
        let all_values = files.iter().map(|f| f.partition_values.clone()).collect();
        Ok(Self {
            files,
            sources,
            rows,
            row_group_bytes,
            all_partitions: partitions.clone(),
            partitions,
            schema: Arc::new(Schema::new(fields)),
            columns: None,
            all_values,
            filter: None,
        })
    }

    /// This dataset reading only the columns `names`: the files' columns (top-level names, or dotted
    /// paths to nested leaves) and partition columns, the latter still after the files' own in their
    /// key order. A partition column is read only when named here (without a selection, all are), as
    /// `pyarrow.dataset` does; the CLI's `dataset --columns` and Python's `read_dataset(columns=)`
    /// come here. A name that is neither is an error naming the columns there are; so is a selection
    /// of partition columns alone (a read needs one of the files' columns for its rows).
    pub fn select_columns<S: AsRef<str>>(&self, names: &[S]) -> Result<Self> {
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        let keys: Vec<&str> = self.partitions.iter().map(|f| f.name().as_str()).collect();
        let file_fields = &self.schema.fields()[..self.schema.fields().len() - self.partitions.len()];
        let mut columns = Vec::new();
        for name in &names {
            if keys.contains(name) {
                continue;
            }
            let top = name.split('.').next().unwrap_or(name);
            if !file_fields.iter().any(|f| f.name() == top) {
                let known: Vec<&str> = file_fields.iter().map(|f| f.name().as_str()).collect();
                return Err(Error::InvalidRequest {
                    location: self.first_location(),
                    message: format!(
                        "the dataset has no column '{name}' (the files' columns: {}; partition columns: {})",
                        known.join(", "),
                        if keys.is_empty() {
                            "none".to_string()
                        } else {
                            keys.join(", ")
                        }
                    ),
                });
            }
            columns.push(name.to_string());
        }
        if columns.is_empty() {
            return Err(Error::InvalidRequest {
                location: self.first_location(),
                message: format!(
                    "select at least one of the files' columns besides the partition columns {}",
                    names.join(", ")
                ),
            });
        }
        let keep: Vec<usize> = (0..self.partitions.len())
            .filter(|&k| names.contains(&keys[k]))
            .collect();
        let partitions: Vec<Field> = keep.iter().map(|&k| self.partitions[k].clone()).collect();
        let files = self
            .files
            .iter()
            .map(|f| DatasetFile {
                path: f.path.clone(),
                partition_values: keep.iter().map(|&k| f.partition_values[k].clone()).collect(),
            })
            .collect();
        // Top-level fields of the selection (nested ones whole), then the partitions kept.
        let mut fields: Vec<Field> = file_fields
            .iter()
            .filter(|f| columns.iter().any(|c| c.split('.').next() == Some(f.name().as_str())))
            .map(|f| f.as_ref().clone())
            .collect();
        fields.extend(partitions.iter().cloned());
        Ok(Self {
            files,
            sources: self.sources.clone(),
            rows: self.rows.clone(),
            row_group_bytes: self.row_group_bytes.clone(),
            partitions,
            schema: Arc::new(Schema::new(fields)),
            columns: Some(columns),
            all_partitions: self.all_partitions.clone(),
            all_values: self.all_values.clone(),
            filter: self.filter.clone(),
        })
    }

    /// This dataset reading only the rows `filter` accepts (and-ed with a filter given before).
    /// The filter's top-level `and` terms on partition columns alone are tested per file here, once:
    /// a file whose partition values fail them is not read at all (pyarrow's partition pruning);
    /// the terms on the files' own columns go to each file's reader
    /// ([`ReaderBuilder::with_filter`]: row groups and pages pruned, rows filtered exactly), the
    /// columns they name read for the test and dropped after it. A partition column may be named
    /// whether [`select_columns`](Self::select_columns) keeps it or not. A term mixing partition
    /// columns and the files' columns (`year = 2024 or x > 3`) is an error saying so; so is a
    /// column that is neither, or a literal of the wrong type.
    pub fn with_filter(&self, filter: Expr) -> Result<Self> {
        let location = self.first_location();
        let keys: Vec<&str> = self.all_partitions.iter().map(|f| f.name().as_str()).collect();
        let mut on_partitions: Option<Expr> = None;
        let mut on_files: Option<Expr> = self.filter.clone();
        for term in conjuncts(filter) {
            let columns = term.columns();
            let (partition, file): (Vec<&String>, Vec<&String>) =
                columns.iter().partition(|c| keys.contains(&c.as_str()));
            let slot = match (partition.is_empty(), file.is_empty()) {
                (false, true) => &mut on_partitions,
                (true, _) => &mut on_files,
                (false, false) => {
                    return Err(Error::InvalidRequest {
                        location,
                        message: format!(
                            "the filter term '{term}' mixes partition columns ({}) with the files' columns ({}) \
                             under or/not (each term joined by a top-level 'and' may name one kind only)",
                            join(&partition),
                            join(&file)
                        ),
                    });
                }
            };
            *slot = Some(match slot.take() {
                None => term,
                Some(e) => e.and(term),
            });
        }
        let mut out = self.clone();
        out.filter = on_files;
        if let Some(e) = on_partitions {
            let keep = self.partitions_accepted(&e, &location)?;
            let mut k = keep.iter();
            out.files.retain(|_| *k.next().expect("one flag per file"));
            for (i, kept) in keep.iter().enumerate().rev() {
                if !kept {
                    out.sources.remove(i);
                    out.rows.remove(i);
                    out.row_group_bytes.remove(i);
                    out.all_values.remove(i);
                }
            }
        }
        Ok(out)
    }

    /// Per file, whether its partition values pass `filter` (a filter on partition columns only).
    fn partitions_accepted(&self, filter: &Expr, location: &Location) -> Result<Vec<bool>> {
        let schema = Arc::new(Schema::new(self.all_partitions.clone()));
        let predicate = filter.bind(&schema, location)?;
        let one_row = arrow::array::RecordBatchOptions::new().with_row_count(Some(1));
        let empty = RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &one_row)
            .map_err(|e| Error::parquet(location.clone(), e))?;
        self.files
            .iter()
            .zip(&self.all_values)
            .map(|(f, values)| {
                let row = with_partitions(empty.clone(), &self.all_partitions, values, &f.path)?;
                let accepted = predicate.evaluate(&row)?;
                Ok(accepted.is_valid(0) && accepted.value(0))
            })
            .collect()
    }

    /// The filter on the files' own columns that each file's reader is given
    /// ([`with_filter`](Self::with_filter)).
    pub fn file_filter(&self) -> Option<&Expr> {
        self.filter.as_ref()
    }

    /// Where errors about the dataset as a whole point: its first file.
    fn first_location(&self) -> Location {
        self.files.first().map(|f| Location::file(&f.path)).unwrap_or_default()
    }

    /// The files' columns read, when [`select_columns`](Self::select_columns) chose them.
    pub fn file_columns(&self) -> Option<&[String]> {
        self.columns.as_deref()
    }

    /// `batch`, read from file `i`, with that file's partition columns appended.
    pub fn attach_partitions(&self, i: usize, batch: RecordBatch) -> Result<RecordBatch> {
        let f = &self.files[i];
        with_partitions(batch, &self.partitions, &f.partition_values, &f.path)
    }

    /// Per file, each row group's uncompressed bytes (the footer's `total_byte_size`).
    pub fn row_group_bytes(&self) -> &[Vec<u64>] {
        &self.row_group_bytes
    }

    /// The files, in the order they are read.
    pub fn files(&self) -> &[DatasetFile] {
        &self.files
    }

    /// The schema of a whole read: the files' columns, then the partition columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The partition columns.
    pub fn partition_fields(&self) -> &[Field] {
        &self.partitions
    }

    /// Rows of every file, from the footers.
    pub fn num_rows(&self) -> u64 {
        self.rows.iter().sum()
    }

    /// Each file, opened once (its validated footer): readers start from it
    /// ([`ReaderBuilder::from_source`]).
    pub fn sources(&self) -> &[ParquetSource] {
        &self.sources
    }

    /// A reader builder for file `i`, from its already-open source, with the selected columns and
    /// the filter on the files' columns.
    pub fn reader_builder(&self, i: usize) -> ReaderBuilder {
        let mut b = ReaderBuilder::from_source(self.sources[i].clone());
        if let Some(c) = &self.columns {
            b = b.with_columns(c.iter().cloned());
        }
        if let Some(f) = &self.filter {
            b = b.with_filter(f.clone());
        }
        b
    }

    /// Reads every file's row groups in order as batches with the (selected) partition columns
    /// appended. Each file's [`Reader`](crate::Reader) is built by `configure` from
    /// [`Dataset::reader_builder`], which holds the selected columns and the filter (choose the
    /// backend and the settings there; it decodes on the host unless `configure` asks for
    /// [`Decode::Gpu`], whose device columns are then copied to the host). Each file is one
    /// [`Reader::scan`](crate::Reader::scan), reading and decoding its next steps while the caller
    /// holds the current one (a GPU-decoded step comes with the rows the filter accepts); the
    /// readers after the first share its backend and GPU decoder. Dropping the iterator stops the
    /// scan. The first error ends the stream.
    pub fn batches(&self, configure: impl Fn(ReaderBuilder) -> ReaderBuilder + Send + 'static) -> DatasetBatches {
        DatasetBatches {
            dataset: self.clone(),
            configure: Box::new(configure),
            next_file: 0,
            current: None,
            pending: std::collections::VecDeque::new(),
            shared: None,
            ended: false,
        }
    }
}

/// The batches of [`Dataset::batches`]: each file's scan in turn.
pub struct DatasetBatches {
    dataset: Dataset,
    configure: Box<dyn Fn(ReaderBuilder) -> ReaderBuilder + Send>,
    next_file: usize,
    /// The file being scanned, and its scan.
    current: Option<(usize, Scan<StepOutput>)>,
    /// Batches of the current step not handed out yet.
    pending: std::collections::VecDeque<DatasetBatch>,
    /// The first reader's backend and GPU decoder, shared with the later ones.
    shared: Option<(Arc<AnyBackend>, Option<Arc<GpuDecoder>>)>,
    ended: bool,
}

impl std::fmt::Debug for DatasetBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetBatches")
            .field("files", &self.dataset.files.len())
            .field("next_file", &self.next_file)
            .finish_non_exhaustive()
    }
}

impl DatasetBatches {
    /// Starts the scan of the next file; `None` when none is left.
    fn start_next(&mut self) -> Option<Result<()>> {
        let i = self.next_file;
        if i >= self.dataset.files.len() {
            return None;
        }
        self.next_file += 1;
        let mut builder = (self.configure)(self.dataset.reader_builder(i).with_decode(Decode::Host));
        if let Some((io, decoder)) = &self.shared {
            builder = builder.with_io(io.clone()).with_gpu_decoder(decoder.clone());
        }
        let started = builder.build().and_then(|reader| {
            let scan = reader.scan()?;
            if self.shared.is_none() {
                let decoder = reader.gpu_decoder.get().and_then(|d| d.as_ref().ok()).cloned();
                self.shared = Some((reader.io().clone(), decoder));
            }
            Ok(scan)
        });
        Some(started.map(|scan| self.current = Some((i, scan))))
    }

    /// The next step of the current file as batches with the partitions; `None` at its end.
    fn next_step(&mut self) -> Option<Result<()>> {
        let (i, scan) = self.current.as_mut()?;
        let i = *i;
        let step = match scan.next() {
            Some(step) => step,
            None => {
                self.current = None;
                return None;
            }
        };
        // A GPU-decoded step comes back with the rows the filter accepts (on the device, or on the
        // host where the GPU could not run it).
        let batches = step.and_then(StepOutput::into_record_batches);
        Some(batches.and_then(|batches| {
            for batch in batches {
                let batch = self.dataset.attach_partitions(i, batch)?;
                self.pending.push_back(DatasetBatch { file: i, batch });
            }
            Ok(())
        }))
    }
}

impl Iterator for DatasetBatches {
    type Item = Result<DatasetBatch>;

    fn next(&mut self) -> Option<Result<DatasetBatch>> {
        loop {
            if let Some(b) = self.pending.pop_front() {
                return Some(Ok(b));
            }
            if self.ended {
                return None;
            }
            let r = match self.next_step() {
                Some(r) => r,
                None => match self.start_next() {
                    Some(r) => r,
                    None => {
                        self.ended = true;
                        return None;
                    }
                },
            };
            if let Err(e) = r {
                self.ended = true;
                self.current = None;
                return Some(Err(e));
            }
        }
    }
}

/// The top-level `and` terms of `e`, in order.
fn conjuncts(e: Expr) -> Vec<Expr> {
    match e {
        Expr::And(a, b) => {
            let mut out = conjuncts(*a);
            out.extend(conjuncts(*b));
            out
        }
        other => vec![other],
    }
}

fn join(names: &[&String]) -> String {
    names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
}

/// `batch` with one constant column per partition appended.
pub(crate) fn with_partitions(
    batch: RecordBatch,
    fields: &[Field],
    values: &[Option<String>],
    path: &Path,
) -> Result<RecordBatch> {
    if fields.is_empty() {
        return Ok(batch);
    }
    let n = batch.num_rows();
    let mut schema_fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for (field, value) in fields.iter().zip(values) {
        let column: ArrayRef = match (field.data_type(), value) {
            (t, None) => new_null_array(t, n),
            (t @ (DataType::Int32 | DataType::Int64), Some(v)) => {
                let not_integer = || Error::InvalidRequest {
                    location: Location::file(path),
                    message: format!("partition value '{v}' of '{}' is not an {t} integer", field.name()),
                };
                if *t == DataType::Int32 {
                    Arc::new(Int32Array::from_value(v.parse().map_err(|_| not_integer())?, n))
                } else {
                    Arc::new(Int64Array::from_value(v.parse().map_err(|_| not_integer())?, n))
                }
            }
            (_, Some(v)) => Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v.as_str(), n))),
        };
        schema_fields.push(field.clone());
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(schema_fields)), columns)
        .map_err(|e| Error::parquet(Location::file(path), e))
}

/// The Arrow schema arrow-rs gives the file (the embedded Arrow schema honoured).
fn arrow_schema(source: &ParquetSource) -> Result<SchemaRef> {
    let meta = source.metadata().file_metadata();
    parquet::arrow::parquet_to_arrow_schema(meta.schema_descr(), meta.key_value_metadata())
        .map(Arc::new)
        .map_err(|e| Error::parquet(source.location(), e))
}

/// How `got` differs from `want` (names, types, nullability, in order), or `None`.
fn schema_difference(want: &Schema, got: &Schema) -> Option<String> {
    for (i, w) in want.fields().iter().enumerate() {
        let Some(g) = got.fields().get(i) else {
            return Some(format!(
                "it has no column '{}' (it has {} columns, not {})",
                w.name(),
                got.fields().len(),
                want.fields().len()
            ));
        };
        if g.name() != w.name() {
            return Some(format!("column {i} is '{}' there, '{}' here", w.name(), g.name()));
        }
        if g.data_type() != w.data_type() {
            return Some(format!(
                "column '{}' is {} there, {} here",
                w.name(),
                w.data_type(),
                g.data_type()
            ));
        }
        if g.is_nullable() != w.is_nullable() {
            return Some(format!(
                "column '{}' is {} there, {} here",
                w.name(),
                if w.is_nullable() { "nullable" } else { "required" },
                if g.is_nullable() { "nullable" } else { "required" }
            ));
        }
    }
    (got.fields().len() > want.fields().len())
        .then(|| format!("it has an extra column '{}'", got.fields()[want.fields().len()].name()))
}

/// The files of `source` in read order, and the directory partitions are relative to (if any).
fn list_files(source: &DatasetSource) -> Result<(Option<PathBuf>, Vec<PathBuf>)> {
    let (root, mut files) = match source {
        DatasetSource::Directory(dir) => {
            let mut out = Vec::new();
            walk(dir, &mut out)?;
            out.sort();
            (Some(dir.clone()), out)
        }
        DatasetSource::Glob(pattern) => {
            let location = Location::file(pattern);
            let paths = glob::glob(pattern).map_err(|e| Error::InvalidRequest {
                location: location.clone(),
                message: format!("not a glob pattern: {e}"),
            })?;
            let mut out = Vec::new();
            for p in paths {
                let p =
                    p.map_err(|e| Error::io(location.clone(), "listing the glob's matches", std::io::Error::from(e)))?;
                if p.is_file() && !is_hidden(&p) {
                    out.push(p);
                }
            }
            out.sort();
            (None, out)
        }
        DatasetSource::Files(list) => (None, list.clone()),
    };
    files.dedup();
    if files.is_empty() {
        let what = match source {
            DatasetSource::Directory(d) => d.display().to_string(),
            DatasetSource::Glob(g) => g.clone(),
            DatasetSource::Files(_) => "the list".into(),
        };
        return Err(Error::InvalidRequest {
            location: Location::file(what),
            message: "no files to read (hidden names, starting with '.' or '_', are skipped)".into(),
        });
    }
    Ok((root, files))
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') || n.starts_with('_'))
}

/// Every non-hidden regular file below `dir`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(Location::file(dir), "cannot list the directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(Location::file(dir), "cannot list the directory", e))?;
        let path = entry.path();
        if is_hidden(&path) {
            continue;
        }
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(Location::file(&path), "cannot stat", e))?;
        if kind.is_dir() {
            walk(&path, out)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}

/// The `key=value` folders between `root` and `path`, values percent-decoded (`None` for null).
fn partition_segments(root: &Path, path: &Path) -> Result<Vec<(String, Option<String>)>> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut out = Vec::new();
    let dirs: Vec<_> = rel.parent().map(|p| p.components().collect()).unwrap_or_default();
    for c in dirs {
        let seg = c.as_os_str().to_string_lossy();
        let Some((k, v)) = seg.split_once('=') else {
            continue;
        };
        let value = percent_decode(v).ok_or_else(|| Error::InvalidRequest {
            location: Location::file(path),
            message: format!("the partition folder '{seg}' is not valid percent-encoded UTF-8"),
        })?;
        out.push((k.to_string(), (value != HIVE_NULL).then_some(value)));
    }
    Ok(out)
}

/// Decodes `%XX` escapes (as hive and pyarrow write them); `None` when the result is not UTF-8 or an
/// escape is malformed.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_as_hive_writes_it() {
        assert_eq!(percent_decode("New%20York").as_deref(), Some("New York"));
        assert_eq!(percent_decode("a%2Fb%3Dc").as_deref(), Some("a/b=c"));
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
        assert_eq!(percent_decode("bad%2"), None);
        assert_eq!(percent_decode("bad%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn partition_folders_between_root_and_file() {
        let root = Path::new("/data");
        let p = Path::new("/data/year=2024/other/city=New%20York/region=__HIVE_DEFAULT_PARTITION__/f.parquet");
        assert_eq!(
            partition_segments(root, p).unwrap(),
            vec![
                ("year".to_string(), Some("2024".to_string())),
                ("city".to_string(), Some("New York".to_string())),
                ("region".to_string(), None),
            ]
        );
        assert!(
            partition_segments(root, Path::new("/data/f.parquet"))
                .unwrap()
                .is_empty()
        );
    }
}
