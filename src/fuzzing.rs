//! Bodies of the fuzz targets (`fuzz/fuzz_targets/*.rs`), kept in the library so the regression test
//! (`tests/fuzz_regressions.rs`) replays saved inputs through exactly the code the fuzzer ran.
//!
//! Each body takes arbitrary bytes and panics only when it finds a defect: a panic of ours (the
//! fuzzer reports any panic that `contain_panics` did not turn into an error), a host reference that
//! disagrees with arrow-rs where both give an answer, or a plan that reaches outside the file. Errors
//! are the expected outcome on bad input and are not defects.

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use parquet::data_type::{ByteArrayType, DataType, Int32Type, Int64Type};
use parquet::encodings::decoding::{Decoder, DeltaBitPackDecoder, DeltaByteArrayDecoder, DeltaLengthByteArrayDecoder};
use parquet::encodings::rle::RleDecoder;

use crate::decode::gpu::decode_reference;
use crate::decode::host::decode_fetched;
use crate::decode::host_kernels::core::decode_hybrid;
use crate::decode::host_kernels::delta::{
    decode_byte_stream_split, decode_delta_binary_packed_i32, decode_delta_binary_packed_i64, decode_delta_byte_array,
    decode_delta_length_byte_array, delta_lengths_claimed_within,
};
use crate::decode::host_kernels::page_headers::parse_pages;
use crate::io::IoBackend;
use crate::io::host::HostBackend;
use crate::{ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};

/// Values asked of a decoder at most (so one input cannot ask for gigabytes).
const MAX_VALUES: usize = 1 << 16;

/// Writes `data` to this thread's scratch file (the reader opens files, not memory) and returns its path.
fn scratch_file(data: &[u8]) -> PathBuf {
    // Memory-backed where there is /dev/shm (the file is unlinked as soon as it is open).
    let shm = PathBuf::from("/dev/shm");
    let dir = if shm.is_dir() { shm } else { PathBuf::from("/tmp") };
    let path = dir.join(format!(
        "gpu-parquet-fuzz-{}-{:?}.parquet",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut f = std::fs::File::create(&path).expect("scratch file for the fuzzer");
    f.write_all(data).expect("writing the scratch file");
    path
}

/// `data` opened as a Parquet file (through a scratch file, unlinked once open: reads go through the
/// descriptor), or `None` where it is refused.
fn open_scratch(data: &[u8]) -> Option<ParquetSource> {
    let path = scratch_file(data);
    let opened = ParquetSource::open(&path);
    let _ = std::fs::remove_file(&path);
    opened.ok()
}

/// Footer validation and planning: opening must not panic, and every plan of an opened file must
/// stay inside the file, give each chunk its own destination bytes and cover each chunk with tasks.
pub fn footer_plan(data: &[u8]) {
    let Some(source) = open_scratch(data) else {
        return;
    };
    let leaves = source.metadata().file_metadata().schema_descr().num_columns();
    let groups = source.metadata().num_row_groups();
    // The whole file, then one leaf of one row group (chosen by the input), each with and without
    // coalescing and alignment.
    let selections = [
        (Projection::All, RowGroupSelection::All),
        (
            Projection::Leaves(vec![data.len() % leaves.max(1)]),
            RowGroupSelection::Indices(vec![data.len() % groups.max(1)]),
        ),
    ];
    for (projection, row_groups) in &selections {
        for options in [
            PlanOptions::default(),
            PlanOptions {
                max_gap: 1 << 20,
                task_size: 4096,
                align: true,
            },
        ] {
            let Ok(plan) = ReadPlan::build(&source, projection, row_groups, options) else {
                continue;
            };
            check_plan(&plan, source.len());
            // Page by page (a filter's rows, chosen by the input): pieces inside their chunks,
            // whatever the OffsetIndex says.
            let Ok(paged) = ReadPlan::build_paged(&source, projection, row_groups, options, &some_rows(&source, data))
            else {
                continue;
            };
            check_plan(&paged, source.len());
            for c in &paged.chunks {
                if let Some(run) = &c.pages {
                    assert!(
                        run.chunk.start <= c.offset && c.offset + c.len <= run.chunk.end,
                        "piece {c:?} outside its chunk"
                    );
                }
            }
        }
    }
}

/// A few rows of each row group of `source`, placed by `data`'s length.
fn some_rows(source: &ParquetSource, data: &[u8]) -> std::collections::BTreeMap<usize, Vec<std::ops::Range<u64>>> {
    let meta = source.metadata();
    (0..meta.num_row_groups())
        .filter_map(|g| {
            let n = meta.row_group(g).num_rows().max(0) as u64;
            let at = (data.len() as u64).checked_rem(n)?;
            Some((g, vec![at..(at + 1 + n / 8).min(n)]))
        })
        .collect()
}

fn check_plan(plan: &ReadPlan, file_len: u64) {
    let mut dests: Vec<(u64, u64)> = Vec::new();
    for c in &plan.chunks {
        let end = c.offset.checked_add(c.len).expect("chunk end overflows");
        assert!(end <= file_len, "chunk {c:?} past the file's {file_len} bytes");
        assert!(c.dest_offset + c.len <= plan.dest_len, "chunk {c:?} past the buffer");
        dests.push((c.dest_offset, c.dest_offset + c.len));
        let covered: u64 = plan
            .tasks
            .iter()
            .map(|t| {
                let lo = t.offset.max(c.offset);
                let hi = (t.offset + t.len).min(end);
                hi.saturating_sub(lo)
            })
            .sum();
        assert!(covered >= c.len, "chunk {c:?} not covered by the tasks");
    }
    dests.sort_unstable();
    for w in dests.windows(2) {
        assert!(w[0].1 <= w[1].0, "chunks share destination bytes: {w:?}");
    }
    for t in &plan.tasks {
        assert!(
            t.offset + t.len <= file_len.div_ceil(4096) * 4096,
            "task {t:?} past the file"
        );
        assert!(t.dest_offset + t.len <= plan.dest_len, "task {t:?} past the buffer");
    }
}

/// The page-header parser's host reference: any bytes as one column chunk. Every page it returns lies
/// inside the chunk.
pub fn page_headers(data: &[u8]) {
    if let Ok(pages) = parse_pages(data) {
        for p in &pages {
            assert!(p.header_offset + u64::from(p.header_len) == p.data_offset, "{p:?}");
            assert!(p.compressed_size >= 0, "{p:?}");
            assert!(
                p.data_offset + p.compressed_size as u64 <= data.len() as u64,
                "{p:?} past the chunk"
            );
        }
    }
}

/// Splits a fuzz input into a small header (parameters) and the encoded bytes.
fn params(data: &[u8]) -> Option<(u8, usize, &[u8])> {
    let (&a, rest) = data.split_first()?;
    let (&b, rest) = rest.split_first()?;
    let (&c, rest) = rest.split_first()?;
    Some((a, (usize::from(b) << 8 | usize::from(c)) % MAX_VALUES, rest))
}

/// The RLE / bit-packed hybrid decoder (definition and repetition levels, dictionary indices,
/// booleans) against arrow-rs's `RleDecoder`: where both give `count` values, the same values.
pub fn hybrid(data: &[u8]) {
    let Some((width, count, bytes)) = params(data) else {
        return;
    };
    let width = u32::from(width % 34); // over 32 must be refused
    let ours = decode_hybrid(bytes, width, count);
    if width > 32 {
        assert!(ours.is_err(), "bit width {width} accepted");
        return;
    }
    let Ok((values, used)) = ours else {
        return;
    };
    assert_eq!(values.len(), count);
    assert!(used <= bytes.len());
    if width == 0 {
        assert!(values.iter().all(|&v| v == 0));
        return;
    }
    // arrow-rs's RleDecoder panics on some streams (in set_data too): no oracle then.
    let theirs = arrow_rs(|| {
        let mut d = RleDecoder::new(width as u8);
        let mut out = vec![0u32; count];
        let n = d
            .set_data(Bytes::copy_from_slice(bytes))
            .and_then(|()| d.get_batch(&mut out))
            .ok();
        Ok((n == Some(count)).then_some(out))
    });
    if let Some(Some(out)) = theirs {
        assert_eq!(values, out, "width {width}, count {count}");
    }
}

/// Runs an oracle call into arrow-rs; `None` if it panicked. A panic of arrow-rs is not our defect,
/// and `contain_panics` keeps it from the fuzzer's panic hook (which would abort even on a caught
/// panic).
fn arrow_rs<T>(f: impl FnOnce() -> crate::Result<T>) -> Option<T> {
    crate::panic_guard::contain_panics(&crate::Location::default(), f).ok()
}

/// arrow-rs's decoder of `T` over `bytes`: `count` values, or `None` where it refuses, gives fewer or
/// panics.
fn arrow_decode<T: DataType>(mut d: impl Decoder<T>, bytes: &[u8], count: usize) -> Option<Vec<T::T>> {
    arrow_rs(|| {
        Ok((|| {
            d.set_data(Bytes::copy_from_slice(bytes), count).ok()?;
            let mut out = vec![T::T::default(); count];
            let n = d.get(&mut out).ok()?;
            (n == count).then_some(out)
        })())
    })
    .flatten()
}

/// DELTA_BINARY_PACKED (32 and 64 bit), DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT
/// references against arrow-rs's decoders (byte stream split against its definition).
pub fn delta(data: &[u8]) {
    let Some((kind, count, bytes)) = params(data) else {
        return;
    };
    match kind % 5 {
        // The end a DELTA_BINARY_PACKED decode reports may lie past the input when only the last
        // miniblock's padding is missing (accepted, as arrow-rs does), so only the values are compared.
        0 => {
            if let Ok((ours, _end)) = decode_delta_binary_packed_i64(bytes, count)
                && let Some(theirs) = arrow_decode::<Int64Type>(DeltaBitPackDecoder::new(), bytes, count)
            {
                assert_eq!(ours, theirs);
            }
        }
        1 => {
            if let Ok((ours, _end)) = decode_delta_binary_packed_i32(bytes, count)
                && let Some(theirs) = arrow_decode::<Int32Type>(DeltaBitPackDecoder::new(), bytes, count)
            {
                assert_eq!(ours, theirs);
            }
        }
        // arrow-rs's byte-array decoders allocate as many lengths as the header claims before reading
        // any (an abort for 2^40 of them): the host path refuses such pages before arrow-rs sees them
        // (`check_delta_lengths`), so the oracle is only asked about counts the page can hold.
        2 | 3 if delta_lengths_claimed_within(bytes, count as u64, kind % 5 == 3).is_err() => {}
        2 => {
            if let Ok(ours) = decode_delta_length_byte_array(bytes, count) {
                assert_eq!(ours.len(), count);
                if let Some(theirs) = arrow_decode::<ByteArrayType>(DeltaLengthByteArrayDecoder::new(), bytes, count) {
                    let theirs: Vec<&[u8]> = theirs.iter().map(|b| b.data()).collect();
                    assert_eq!(ours, theirs);
                }
            }
        }
        3 => {
            if let Ok(ours) = decode_delta_byte_array(bytes, count) {
                assert_eq!(ours.len(), count);
                if let Some(theirs) = arrow_decode::<ByteArrayType>(DeltaByteArrayDecoder::new(), bytes, count) {
                    let theirs: Vec<Vec<u8>> = theirs.iter().map(|b| b.data().to_vec()).collect();
                    assert_eq!(ours, theirs);
                }
            }
        }
        _ => {
            // Widths of every physical type byte stream split applies to: 2 (float16), 4, 8, and
            // FIXED_LEN_BYTE_ARRAY's any.
            let width = [2usize, 4, 8, 3, 16][count % 5];
            let count = count.min(bytes.len() / width + 1);
            if let Ok(ours) = decode_byte_stream_split(bytes, count, width) {
                assert!(
                    count * width <= bytes.len(),
                    "{count} values of {width} bytes from {}",
                    bytes.len()
                );
                // Byte b of value k is at b * stride + k, each stream `len / width` long.
                let stride = bytes.len() / width;
                let mut want = vec![0u8; count * width];
                for k in 0..count {
                    for b in 0..width {
                        want[k * width + b] = bytes[b * stride + k];
                    }
                }
                assert_eq!(ours, want);
            }
        }
    }
}

/// A whole file read on the host path (footer, plan, host backend, arrow-rs decode), and the GPU
/// decode pipeline run on its host references over the same bytes: no panic of ours, and where both
/// decode, the same table.
pub fn whole_file(data: &[u8]) {
    let Some(source) = open_scratch(data) else {
        return;
    };
    // A file whose row groups claim over 2^20 values is left out: the references would allocate what
    // the footer asks for.
    let values: i64 = source
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|rg| rg.columns().iter().map(|c| c.num_values().max(0)))
        .sum();
    // Nor one whose chunks claim over 64 MiB uncompressed (parquet-testing's
    // large_string_map.brotli.parquet inflates 4 KiB into 2 GiB: slow, not wrong).
    let uncompressed: i64 = source
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|rg| rg.columns().iter().map(|c| c.uncompressed_size().max(0)))
        .sum();
    if values > 1 << 20 || uncompressed > 64 << 20 {
        return;
    }
    let Ok(plan) = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    ) else {
        return;
    };
    let Ok(backend) = HostBackend::new(1) else {
        return;
    };
    let Ok(fetched) = backend.fetch(&source, &plan) else {
        return;
    };
    let fetched = fetched.buffer.into_bytes();
    let host = decode_fetched(&source, &plan, &fetched, 1).and_then(|t| t.concat());
    if let Ok(whole) = &host {
        paged_equals_whole(&source, data, &backend, whole);
    }
    // Not inside `contain_panics`: a panic of the pipeline is a defect the fuzzer must see.
    let reference = decode_reference(&source, &plan, &fetched).and_then(|(batch, _)| batch.to_host());
    if let (Ok(want), Ok(got)) = (host, reference) {
        assert_eq!(want.schema(), got.schema());
        assert_eq!(want.num_rows(), got.num_rows());
        for i in 0..want.num_columns() {
            assert_eq!(want.column(i).to_data(), got.column(i).to_data(), "column {i}");
        }
    }
}

/// The file read page by page (rows chosen by `data`) decodes, where it decodes at all, to the rows
/// of `whole` (the whole file's host decode) those rows are.
fn paged_equals_whole(
    source: &ParquetSource,
    data: &[u8],
    backend: &HostBackend,
    whole: &arrow::record_batch::RecordBatch,
) {
    let rows = some_rows(source, data);
    let Ok(plan) = ReadPlan::build_paged(
        source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
        &rows,
    ) else {
        return;
    };
    let Ok(fetched) = backend.fetch(source, &plan) else {
        return;
    };
    let Ok(got) = decode_fetched(source, &plan, &fetched.buffer.into_bytes(), 1).and_then(|t| t.concat()) else {
        return;
    };
    let mut parts = Vec::new();
    let mut at = 0usize;
    for (g, rg) in source.metadata().row_groups().iter().enumerate() {
        let n = rg.num_rows().max(0) as usize;
        match plan.rows.get(&g) {
            Some(kept) => parts.extend(kept.iter().map(|r| (at + r.start as usize, (r.end - r.start) as usize))),
            None => parts.push((at, n)),
        }
        at += n;
    }
    let slices: Vec<_> = parts
        .into_iter()
        .filter(|&(from, len)| from + len <= whole.num_rows())
        .map(|(from, len)| whole.slice(from, len))
        .collect();
    let Ok(want) = arrow::compute::concat_batches(&whole.schema(), &slices) else {
        return;
    };
    assert_eq!(got.num_rows(), want.num_rows(), "rows read page by page");
    for i in 0..want.num_columns() {
        assert_eq!(
            got.column(i).to_data(),
            want.column(i).to_data(),
            "column {i} read page by page"
        );
    }
}
