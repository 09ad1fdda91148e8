//! Python bindings (`gpu_parquet._gpu_parquet`, wrapped by `gpu_parquet/__init__.py`): `read` returns
//! a `Table` that holds either GPU-decoded device columns or host record batches, the read's report,
//! and exports through the Arrow PyCapsule interface: `__arrow_c_device_array__` and
//! `__arrow_c_device_stream__` (device memory, no copy; host memory as device type CPU), and
//! `__arrow_c_stream__` (host memory: device columns are copied back). The read runs with the GIL
//! released.

use std::ffi::CString;
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchIterator, StructArray};
use arrow::datatypes::SchemaRef;
use arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::FFI_ArrowArrayStream;
use gpu_parquet::config::Key;
use gpu_parquet::dataset::{Dataset, DatasetBatches, DatasetSource};
use gpu_parquet::decode::table::DeviceBatch;
use gpu_parquet::device_ffi::{self, ARROW_DEVICE_CPU, FFI_ArrowDeviceArray};
use gpu_parquet::{BackendKind, Decode, Reader, ReaderBuilder, Settings};
use pyo3::exceptions::{
    PyFileNotFoundError, PyImportError, PyPermissionError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

pyo3::create_exception!(
    _gpu_parquet,
    GpuParquetError,
    PyRuntimeError,
    "A read failed (the message names the file, column and row group where it can)."
);

/// A library error as the exception a Python user expects: a file that is not there is a
/// `FileNotFoundError`, one that may not be read a `PermissionError`, the rest `GpuParquetError`.
fn err(e: gpu_parquet::Error) -> PyErr {
    if let gpu_parquet::Error::Io { source, .. } = &e {
        match source.kind() {
            std::io::ErrorKind::NotFound => return PyFileNotFoundError::new_err(e.to_string()),
            std::io::ErrorKind::PermissionDenied => return PyPermissionError::new_err(e.to_string()),
            _ => {}
        }
    }
    GpuParquetError::new_err(e.to_string())
}

/// Settings from the arguments given (`flags`, each with the Python argument that gave it) and the
/// environment. A bad argument is a `ValueError` naming the argument (`threads=1000000: ...`), not the
/// CLI flag the library names.
fn settings_from(flags: &[(Key, &str, String)]) -> PyResult<Settings> {
    let keyed: Vec<(Key, String)> = flags.iter().map(|(k, _, v)| (*k, v.clone())).collect();
    Settings::from_env(&keyed).map_err(|e| {
        if let gpu_parquet::Error::Config { setting, message } = &e {
            for (key, arg, value) in flags {
                if *setting == format!("{} {value}", key.flag()) {
                    return PyValueError::new_err(format!("{arg}={value}: {message}"));
                }
            }
            // A GPU_PARQUET_* variable: its name is what the user must fix.
            return PyValueError::new_err(e.to_string());
        }
        err(e)
    })
}

/// The smallest and largest budget accepted, as the library's `--memory-limit-mb` bounds (1 MiB .. 1 PiB).
const MEMORY_LIMIT_BYTES: (u64, u64) = (1 << 20, 1 << 50);

/// `memory_limit=` (int bytes or a size string) as bytes, checked against [`MEMORY_LIMIT_BYTES`].
fn memory_limit_bytes(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let shown = value.repr().map(|r| r.to_string()).unwrap_or_default();
    let bytes = if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(
            "memory_limit: expected an int (bytes) or a size such as \"64MiB\", not a bool",
        ));
    } else if let Ok(s) = value.extract::<String>() {
        s.parse::<gpu_parquet::ByteSize>().map(|b| b.0).map_err(|_| {
            PyValueError::new_err(format!(
                "memory_limit={shown}: expected bytes or a size such as \"64MiB\", \"2GiB\", \"1.5GB\""
            ))
        })?
    } else if value.is_instance_of::<pyo3::types::PyInt>() {
        value
            .extract::<u64>()
            .map_err(|_| PyValueError::new_err(format!("memory_limit={shown}: must not be negative")))?
    } else {
        return Err(PyTypeError::new_err(format!(
            "memory_limit: expected an int (bytes) or a size string such as \"64MiB\", got {}",
            value.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        )));
    };
    let (lo, hi) = MEMORY_LIMIT_BYTES;
    if !(lo..=hi).contains(&bytes) {
        return Err(PyValueError::new_err(format!(
            "memory_limit={shown}: {bytes} bytes is outside 1MiB .. 1PiB"
        )));
    }
    Ok(bytes)
}

/// `columns=`: a list (or other sequence) of names, or one name as a str.
fn column_names(value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(one) = value.extract::<String>() {
        return Ok(vec![one]);
    }
    value
        .extract::<Vec<String>>()
        .map_err(|_| PyTypeError::new_err("columns: expected a str or a list of str"))
}

/// What a table holds.
enum Columns {
    /// Decoded on the GPU, one batch per decode step (shared: each export keeps its batch alive).
    Device(Vec<Arc<DeviceBatch>>),
    /// Decoded on the host (arrow-rs).
    Host(Vec<RecordBatch>),
}

/// The result of `gpu_parquet.read`.
#[pyclass(module = "gpu_parquet", name = "Table", frozen)]
struct Table {
    schema: SchemaRef,
    columns: Columns,
    num_rows: usize,
    report_json: String,
}

fn capsule<'py, T: Send + 'static>(py: Python<'py>, value: T, name: &str) -> PyResult<Bound<'py, PyCapsule>> {
    let name = CString::new(name).map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyCapsule::new(py, value, Some(name))
}

/// A raw array or stream moved into a capsule (pyarrow and pylibcudf take it from there; the capsule
/// releases what is left when it goes).
struct Owned<T>(T);
// SAFETY: the C structs are plain data plus a release callback that frees memory the export owns;
// nothing ties them to the creating thread.
unsafe impl<T> Send for Owned<T> {}

impl Table {
    fn host_batches(&self) -> PyResult<Vec<RecordBatch>> {
        match &self.columns {
            Columns::Host(b) => Ok(b.clone()),
            Columns::Device(b) => b.iter().map(|b| b.to_host().map_err(err)).collect(),
        }
    }

    fn host_device_array(batch: &RecordBatch) -> PyResult<FFI_ArrowDeviceArray> {
        let array = FFI_ArrowArray::new(&StructArray::from(batch.clone()).into());
        let array = std::mem::ManuallyDrop::new(array);
        // SAFETY: device_ffi's FFI_ArrowArray has arrow-rs's layout (both the specification's; the
        // crate's tests check the sizes); the bytes move and arrow-rs's copy is never dropped, so the
        // array is released once, by its new owner.
        let ours: device_ffi::FFI_ArrowArray =
            unsafe { std::ptr::read(&*array as *const FFI_ArrowArray as *const device_ffi::FFI_ArrowArray) };
        Ok(FFI_ArrowDeviceArray {
            array: ours,
            device_id: -1,
            device_type: ARROW_DEVICE_CPU,
            sync_event: std::ptr::null_mut(),
            reserved: [0; 3],
        })
    }
}

fn struct_schema(schema: &SchemaRef) -> PyResult<FFI_ArrowSchema> {
    device_ffi::struct_schema(schema).map_err(err)
}

#[pymethods]
impl Table {
    /// Rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.num_rows
    }

    /// Column names.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema.fields().iter().map(|f| f.name().clone()).collect()
    }

    /// "cuda" when the columns are in device memory, "cpu" when on the host.
    #[getter]
    fn device(&self) -> &'static str {
        match self.columns {
            Columns::Device(_) => "cuda",
            Columns::Host(_) => "cpu",
        }
    }

    /// Batches (decode steps).
    #[getter]
    fn num_batches(&self) -> usize {
        match &self.columns {
            Columns::Device(b) => b.len(),
            Columns::Host(b) => b.len(),
        }
    }

    /// The read's report as JSON text (`gpu_parquet.Table.report` parses it).
    #[getter]
    fn report_json(&self) -> &str {
        &self.report_json
    }

    /// The Arrow PyCapsule device interface: the table as (schema, device array) capsules. In device
    /// memory, a table of several batches (decode steps) has no single array without a copy: read it
    /// with `steps=1`, or take `__arrow_c_device_stream__`.
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
        kwargs: Option<Bound<'py, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = (requested_schema, kwargs);
        let (schema, array) = match &self.columns {
            Columns::Device(b) if b.len() == 1 => device_ffi::export_device_batch(b[0].clone()).map_err(err)?,
            Columns::Device(b) => {
                return Err(PyValueError::new_err(format!(
                    "the table has {} batches (decode steps) in device memory, and one array of them would be a copy: read with steps=1, or use __arrow_c_device_stream__",
                    b.len()
                )));
            }
            // Host batches are joined (a host copy, as any host consumer would make).
            Columns::Host(b) => {
                let one = arrow::compute::concat_batches(&self.schema, b)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                (struct_schema(&self.schema)?, Self::host_device_array(&one)?)
            }
        };
        let s = capsule(py, schema, "arrow_schema")?;
        let a = capsule(py, Owned(array), "arrow_device_array")?;
        PyTuple::new(py, [s.into_any(), a.into_any()])
    }

    /// The Arrow PyCapsule device stream interface: every batch, in order.
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
        kwargs: Option<Bound<'py, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = (requested_schema, kwargs);
        let stream = match &self.columns {
            Columns::Device(b) => device_ffi::export_device_batches(self.schema.clone(), b.clone()),
            Columns::Host(b) => {
                let arrays = b.iter().map(Self::host_device_array).collect::<PyResult<Vec<_>>>()?;
                device_ffi::export_arrays(self.schema.clone(), ARROW_DEVICE_CPU, arrays)
            }
        };
        capsule(py, Owned(stream), "arrow_device_array_stream")
    }

    /// The Arrow PyCapsule stream interface (host memory: device columns are copied back first).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches = self.host_batches()?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), self.schema.clone());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        capsule(py, Owned(stream), "arrow_array_stream")
    }

    /// The read's report (per-column path counters, and the decode report on the GPU) as a dict.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.call_method1("loads", (self.report_json.as_str(),))
    }

    /// A `pyarrow.Table` in host memory (device columns are copied back). Needs pyarrow:
    /// `pip install gpu-parquet[arrow]`.
    fn to_arrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let pyarrow = py.import("pyarrow").map_err(|e| {
            let missing = PyImportError::new_err(
                "Table.to_arrow() needs pyarrow, an optional dependency: pip install gpu-parquet[arrow]",
            );
            missing.set_cause(py, Some(e));
            missing
        })?;
        pyarrow.call_method1("table", (slf,))
    }

    fn __len__(&self) -> usize {
        self.num_rows
    }

    fn __repr__(&self) -> String {
        format!(
            "gpu_parquet.Table({} rows, {} columns, {} batches on {})",
            self.num_rows,
            self.schema.fields().len(),
            self.num_batches(),
            self.device()
        )
    }
}

/// What every read function takes besides its source: the one place where arguments become
/// `ReaderBuilder` settings, so an argument (as `filters=` was) is added here once for all of them.
struct ReadOptions {
    columns: Option<Vec<String>>,
    row_groups: Option<Vec<usize>>,
    backend: BackendKind,
    settings: Settings,
    /// `filters=` (issue 43): given to the reader by `read`, to the dataset by the others.
    filter: Option<gpu_parquet::filter::Expr>,
    /// `decode=` of `read_dataset` and `iter_batches` (`read` chooses its own way).
    decode: Decode,
    /// `filter_passes=`.
    filter_passes: gpu_parquet::filter::FilterPasses,
}

impl ReadOptions {
    /// Checks the arguments: a bad value is a `ValueError` naming the argument, a wrong type a
    /// `TypeError`; `memory_limit_mb` warns that it is deprecated.
    #[allow(clippy::too_many_arguments)]
    fn from_args(
        py: Python<'_>,
        columns: Option<Bound<'_, PyAny>>,
        row_groups: Option<Vec<usize>>,
        backend: &str,
        device: Option<usize>,
        threads: Option<usize>,
        memory_limit: Option<Bound<'_, PyAny>>,
        steps: Option<usize>,
        trust_compressed: bool,
        nvcomp: Option<String>,
        memory_limit_mb: Option<u64>,
    ) -> PyResult<Self> {
        let columns = columns.map(|c| column_names(&c)).transpose()?;
        let memory_limit = memory_limit.map(|m| memory_limit_bytes(&m)).transpose()?;
        if memory_limit_mb.is_some() {
            if memory_limit.is_some() {
                return Err(PyValueError::new_err(
                    "memory_limit and memory_limit_mb: give one (memory_limit_mb is deprecated)",
                ));
            }
            let text =
                CString::new("memory_limit_mb is deprecated: use memory_limit (bytes, or a size such as \"64MiB\")")
                    .expect("no NUL in the text");
            PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyDeprecationWarning>(), &text, 2)?;
        }
        let mut flags: Vec<(Key, &str, String)> = Vec::new();
        if let Some(d) = device {
            flags.push((Key::Device, "device", d.to_string()));
        }
        if let Some(t) = threads {
            flags.push((Key::Threads, "threads", t.to_string()));
        }
        if let Some(m) = memory_limit_mb {
            flags.push((Key::MemoryLimit, "memory_limit_mb", m.to_string()));
        }
        if let Some(s) = steps {
            flags.push((Key::DecodeSteps, "steps", s.to_string()));
        }
        if trust_compressed {
            flags.push((Key::TrustCompressed, "trust_compressed", "1".into()));
        }
        if let Some(n) = nvcomp {
            flags.push((Key::Nvcomp, "nvcomp", n));
        }
        let mut settings = settings_from(&flags)?;
        if memory_limit.is_some() {
            settings.memory_limit = memory_limit;
        }
        let backend: BackendKind = backend
            .parse()
            .map_err(|e: String| PyValueError::new_err(format!("backend={backend:?}: {e}")))?;
        Ok(Self {
            columns,
            row_groups,
            backend,
            settings,
            filter: None,
            decode: Decode::Auto,
            filter_passes: gpu_parquet::filter::FilterPasses::Auto,
        })
    }

    /// These options with `filter_passes=` checked: None (auto: two passes where they save time), 2
    /// (the filter's columns first) or 1.
    fn with_filter_passes(mut self, passes: Option<u8>) -> PyResult<Self> {
        self.filter_passes = match passes {
            None => gpu_parquet::filter::FilterPasses::Auto,
            Some(2) => gpu_parquet::filter::FilterPasses::Two,
            Some(1) => gpu_parquet::filter::FilterPasses::One,
            Some(n) => {
                return Err(PyValueError::new_err(format!(
                    "filter_passes={n}: expected None, 1 or 2"
                )));
            }
        };
        Ok(self)
    }

    /// These options with a dataset read's `decode=` and `filters=` checked.
    fn for_dataset(mut self, decode: &str, filters: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        self.filter = filters.map(|f| filter_from_py(&f)).transpose()?;
        self.decode = decode_choice(decode)?;
        Ok(self)
    }

    /// A reader of one file configured by these options.
    fn configure(&self, builder: ReaderBuilder) -> ReaderBuilder {
        let mut builder = builder
            .with_settings(&self.settings)
            .with_backend(self.backend)
            .with_decode(self.decode);
        if let Some(io) = shared_backend(self.backend, &self.settings) {
            builder = builder.with_io(io);
        }
        if let Some(c) = &self.columns {
            builder = builder.with_columns(c.clone());
        }
        if let Some(g) = &self.row_groups {
            builder = builder.with_row_groups(g.clone());
        }
        if let Some(f) = &self.filter {
            builder = builder.with_filter(f.clone());
        }
        builder.with_filter_passes(self.filter_passes)
    }
}

/// `filters=`: a str in the CLI's syntax ("a >= 3 and s in ('x', 'y')"), or pyarrow's DNF form: a
/// list of (column, op, value) tuples (all must hold), or a list of such lists (any must hold).
fn filter_from_py(filters: &Bound<'_, PyAny>) -> PyResult<gpu_parquet::filter::Expr> {
    use gpu_parquet::filter::{DnfTerm, Expr};
    if let Ok(text) = filters.extract::<String>() {
        return Expr::parse(&text).map_err(|e| PyValueError::new_err(format!("filters: {e}")));
    }
    let shape = "filters: expected a str, a list of (column, op, value) tuples, or a list of such lists";
    let outer: Vec<Bound<'_, PyAny>> = filters.extract().map_err(|_| PyTypeError::new_err(shape))?;
    let conjunctions: Vec<Vec<Bound<'_, PyAny>>> = if outer.iter().all(|t| t.is_instance_of::<PyTuple>()) {
        vec![outer]
    } else {
        outer
            .iter()
            .map(|c| c.extract::<Vec<Bound<'_, PyAny>>>())
            .collect::<PyResult<_>>()
            .map_err(|_| PyTypeError::new_err(shape))?
    };
    let mut dnf = Vec::new();
    for conj in conjunctions {
        let mut terms = Vec::new();
        for t in conj {
            let (column, op, value): (String, String, Bound<'_, PyAny>) = t
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("{shape}; got {t}")))?;
            let values = if op.to_ascii_lowercase().contains("in") {
                let items: Vec<Bound<'_, PyAny>> = value
                    .try_iter()
                    .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                    .map_err(|_| PyTypeError::new_err(format!("filters: '{op}' on {column} takes a list of values")))?;
                items.iter().map(literal_from_py).collect::<PyResult<Vec<_>>>()?
            } else {
                vec![literal_from_py(&value)?]
            };
            terms.push(DnfTerm { column, op, values });
        }
        dnf.push(terms);
    }
    Expr::from_dnf(&dnf).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A Python value as a filter literal: bool, int, float, decimal.Decimal, str, datetime.date or
/// datetime.datetime (as ISO text, typed by the column).
fn literal_from_py(v: &Bound<'_, PyAny>) -> PyResult<gpu_parquet::filter::Literal> {
    use gpu_parquet::filter::Literal;
    use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
    if v.is_instance_of::<PyBool>() {
        return Ok(Literal::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(Literal::Number(v.str()?.to_string()));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Literal::Number(v.repr()?.to_string()));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Literal::Str(v.extract()?));
    }
    let type_name = v.get_type().name()?.to_string();
    match type_name.as_str() {
        "Decimal" => Ok(Literal::Number(v.str()?.to_string())),
        "date" | "datetime" | "Timestamp" => Ok(Literal::Str(v.call_method0("isoformat")?.extract()?)),
        _ => Err(PyTypeError::new_err(format!(
            "filters: a value of type {type_name} ({v}): expected bool, int, float, Decimal, str, date or datetime"
        ))),
    }
}

/// `decode=` as the reader's [`Decode`]: a bad value is a `ValueError`; "gpu" on a machine without
/// a GPU a `GpuParquetError` saying so at once (not at the first batch), "auto" the host there.
fn decode_choice(decode: &str) -> PyResult<Decode> {
    let choice = match decode {
        "auto" => Decode::Auto,
        "host" => Decode::Host,
        "gpu" => Decode::Gpu,
        _ => {
            return Err(PyValueError::new_err(format!(
                "decode={decode:?}: expected \"auto\", \"gpu\" or \"host\""
            )));
        }
    };
    if choice == Decode::Gpu {
        if let Err(why) = gpu_parquet::gpu::cuda_present() {
            return Err(GpuParquetError::new_err(format!(
                "decode=\"gpu\": no GPU here ({why}); decode=\"auto\" or \"host\" decodes on the host"
            )));
        }
        if gpu_parquet::gpu::GpuContext::device_count() == 0 {
            return Err(GpuParquetError::new_err(
                "decode=\"gpu\": no GPU here (no CUDA device); decode=\"auto\" or \"host\" decodes on the host",
            ));
        }
    }
    Ok(choice)
}

/// Reads a Parquet file into a `Table`: onto the GPU (decoded there) where the backend reads into
/// device memory, else into host memory (decoded by arrow-rs). Settings not given come from the
/// `GPU_PARQUET_*` environment variables. The read releases the GIL.
///
/// Arguments:
///     path: the Parquet file (str or path-like).
///     columns: the columns to read, a list of names (a single str is one column); None reads all.
///     row_groups: the row groups to read, a list of indices; None reads all.
///     backend: how bytes are read: "auto" (cuFile where it works, else the staged path), "cufile",
///         "staged" (pread into pinned memory, then copied to the GPU) or "host" (no GPU).
///     decode: where pages are decoded: "auto" (on the GPU when the backend reads into device
///         memory), "gpu" or "host" (arrow-rs).
///     device: the CUDA device ordinal (default 0, or GPU_PARQUET_DEVICE).
///     threads: I/O threads, 0 .. 1024 (0: the library's default).
///     memory_limit: the device-memory budget of the read, as bytes (int) or a size string such as
///         "64MiB", "2GiB", "1.5GB" (1 MiB .. 1 PiB); None: from free device memory.
///     steps: decode steps (batches) the read is split into, 1 .. 4096; None: as the budget needs.
///     trust_compressed: skip checking compressed page sizes against the page headers.
///     nvcomp: the nvCOMP library to load for decompression (a path), or "off".
///     progress: True for a progress line on stderr, or a callable taking a dict (steps_done,
///         steps, rows_done, rows, bytes_done, bytes) after each step; an exception it raises is
///         raised from read.
///     memory_limit_mb: deprecated (DeprecationWarning): the budget in MiB; use memory_limit.
///     filters: only the rows that pass: a str ("l_shipdate >= '1994-01-01' and l_quantity < 24")
///         or pyarrow's DNF form (a list of (column, op, value) tuples, or a list of such lists; ops
///         =, ==, !=, <, <=, >, >=, in, not in), with pyarrow's results. Row groups are pruned by
///         statistics, bloom filters and the page index first (report["pruning"]); a GPU decode
///         then keeps the matching rows on the GPU (report["decode"]["filter"]: where it ran, rows
///         kept, or why it ran on the host).
///     filter_passes: with filters, 2 reads the filter's columns first, then only the other
///         columns' pages that hold a matching row (report["passes"] on the host,
///         report["decode"]["filter"]["passes"] on the GPU: the bytes of each pass); 1 reads every
///         column's pages of the rows pruning kept at once; None (default) reads a step in one pass
///         where its other columns' pages are few and in the page cache, else in two.
///
/// Raises:
///     FileNotFoundError: the file is not there. PermissionError: it may not be read.
///     ValueError: an argument has a value outside what it accepts (the message names it).
///     TypeError: an argument has the wrong type.
///     GpuParquetError: the read failed (the message names the file, column and row group).
#[pyfunction]
#[pyo3(signature = (path, columns=None, row_groups=None, backend="auto", decode="auto", device=None, threads=None, memory_limit=None, steps=None, trust_compressed=false, nvcomp=None, progress=None, memory_limit_mb=None, filters=None, filter_passes=None))]
#[allow(clippy::too_many_arguments)]
fn read(
    py: Python<'_>,
    path: std::path::PathBuf,
    columns: Option<Bound<'_, PyAny>>,
    row_groups: Option<Vec<usize>>,
    backend: &str,
    decode: &str,
    device: Option<usize>,
    threads: Option<usize>,
    memory_limit: Option<Bound<'_, PyAny>>,
    steps: Option<usize>,
    trust_compressed: bool,
    nvcomp: Option<String>,
    progress: Option<Bound<'_, PyAny>>,
    memory_limit_mb: Option<u64>,
    filters: Option<Bound<'_, PyAny>>,
    filter_passes: Option<u8>,
) -> PyResult<Table> {
    let filter = filters.map(|f| filter_from_py(&f)).transpose()?;
    let mut options = ReadOptions::from_args(
        py,
        columns,
        row_groups,
        backend,
        device,
        threads,
        memory_limit,
        steps,
        trust_compressed,
        nvcomp,
        memory_limit_mb,
    )?
    .with_filter_passes(filter_passes)?;
    options.filter = filter;
    let (progress, callback_error) = progress_hook(&path, progress)?;
    let result = read_with(py, path, options, decode, progress);
    // An exception raised by the progress callback is the read's outcome, whatever came after it.
    if let Some(e) = callback_error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    result
}

/// The read itself, once the arguments are checked.
fn read_with(
    py: Python<'_>,
    path: std::path::PathBuf,
    options: ReadOptions,
    decode: &str,
    progress: Option<ProgressFn>,
) -> PyResult<Table> {
    let decode = decode_choice(decode)?;
    py.detach(move || -> PyResult<Table> {
        let mut builder = options.configure(Reader::builder(&path));
        if let Some(p) = progress {
            builder = builder.with_progress(p);
        }
        let reader = builder.build().map_err(err)?;
        let on_gpu = decode == Decode::Gpu || (decode == Decode::Auto && reader.io().is_device());
        let pruning = reader.pruning().map(|p| serde_json::to_value(p).unwrap_or_default());
        if on_gpu {
            let r = reader.read_device().map_err(err)?;
            let mut report = serde_json::to_value(&r.io).unwrap_or_default();
            if let Some(o) = report.as_object_mut() {
                o.insert("decode".into(), serde_json::to_value(&r.decode).unwrap_or_default());
                if let Some(p) = &pruning {
                    o.insert("pruning".into(), p.clone());
                }
            }
            // The GPU filtered the rows already (report["decode"]["filter"]), unless it could not
            // run the filter: then the exact filter is applied on the host, as the report says.
            if r.filtered_on_host() {
                let batch = r.to_host().map_err(err)?;
                return Ok(Table {
                    schema: batch.schema(),
                    num_rows: batch.num_rows(),
                    columns: Columns::Host(vec![batch]),
                    report_json: report.to_string(),
                });
            }
            let num_rows = r.table.num_rows();
            Ok(Table {
                schema: r.table.schema.clone(),
                columns: Columns::Device(r.table.batches.into_iter().map(Arc::new).collect()),
                num_rows,
                report_json: report.to_string(),
            })
        } else {
            // With a filter, its columns first (unless filter_passes=1).
            let r = reader.read_host().map_err(err)?;
            let mut report = serde_json::to_value(&r.io).unwrap_or_default();
            if let Some(o) = report.as_object_mut() {
                if let Some(p) = pruning {
                    o.insert("pruning".into(), p);
                }
                if let Some(p) = &r.passes {
                    o.insert("passes".into(), serde_json::to_value(p).unwrap_or_default());
                }
            }
            Ok(Table {
                schema: r.table.schema.clone(),
                num_rows: r.table.num_rows(),
                columns: Columns::Host(r.table.batches),
                report_json: report.to_string(),
            })
        }
    })
}

/// Batches read one step at a time (`iter_batches`, `read_dataset(...)` streamed): each `next()` is a
/// `Table` of one batch in host memory; the next is read and decoded in the background meanwhile.
#[pyclass(module = "gpu_parquet", name = "Batches", frozen)]
struct Batches {
    schema: SchemaRef,
    batches: std::sync::Mutex<Option<DatasetBatches>>,
    /// Files of the source, and of those the files read (the others ruled out by partition terms).
    files: (usize, usize),
}

#[pymethods]
impl Batches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Table>> {
        let next = py.detach(|| {
            let mut guard = self.batches.lock().unwrap_or_else(|p| p.into_inner());
            let next = guard.as_mut().and_then(|b| b.next());
            if !matches!(next, Some(Ok(_))) {
                // Ended or failed: stop the background thread now, not when the object goes.
                guard.take();
            }
            next
        });
        match next {
            None => Ok(None),
            Some(Err(e)) => Err(err(e)),
            Some(Ok(b)) => Ok(Some(Table {
                schema: b.batch.schema(),
                num_rows: b.batch.num_rows(),
                columns: Columns::Host(vec![b.batch]),
                report_json: "{}".into(),
            })),
        }
    }

    /// The schema's column names (the files' selected columns, then the partition columns).
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema.fields().iter().map(|f| f.name().clone()).collect()
    }
}

/// The dataset's batches under `options`, and their schema. The dataset chooses the columns
/// (`Dataset::select_columns`: a partition column only when named, all without `columns`, as the
/// CLI's `dataset --columns`) and takes the filter (`Dataset::with_filter`: partition terms skip
/// files), so the readers get neither from `options`.
fn dataset_batches(py: Python<'_>, source: DatasetSource, mut options: ReadOptions) -> PyResult<Batches> {
    let columns = options.columns.take();
    let filter = options.filter.take();
    let (schema, batches, files) = py.detach(move || -> PyResult<_> {
        let mut ds = Dataset::open(source).map_err(err)?;
        let all = ds.files().len();
        if let Some(f) = filter {
            ds = ds.with_filter(f).map_err(err)?;
        }
        if let Some(names) = &columns {
            ds = ds.select_columns(names).map_err(err)?;
        }
        let schema = ds.schema().clone();
        let files = (all, ds.files().len());
        let batches = ds.batches(move |b| options.configure(b));
        Ok((schema, batches, files))
    })?;
    Ok(Batches {
        schema,
        batches: std::sync::Mutex::new(Some(batches)),
        files,
    })
}

/// A dataset source from `path_or_files`: a directory, a glob pattern, one file, or a list of files.
fn dataset_source(path_or_files: &Bound<'_, PyAny>) -> PyResult<DatasetSource> {
    if let Ok(one) = path_or_files.extract::<std::path::PathBuf>() {
        let text = one.to_string_lossy().into_owned();
        return Ok(DatasetSource::from_args(&[text]));
    }
    path_or_files
        .extract::<Vec<std::path::PathBuf>>()
        .map(DatasetSource::Files)
        .map_err(|_| PyTypeError::new_err("path_or_files: expected a path (str or path-like) or a list of paths"))
}

/// Reads many Parquet files of one schema as one `Table` in host memory, file by file in path
/// order. Hidden files (`.x`, `_SUCCESS`) are skipped; in a directory, hive partition folders
/// (`key=value/`) become columns after the files' own (int32 when every value of the key fits, else
/// int64 when every value is an integer, else string; `__HIVE_DEFAULT_PARTITION__` is null).
///
/// Arguments:
///     path_or_files: a directory (walked recursively), a glob pattern ("data/*.parquet"), one file,
///         or a list of files (read in the order given).
///     columns: the columns to read, a list of names (a single str is one column): the files'
///         columns (top-level names, or dotted paths to nested leaves) and partition columns. A
///         partition column is read only when named here; None reads every column, partition
///         columns included (as pyarrow.dataset does).
///     row_groups: the row groups to read in every file, a list of indices; None reads all.
///     backend: how bytes are read: "auto" (cuFile where it works, else the staged path; host
///         memory without a GPU), "cufile", "staged" or "host" (no GPU).
///     decode: where pages are decoded: "auto" (on the GPU when the backend reads into device
///         memory, else on the host), "gpu" (a GpuParquetError at once on a machine without a GPU)
///         or "host" (arrow-rs). GPU-decoded columns are copied back to host memory.
///     device: the CUDA device ordinal (default 0, or GPU_PARQUET_DEVICE).
///     threads: I/O threads, 0 .. 1024 (0: the library's default).
///     memory_limit: what each file's scan may hold at once, as bytes (int) or a size string such
///         as "64MiB", "2GiB", "1.5GB" (1 MiB .. 1 PiB); None: the library's default.
///     steps: decode steps per file on the GPU, 1 .. 4096; None: as the budget needs.
///     trust_compressed: skip checking compressed page sizes against the page headers.
///     nvcomp: the nvCOMP library to load for decompression (a path), or "off".
///     memory_limit_mb: deprecated (DeprecationWarning): the budget in MiB; use memory_limit.
///     filters: only the rows that pass, as `read`'s filters= (a str, or pyarrow's DNF form). Its
///         top-level "and" terms on partition columns skip whole files (a partition column may be
///         tested without being in columns); the other terms prune each file's row groups and pages
///         and filter its rows. A term mixing partition columns and the files' columns under "or"
///         or "not" is a GpuParquetError naming the terms.
///     stream: False returns one `Table`; True returns a `Batches` iterator of one-batch tables
///         (read and decoded one step of row groups at a time, within memory_limit).
///     filter_passes: None (default), 2 (the filter's columns first, then the other columns'
///         pages holding matching rows) or 1, as read.
///
/// The `Table`'s report gives files (of the source), files_read, files_pruned_by_partition_filter
/// and rows.
///
/// Raises:
///     FileNotFoundError: a file is not there. PermissionError: one may not be read.
///     ValueError: an argument has a value outside what it accepts (the message names it).
///     TypeError: an argument has the wrong type.
///     GpuParquetError: the read failed (the message names the file, column and row group); a file
///         whose schema differs from the first names both.
#[pyfunction]
#[pyo3(signature = (path_or_files, columns=None, row_groups=None, backend="auto", decode="auto", device=None, threads=None, memory_limit=None, steps=None, trust_compressed=false, nvcomp=None, memory_limit_mb=None, filters=None, stream=false, filter_passes=None))]
#[allow(clippy::too_many_arguments)]
fn read_dataset<'py>(
    py: Python<'py>,
    path_or_files: Bound<'py, PyAny>,
    columns: Option<Bound<'py, PyAny>>,
    row_groups: Option<Vec<usize>>,
    backend: &str,
    decode: &str,
    device: Option<usize>,
    threads: Option<usize>,
    memory_limit: Option<Bound<'py, PyAny>>,
    steps: Option<usize>,
    trust_compressed: bool,
    nvcomp: Option<String>,
    memory_limit_mb: Option<u64>,
    filters: Option<Bound<'py, PyAny>>,
    stream: bool,
    filter_passes: Option<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    let source = dataset_source(&path_or_files)?;
    let options = ReadOptions::from_args(
        py,
        columns,
        row_groups,
        backend,
        device,
        threads,
        memory_limit,
        steps,
        trust_compressed,
        nvcomp,
        memory_limit_mb,
    )?
    .for_dataset(decode, filters)?
    .with_filter_passes(filter_passes)?;
    let batches = dataset_batches(py, source, options)?;
    if stream {
        return Ok(Bound::new(py, batches)?.into_any());
    }
    let schema = batches.schema.clone();
    let (files, files_read) = batches.files;
    let all = py.detach(|| {
        let mut guard = batches.batches.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .take()
            .into_iter()
            .flatten()
            .map(|b| b.map(|b| b.batch))
            .collect::<gpu_parquet::Result<Vec<_>>>()
    });
    let all = all.map_err(err)?;
    let num_rows: usize = all.iter().map(|b| b.num_rows()).sum();
    let report = serde_json::json!({
        "files": files,
        "files_read": files_read,
        "files_pruned_by_partition_filter": files - files_read,
        "rows": num_rows,
    });
    let table = Table {
        schema: all.first().map(|b| b.schema()).unwrap_or(schema),
        num_rows,
        columns: Columns::Host(all),
        report_json: report.to_string(),
    };
    Ok(Bound::new(py, table)?.into_any())
}

/// Streams one Parquet file (or a dataset: a directory, glob or list, as `read_dataset`) as a
/// `Batches` iterator of one-batch `Table`s in host memory: row groups are read and decoded a step
/// at a time within memory_limit, the next one in the background while the caller works on the
/// current one. Stopping early (dropping the iterator) stops the reading.
///
/// Arguments:
///     path: the Parquet file, or a dataset source as read_dataset's path_or_files.
///     columns: the columns to read, a list of names or one name (partition columns of a dataset
///         only when named; None: all), as read_dataset.
///     row_groups: the row groups to read (in every file), a list of indices; None reads all.
///     backend: "auto", "cufile", "staged" or "host", as read.
///     decode: "auto" (the GPU when the backend reads into device memory, else the host), "gpu"
///         (a GpuParquetError at once on a machine without a GPU) or "host"; batches come back in
///         host memory either way.
///     device: the CUDA device ordinal (default 0, or GPU_PARQUET_DEVICE).
///     threads: I/O threads, 0 .. 1024 (0: the library's default).
///     memory_limit: what the scan may hold at once (the steps in flight), as bytes (int) or a size
///         string such as "256MiB" (1 MiB .. 1 PiB); None: the library's default.
///     steps: decode steps on the GPU, 1 .. 4096; None: as the budget needs.
///     trust_compressed: skip checking compressed page sizes against the page headers.
///     nvcomp: the nvCOMP library to load for decompression (a path), or "off".
///     memory_limit_mb: deprecated (DeprecationWarning): the budget in MiB; use memory_limit.
///     filters: only the rows that pass, a str or pyarrow's DNF form, as read_dataset.
///     filter_passes: None (default), 2 (the filter's columns first) or 1, as read.
///
/// Raises: as `read_dataset`; errors met while streaming are raised from `next()`.
#[pyfunction]
#[pyo3(signature = (path, columns=None, row_groups=None, backend="auto", decode="auto", device=None, threads=None, memory_limit=None, steps=None, trust_compressed=false, nvcomp=None, memory_limit_mb=None, filters=None, filter_passes=None))]
#[allow(clippy::too_many_arguments)]
fn iter_batches(
    py: Python<'_>,
    path: Bound<'_, PyAny>,
    columns: Option<Bound<'_, PyAny>>,
    row_groups: Option<Vec<usize>>,
    backend: &str,
    decode: &str,
    device: Option<usize>,
    threads: Option<usize>,
    memory_limit: Option<Bound<'_, PyAny>>,
    steps: Option<usize>,
    trust_compressed: bool,
    nvcomp: Option<String>,
    memory_limit_mb: Option<u64>,
    filters: Option<Bound<'_, PyAny>>,
    filter_passes: Option<u8>,
) -> PyResult<Batches> {
    let source = dataset_source(&path)?;
    let options = ReadOptions::from_args(
        py,
        columns,
        row_groups,
        backend,
        device,
        threads,
        memory_limit,
        steps,
        trust_compressed,
        nvcomp,
        memory_limit_mb,
    )?
    .for_dataset(decode, filters)?
    .with_filter_passes(filter_passes)?;
    dataset_batches(py, source, options)
}

/// The backend of the last read with the same kind, device and I/O policy, built on first use and kept
/// for the process: its pinned buffers, threads and cuFile driver are reused, since building them costs
/// more than reading a few hundred MB. `None` when it cannot be built (the read then builds its own and
/// reports why, naming the file).
fn shared_backend(kind: BackendKind, settings: &Settings) -> Option<Arc<gpu_parquet::io::select::AnyBackend>> {
    type Cache = Vec<(String, Arc<gpu_parquet::io::select::AnyBackend>)>;
    static BACKENDS: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = format!("{kind:?}|{}|{:?}", settings.device, settings.policy);
    let mut cache = BACKENDS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, b)) = cache.iter().find(|(k, _)| *k == key) {
        return Some(b.clone());
    }
    let b = Arc::new(gpu_parquet::io::select::AnyBackend::new(kind, &settings.policy, settings.device).ok()?);
    cache.push((key, b.clone()));
    Some(b)
}

/// `progress=True`: a line on stderr rewritten after each step; a callable: called with a dict
/// (`steps_done`, `steps`, `rows_done`, `rows`, `bytes_done`, `bytes`) from the read's threads, the GIL
/// taken for the call. The first exception it raises is kept (the callback is not called again) and
/// `read` raises it once the library returns: the library's progress hook cannot stop a read.
type ProgressFn = Box<dyn Fn(gpu_parquet::Progress) + Send + Sync>;
type CallbackError = Arc<std::sync::Mutex<Option<PyErr>>>;

fn progress_hook(
    path: &std::path::Path,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<(Option<ProgressFn>, CallbackError)> {
    let failed: CallbackError = Arc::default();
    let Some(p) = progress else { return Ok((None, failed)) };
    if p.is_instance_of::<pyo3::types::PyBool>() {
        if !p.extract::<bool>()? {
            return Ok((None, failed));
        }
        let name = path.display().to_string();
        return Ok((
            Some(Box::new(move |p: gpu_parquet::Progress| {
                eprint!(
                    "\rgpu_parquet: {name}: step {}/{}, {:.2}/{:.2} GB, {}/{} rows",
                    p.steps_done,
                    p.steps,
                    p.bytes_done as f64 / 1e9,
                    p.bytes as f64 / 1e9,
                    p.rows_done,
                    p.rows
                );
                if p.steps_done == p.steps {
                    eprintln!();
                }
            })),
            failed,
        ));
    }
    if !p.is_callable() {
        return Err(PyTypeError::new_err(
            "progress: expected True, False, None or a callable taking a dict",
        ));
    }
    let callback: Py<PyAny> = p.unbind();
    let keep = failed.clone();
    Ok((
        Some(Box::new(move |p: gpu_parquet::Progress| {
            let mut first = keep.lock().unwrap_or_else(|p| p.into_inner());
            if first.is_some() {
                return;
            }
            Python::attach(|py| {
                let call = || -> PyResult<()> {
                    let d = pyo3::types::PyDict::new(py);
                    d.set_item("steps_done", p.steps_done)?;
                    d.set_item("steps", p.steps)?;
                    d.set_item("rows_done", p.rows_done)?;
                    d.set_item("rows", p.rows)?;
                    d.set_item("bytes_done", p.bytes_done)?;
                    d.set_item("bytes", p.bytes)?;
                    callback.call1(py, (d,))?;
                    Ok(())
                };
                if let Err(e) = call() {
                    *first = Some(e);
                }
            })
        })),
        failed,
    ))
}

/// cuFile's own level-3 statistics (summed over GPUs) as the libcufile this package uses counts them:
/// for comparing another library's reads in the same process (KvikIO loads the same libcufile). The
/// object holds the cuFile driver open (statistics start when it opens and end when it closes).
#[pyclass(module = "gpu_parquet", name = "CufileStats", frozen)]
struct CufileStats {
    driver: Arc<gpu_parquet::gpu::cufile::CufileDriver>,
}

#[pymethods]
impl CufileStats {
    #[new]
    #[pyo3(signature = (device=0))]
    fn new(py: Python<'_>, device: usize) -> PyResult<Self> {
        py.detach(|| {
            let ctx = gpu_parquet::gpu::GpuContext::new(device).map_err(err)?;
            let params = gpu_parquet::gpu::cufile::CufileParams::default();
            let driver = gpu_parquet::gpu::cufile::CufileDriver::open(&ctx, &params).map_err(err)?;
            driver.stats().map_err(err)?;
            Ok(Self { driver })
        })
    }

    /// The counters now: `total_reads`, `nvfs_reads`, `posix_reads`, `read_bytes`.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let s = self.driver.stats().map_err(err)?;
        let d = pyo3::types::PyDict::new(py);
        d.set_item("total_reads", s.total_reads)?;
        d.set_item("nvfs_reads", s.nvfs_reads)?;
        d.set_item("posix_reads", s.posix_reads)?;
        d.set_item("read_bytes", s.read_bytes)?;
        Ok(d)
    }
}

/// What this machine offers (GPU, cuFile, nvidia-fs, O_DIRECT in `directory`), as JSON text.
#[pyfunction]
#[pyo3(signature = (directory=None, device=0))]
fn check_json(py: Python<'_>, directory: Option<std::path::PathBuf>, device: usize) -> PyResult<String> {
    let directory = directory.unwrap_or_else(|| ".".into());
    let settings = Settings::from_env(&[]).map_err(err)?;
    py.detach(move || {
        let report = gpu_parquet::check::check(&directory, device, &settings.cufile_config).map_err(err)?;
        Ok(serde_json::to_string(&report).unwrap_or_default())
    })
}

#[pymodule]
fn _gpu_parquet(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read, m)?)?;
    m.add_function(wrap_pyfunction!(read_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(iter_batches, m)?)?;
    m.add_function(wrap_pyfunction!(check_json, m)?)?;
    m.add_class::<Table>()?;
    m.add_class::<Batches>()?;
    m.add_class::<CufileStats>()?;
    m.add("GpuParquetError", m.py().get_type::<GpuParquetError>())?;
    Ok(())
}
