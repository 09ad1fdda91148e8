//! A real computation on columns loaded onto the GPU, in a kernel of its own: on the benchmark file
//! (`../shared/bench/make_bench_files.py`: `b` int32 in 0..1000, `c` float64, `d` float32),
//!
//! ```sql
//! SELECT b, SUM(c), COUNT(*) FROM file WHERE d > THRESHOLD GROUP BY b
//! ```
//!
//! The columns are read and decoded on the GPU (`Reader::read_device`), and the kernel below reads
//! the decoded device buffers in place (values and validity bitmaps, Arrow layout: no copy, no
//! conversion). The same query then runs on the host over arrow-rs's read of the file, with arrow's
//! compute kernels for the filter; counts must be equal and sums equal to 1e-9 (the order of the
//! additions differs). Any file with an integer column and two floating-point columns works:
//! `--group COL --sum COL --filter COL`.
//!
//! Usage: `cargo run --release --example analytics_job -- FILE [THRESHOLD] [--group b --sum c --filter d]`

use std::collections::BTreeMap;
use std::time::Instant;

use arrow::array::{Array, AsArray};
use arrow::compute::filter;
use arrow::datatypes::{DataType, Float32Type, Float64Type, Int32Type};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_parquet::decode::table::DeviceArray;
use gpu_parquet::gpu::nvrtc::KernelModule;
use gpu_parquet::gpu::{DeviceBuffer, GpuContext, Stream};
use gpu_parquet::{BackendKind, Reader, Settings};

/// Groups the kernel accumulates (keys outside 0..GROUPS are counted apart).
const GROUPS: usize = 1024;

/// One block's partial sums in shared memory, then one atomic add per group and block.
const KERNEL: &str = r#"
#define GROUPS 1024
__device__ inline bool valid(const unsigned char* bits, unsigned long long i) {
    return bits == 0 || ((bits[i >> 3] >> (i & 7)) & 1);
}
extern "C" __global__ void group_sum(const int* key, const unsigned char* key_valid,
                                     const double* value, const unsigned char* value_valid,
                                     const float* cond, const unsigned char* cond_valid,
                                     unsigned long long n, float threshold,
                                     double* sums, unsigned long long* counts, unsigned long long* outside) {
    __shared__ double s_sum[GROUPS];
    __shared__ unsigned int s_count[GROUPS];
    for (int g = threadIdx.x; g < GROUPS; g += blockDim.x) { s_sum[g] = 0.0; s_count[g] = 0; }
    __syncthreads();
    unsigned long long out = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        // SQL: a null in the filter or the key drops the row; a null value adds nothing but counts.
        if (!valid(cond_valid, i) || !(cond[i] > threshold) || !valid(key_valid, i)) continue;
        const int k = key[i];
        if (k < 0 || k >= GROUPS) { out++; continue; }
        if (valid(value_valid, i)) atomicAdd(&s_sum[k], value[i]);
        atomicAdd(&s_count[k], 1u);
    }
    __syncthreads();
    for (int g = threadIdx.x; g < GROUPS; g += blockDim.x) {
        if (s_count[g]) { atomicAdd(&sums[g], s_sum[g]); atomicAdd(&counts[g], (unsigned long long)s_count[g]); }
    }
    if (out) atomicAdd(outside, out);
}
"#;

/// Per key: sum and count.
type Groups = BTreeMap<i32, (f64, u64)>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let positional: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || !args[i - 1].starts_with("--")))
        .map(|(_, a)| a)
        .collect();
    let file = positional
        .first()
        .ok_or("usage: analytics_job FILE [THRESHOLD] [--group b --sum c --filter d]")?;
    let threshold: f32 = positional.get(1).map_or(Ok(0.5), |t| t.parse())?;
    let (key, value, cond) = (flag("--group", "b"), flag("--sum", "c"), flag("--filter", "d"));
    let settings = Settings::from_env(&[])?;

    let t = Instant::now();
    let want = host_query(file, &settings, [&key, &value, &cond], threshold)?;
    let host_time = t.elapsed();
    println!(
        "host (arrow-rs read, arrow filter, hash aggregation): {} groups in {:.1} ms",
        want.len(),
        host_time.as_secs_f64() * 1e3
    );

    if let Err(why) = gpu_parquet::gpu::cuda_present().and_then(|_| gpu_parquet::gpu::nvrtc::nvrtc_present()) {
        println!("GPU part skipped: {why}");
        return Ok(());
    }
    let ctx = GpuContext::new(settings.device)?;
    let module = KernelModule::load(&ctx, KERNEL, "analytics_job", settings.kernel_cache.as_deref())?;
    let kernel = module.function("group_sum")?;

    let t = Instant::now();
    let read = Reader::builder(file)
        .with_settings(&settings)
        .with_backend(BackendKind::Auto)
        .with_columns([key.clone(), value.clone(), cond.clone()])
        .build()?
        .read_device()?;
    let read_time = t.elapsed();
    let stream = Stream::new(&ctx)?;
    let sums = DeviceBuffer::<f64>::zeroed(&stream, GROUPS)?;
    let counts = DeviceBuffer::<u64>::zeroed(&stream, GROUPS)?;
    let outside = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let t = Instant::now();
    for batch in &read.table.batches {
        let column = |name: &str| -> Result<&DeviceArray, Box<dyn std::error::Error>> {
            let c = batch
                .columns
                .iter()
                .find(|c| c.name == name)
                .ok_or(format!("no column {name}"))?;
            Ok(&c.array)
        };
        let (k, v, f) = (column(&key)?, column(&value)?, column(&cond)?);
        for (a, want_type, name) in [
            (k, DataType::Int32, &key),
            (v, DataType::Float64, &value),
            (f, DataType::Float32, &cond),
        ] {
            if a.data_type != want_type {
                return Err(format!("column {name} is {}, the kernel wants {want_type}", a.data_type).into());
            }
        }
        // The batch was decoded on its own stream: the kernel waits for it there.
        let decoded = k.buffers[0].stream();
        let addr = |a: &DeviceArray| a.buffers[0].device_address();
        let bits = |a: &DeviceArray| a.validity.as_ref().map_or(0, |b| b.device_address());
        let (n, sums_a, counts_a, outside_a) = (
            batch.num_rows as u64,
            sums.device_address(),
            counts.device_address(),
            outside.device_address(),
        );
        let (ka, kv, va, vv, fa, fv) = (addr(k), bits(k), addr(v), bits(v), addr(f), bits(f));
        let mut launch = decoded.cuda().launch_builder(&kernel);
        launch
            .arg(&ka)
            .arg(&kv)
            .arg(&va)
            .arg(&vv)
            .arg(&fa)
            .arg(&fv)
            .arg(&n)
            .arg(&threshold)
            .arg(&sums_a)
            .arg(&counts_a)
            .arg(&outside_a);
        let blocks = (batch.num_rows as u32).div_ceil(256 * 8).clamp(1, 4096);
        // SAFETY: every address is a live device allocation holding `n` values of the type the kernel
        // reads (checked above: Int32, Float64, Float32 in Arrow layout, validity bitmaps of at least
        // ceil(n / 8) bytes or 0), or the GROUPS-long outputs; all outlive the synchronisation below.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        decoded.synchronize()?;
    }
    let kernel_time = t.elapsed();
    let (sums, counts, outside) = (sums.copy_to_host()?, counts.copy_to_host()?, outside.copy_to_host()?[0]);
    let got: Groups = (0..GROUPS)
        .filter(|&g| counts[g] > 0)
        .map(|g| (g as i32, (sums[g], counts[g])))
        .collect();
    let rows = read.table.num_rows();
    println!(
        "GPU: read and decode {rows} rows in {:.1} ms ({:.2} GB/s of the columns' uncompressed bytes), query kernel {:.2} ms; {} groups, {outside} rows with keys outside 0..{GROUPS}",
        read_time.as_secs_f64() * 1e3,
        read.decode.uncompressed_bytes as f64 / read_time.as_secs_f64() / 1e9,
        kernel_time.as_secs_f64() * 1e3,
        got.len()
    );
    let in_range: Groups = want
        .iter()
        .filter(|(k, _)| (0..GROUPS as i32).contains(k))
        .map(|(k, v)| (*k, *v))
        .collect();
    let mut worst = 0f64;
    for (k, (s, c)) in &in_range {
        let (gs, gc) = got.get(k).copied().unwrap_or((0.0, 0));
        if gc != *c {
            return Err(format!("group {k}: the GPU counted {gc} rows, the host {c}").into());
        }
        worst = worst.max((gs - s).abs() / s.abs().max(1e-300));
    }
    if got.len() != in_range.len() || worst > 1e-9 {
        return Err(format!(
            "GPU and host differ: {} against {} groups, worst relative sum error {worst:e}",
            got.len(),
            in_range.len()
        )
        .into());
    }
    println!("checked: every group's count equal to the host's, sums within {worst:.1e} relative");
    Ok(())
}

/// The query on the host: arrow-rs's read, arrow's filter kernel, then a hash aggregation.
fn host_query(
    file: &str,
    settings: &Settings,
    columns: [&String; 3],
    threshold: f32,
) -> Result<Groups, Box<dyn std::error::Error>> {
    let chunks = Reader::builder(file)
        .with_settings(settings)
        .with_backend(BackendKind::Host)
        .with_columns(columns.iter().map(|c| c.to_string()))
        .build()?
        .read()?;
    let table = chunks.decode()?;
    let mut groups = Groups::new();
    for batch in &table.batches {
        let col = |name: &str| batch.column_by_name(name).ok_or(format!("no column {name}"));
        let cond = col(columns[2])?
            .as_primitive_opt::<Float32Type>()
            .ok_or("the filter column is not float32")?;
        let mask = arrow::compute::kernels::cmp::gt(cond, &arrow::array::Float32Array::new_scalar(threshold))?;
        let keys = filter(col(columns[0])?, &mask)?;
        let values = filter(col(columns[1])?, &mask)?;
        let keys = keys
            .as_primitive_opt::<Int32Type>()
            .ok_or("the group column is not int32")?;
        let values = values
            .as_primitive_opt::<Float64Type>()
            .ok_or("the sum column is not float64")?;
        for i in 0..keys.len() {
            if keys.is_null(i) {
                continue;
            }
            let e = groups.entry(keys.value(i)).or_insert((0.0, 0));
            if values.is_valid(i) {
                e.0 += values.value(i);
            }
            e.1 += 1;
        }
    }
    Ok(groups)
}
