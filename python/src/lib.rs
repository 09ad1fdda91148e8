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
use gpu_parquet::decode::table::DeviceBatch;
use gpu_parquet::device_ffi::{self, ARROW_DEVICE_CPU, FFI_ArrowDeviceArray};
use gpu_parquet::{BackendKind, Reader, Settings};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

pyo3::create_exception!(
    _gpu_parquet,
    GpuParquetError,
    PyRuntimeError,
    "A read failed (the message names the file, column and row group where it can)."
);

fn err(e: gpu_parquet::Error) -> PyErr {
    GpuParquetError::new_err(e.to_string())
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

    /// A `pyarrow.Table` in host memory (device columns are copied back).
    fn to_arrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("pyarrow")?.call_method1("table", (slf,))
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

/// Reads a Parquet file: onto the GPU (decoded there) where the backend reads into device memory,
/// else into host memory (decoded by arrow-rs). Settings not given come from `GPU_PARQUET_*`.
#[pyfunction]
#[pyo3(signature = (path, columns=None, row_groups=None, backend="auto", decode="auto", device=None, threads=None, memory_limit_mb=None, steps=None, trust_compressed=false, nvcomp=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn read(
    py: Python<'_>,
    path: std::path::PathBuf,
    columns: Option<Vec<String>>,
    row_groups: Option<Vec<usize>>,
    backend: &str,
    decode: &str,
    device: Option<usize>,
    threads: Option<usize>,
    memory_limit_mb: Option<u64>,
    steps: Option<usize>,
    trust_compressed: bool,
    nvcomp: Option<String>,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<Table> {
    let progress = progress_hook(&path, progress)?;
    let mut flags: Vec<(Key, String)> = Vec::new();
    if let Some(d) = device {
        flags.push((Key::Device, d.to_string()));
    }
    if let Some(t) = threads {
        flags.push((Key::Threads, t.to_string()));
    }
    if let Some(m) = memory_limit_mb {
        flags.push((Key::MemoryLimit, m.to_string()));
    }
    if let Some(s) = steps {
        flags.push((Key::DecodeSteps, s.to_string()));
    }
    if trust_compressed {
        flags.push((Key::TrustCompressed, "1".into()));
    }
    if let Some(n) = nvcomp {
        flags.push((Key::Nvcomp, n));
    }
    let settings = Settings::from_env(&flags).map_err(err)?;
    let kind: BackendKind = backend
        .parse()
        .map_err(|e: String| PyValueError::new_err(format!("backend={backend:?}: {e}")))?;
    let decode = decode.to_string();
    if !["auto", "gpu", "host"].contains(&decode.as_str()) {
        return Err(PyValueError::new_err(format!(
            "decode={decode:?}: expected auto, gpu or host"
        )));
    }
    py.detach(move || -> PyResult<Table> {
        let mut builder = Reader::builder(&path).with_settings(&settings).with_backend(kind);
        if let Some(io) = shared_backend(kind, &settings) {
            builder = builder.with_io(io);
        }
        if let Some(c) = columns {
            builder = builder.with_columns(c);
        }
        if let Some(g) = row_groups {
            builder = builder.with_row_groups(g);
        }
        if let Some(p) = progress {
            builder = builder.with_progress(p);
        }
        let reader = builder.build().map_err(err)?;
        let on_gpu = decode == "gpu" || (decode == "auto" && reader.io().is_device());
        if on_gpu {
            let r = reader.read_device().map_err(err)?;
            let mut report = serde_json::to_value(&r.io).unwrap_or_default();
            if let Some(o) = report.as_object_mut() {
                o.insert("decode".into(), serde_json::to_value(&r.decode).unwrap_or_default());
            }
            let num_rows = r.table.num_rows();
            Ok(Table {
                schema: r.table.schema.clone(),
                columns: Columns::Device(r.table.batches.into_iter().map(Arc::new).collect()),
                num_rows,
                report_json: report.to_string(),
            })
        } else {
            let chunks = reader.read().map_err(err)?;
            let report = serde_json::to_value(chunks.report()).unwrap_or_default();
            let table = chunks.decode().map_err(err)?;
            Ok(Table {
                schema: table.schema.clone(),
                num_rows: table.num_rows(),
                columns: Columns::Host(table.batches),
                report_json: report.to_string(),
            })
        }
    })
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
/// taken for the call (an exception it raises is reported as unraisable, and the read goes on).
type ProgressFn = Box<dyn Fn(gpu_parquet::Progress) + Send + Sync>;

fn progress_hook(path: &std::path::Path, progress: Option<Bound<'_, PyAny>>) -> PyResult<Option<ProgressFn>> {
    let Some(p) = progress else { return Ok(None) };
    if p.is_instance_of::<pyo3::types::PyBool>() {
        if !p.extract::<bool>()? {
            return Ok(None);
        }
        let name = path.display().to_string();
        return Ok(Some(Box::new(move |p: gpu_parquet::Progress| {
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
        })));
    }
    if !p.is_callable() {
        return Err(PyValueError::new_err(
            "progress: expected True, False, None or a callable taking a dict",
        ));
    }
    let callback: Py<PyAny> = p.unbind();
    Ok(Some(Box::new(move |p: gpu_parquet::Progress| {
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
                e.write_unraisable(py, Some(callback.bind(py)));
            }
        })
    })))
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
    m.add_function(wrap_pyfunction!(check_json, m)?)?;
    m.add_class::<Table>()?;
    m.add_class::<CufileStats>()?;
    m.add("GpuParquetError", m.py().get_type::<GpuParquetError>())?;
    Ok(())
}
