//! Phase 6 of a step: the Arrow arrays. The GPU columns' bitmaps, conversions and string layouts, their
//! nested structure built from the levels; the host-routed columns decoded by arrow-rs from the same
//! fetched bytes and uploaded; then every column in schema order with where it ran.

use std::collections::BTreeMap;

use arrow::datatypes::DataType;
use bytes::Bytes;

use super::descriptors::Descriptors;
use super::{
    ChunkPages, ColumnStepStats, NestedLevels, Route, StepColumns, StepInput, StepStats, assemble_columns,
    compact_repeated_leaves, null_array, reshape_strings,
};
use crate::decode::exec::{Executor, Kernel};
use crate::decode::layout::physical;
use crate::decode::table::{BITMAP_PADDING, DecodedWhere, DeviceArray, DeviceColumn, upload_array};
use crate::error::{Error, Location, Result};
use crate::plan::{PlanOptions, ReadPlan};

/// The GPU columns' arrays, by route (the kernels' outputs taken over, packed or converted where the
/// Arrow type asks).
pub(super) fn gpu_arrays<E: Executor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &StepColumns,
    descriptors: Descriptors,
    mut levels: NestedLevels,
) -> Result<BTreeMap<usize, DeviceArray<E::Buffer>>> {
    let source = input.source;
    let routes = input.routes;
    let gpu = &step.gpu;
    // What the nested columns decode to: in a step read page by page, those still on the GPU are read
    // whole (`cut::cannot_cut`) and cut to the plan's rows after.
    let num_rows = input.full_rows;
    let location = &input.location;
    let Descriptors {
        kept,
        mut cols,
        rep_levels,
        pages,
        origins,
        ..
    } = descriptors;
    let mut counts_addr = 0;
    if !cols.is_empty() {
        counts_addr = exec.alloc(cols.len() * 2 * 8)?;
    }
    levels.rep = rep_levels;
    compact_repeated_leaves(exec, routes, gpu, &kept, &mut cols, &levels)?;
    let mut bitmaps: Vec<(u64, u64)> = Vec::with_capacity(cols.len());
    for (k, c) in cols.iter().enumerate() {
        // Bitmaps are allocated to a multiple of 64 bytes (zeroed past the last word), as Arrow
        // recommends: cuDF's import copies a validity bitmap rounded up to 64 bytes, and a copy past
        // the end of a stream-ordered allocation fails (cudaErrorInvalidValue).
        let words = (c.num_rows.div_ceil(32) * 4) as usize;
        let words = words.next_multiple_of(BITMAP_PADDING);
        let validity = if c.out_valid != 0 {
            let w = exec.alloc(words)?;
            exec.launch(Kernel::PackBits {
                bytes: c.out_valid,
                n: c.num_rows,
                words: w,
                count: counts_addr + 16 * k as u64,
            })?;
            w
        } else {
            0
        };
        let values = if c.physical == physical::BOOLEAN {
            let w = exec.alloc(words)?;
            exec.launch(Kernel::PackBits {
                bytes: c.out_values,
                n: c.num_rows,
                words: w,
                count: counts_addr + 16 * k as u64 + 8,
            })?;
            w
        } else {
            0
        };
        bitmaps.push((validity, values));
    }
    let counts: Vec<u64> = if cols.is_empty() {
        Vec::new()
    } else {
        exec.read(counts_addr, cols.len() * 2)?
    };

    let mut reshaped = reshape_strings(exec, &mut cols, &kept, &pages, &origins, source, gpu)?;
    let mut arrays: BTreeMap<usize, DeviceArray<E::Buffer>> = BTreeMap::new();
    let mut leaf_arrays: BTreeMap<usize, DeviceArray<E::Buffer>> = BTreeMap::new();
    for (k, (&gi, c)) in kept.iter().zip(&cols).enumerate() {
        let leaf = &gpu[gi].1;
        let num_rows = c.num_rows;
        let (validity, bool_values) = bitmaps[k];
        if leaf.data_type == DataType::Null {
            leaf_arrays.insert(gi, null_array(exec, c, validity));
            continue;
        }
        let present = if c.out_valid != 0 { counts[2 * k] } else { num_rows };
        let null_count = (num_rows - present.min(num_rows)) as usize;
        let validity = if validity != 0 && null_count > 0 {
            Some(exec.take(validity)?)
        } else {
            None
        };
        let buffers = if leaf.physical == physical::BYTE_ARRAY {
            match reshaped.remove(&k) {
                Some(buffers) => buffers,
                None => vec![exec.take(c.out_offsets)?, exec.take(c.out_values)?],
            }
        } else if leaf.physical == physical::BOOLEAN {
            vec![exec.take(bool_values)?]
        } else if let Some(op) = leaf.conversion {
            let (_, dw) = op.widths(leaf.type_len);
            let dst = exec.alloc_uninit((num_rows as usize * dw).max(1))?;
            exec.launch(Kernel::Convert {
                op,
                src: c.out_values,
                src_width: leaf.type_len,
                n: num_rows,
                dst,
            })?;
            exec.free(c.out_values);
            vec![exec.take(dst)?]
        } else {
            vec![exec.take(c.out_values)?]
        };
        leaf_arrays.insert(
            gi,
            DeviceArray {
                data_type: leaf.data_type.clone(),
                len: num_rows as usize,
                null_count,
                validity,
                buffers,
                children: Vec::new(),
            },
        );
    }
    assemble_columns(exec, routes, gpu, leaf_arrays, &levels, num_rows, location, &mut arrays)?;

    Ok(arrays)
}

/// Decodes the host-routed columns (and the GPU columns that fell back) with arrow-rs over the same
/// fetched bytes, and uploads them into `arrays`.
pub(super) fn host_arrays<E: Executor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &StepColumns,
    host_threads: usize,
    arrays: &mut BTreeMap<usize, DeviceArray<E::Buffer>>,
) -> Result<()> {
    let source = input.source;
    let routes = input.routes;
    let plan = input.plan;
    let row_groups = input.row_groups;
    let chunk_base = input.chunk_base;
    let location = &input.location;
    let chunk_of = &input.chunk_of;
    let num_rows = input.num_rows;
    let fallback = &step.fallback;
    let host_cols: Vec<usize> = routes
        .iter()
        .enumerate()
        .filter(|(i, r)| matches!(r.route, Route::Host(_)) || fallback.contains_key(i))
        .map(|(i, _)| i)
        .collect();
    if !host_cols.is_empty() {
        let leaves: Vec<usize> = host_cols
            .iter()
            .flat_map(|&i| routes[i].leaves.iter().copied())
            .collect();
        let mut sub_chunks = Vec::new();
        let mut fetched_at: BTreeMap<u64, u64> = BTreeMap::new(); // file offset -> dest offset
        for &g in row_groups {
            for &l in &leaves {
                let pieces = chunk_of
                    .get(&(g, l))
                    .filter(|p| !p.is_empty())
                    .ok_or_else(|| Error::InvalidRequest {
                        location: Location::chunk(&location.file, source.column_path(l), g),
                        message: "the plan does not fetch this column chunk".into(),
                    })?;
                for c in pieces {
                    fetched_at.insert(c.offset, c.dest_offset);
                    sub_chunks.push((*c).clone());
                }
            }
        }
        let mut sorted_leaves = leaves.clone();
        sorted_leaves.sort_unstable();
        // The chunks (or pieces) packed end to end in file order, whatever the fetch's layout was (an
        // O_DIRECT plan pads its chunks to 4 KiB): the sub-plan lays them out that way, then they are
        // copied to where it says. Its row groups read page by page yield the plan's rows.
        let mut sub = ReadPlan::from_chunks(
            sub_chunks,
            sorted_leaves,
            row_groups.to_vec(),
            source.len(),
            PlanOptions {
                align: false,
                max_gap: 0,
                ..plan.options
            },
        );
        sub.rows = row_groups
            .iter()
            .filter_map(|g| plan.rows.get(g).map(|r| (*g, r.clone())))
            .collect();
        let mut packed = vec![0u8; sub.dest_len as usize];
        for sc in &sub.chunks {
            // Every sub-plan chunk is one of `chunk_of`'s (cloned above); looked up, not indexed, so that
            // no path here can panic.
            let from = fetched_at.get(&sc.offset).ok_or_else(|| Error::InvalidRequest {
                location: Location::chunk(&location.file, sc.column_path.clone(), sc.row_group),
                message: "the plan does not fetch this column chunk".into(),
            })?;
            let bytes: Vec<u8> = exec.read(chunk_base + from, sc.len as usize)?;
            let at = sc.dest_offset as usize;
            packed
                .get_mut(at..at + bytes.len())
                .ok_or_else(|| Error::InvalidRequest {
                    location: Location::chunk(&location.file, sc.column_path.clone(), sc.row_group),
                    message: "this column chunk overlaps another".into(),
                })?
                .copy_from_slice(&bytes);
        }
        let table = crate::decode::host::decode_fetched(source, &sub, &Bytes::from(packed), host_threads)?;
        let batch = table.concat()?;
        if batch.num_rows() as u64 != num_rows {
            return Err(Error::parquet(
                location.clone(),
                format!(
                    "arrow-rs decoded {} rows where the step yields {num_rows}",
                    batch.num_rows()
                ),
            ));
        }
        for (j, &i) in host_cols.iter().enumerate() {
            let data = batch.column(j).to_data();
            let mut up = |b: &[u8]| -> Result<E::Buffer> {
                let a = exec.upload(b)?;
                exec.take(a)
            };
            arrays.insert(i, upload_array(&data, &mut up)?);
        }
    }
    Ok(())
}

/// The step's columns in schema order, each with where it was decoded; its figures go to `stats`.
pub(super) fn columns_in_order<B: crate::decode::exec::OwnedBuffer>(
    input: &StepInput<'_>,
    step: &StepColumns,
    decompressed_on: &BTreeMap<usize, Vec<String>>,
    mut arrays: BTreeMap<usize, DeviceArray<B>>,
    stats: &mut StepStats,
) -> Result<Vec<DeviceColumn<B>>> {
    let routes = input.routes;
    let row_groups = input.row_groups;
    let location = &input.location;
    let meta = input.source.metadata();
    let gpu = &step.gpu;
    let chunks = &step.chunks;
    let fallback = &step.fallback;
    // Columns in schema order, with where each ran.
    let mut columns = Vec::with_capacity(routes.len());
    for (i, r) in routes.iter().enumerate() {
        let array = arrays
            .remove(&i)
            .ok_or_else(|| Error::parquet(location.clone(), format!("column '{}' was not decoded", r.name)))?;
        let decoded = match (&r.route, fallback.get(&i)) {
            (Route::Host(why), _) | (_, Some(why)) => DecodedWhere::Host(why.clone()),
            _ => DecodedWhere::Gpu,
        };
        // The route's leaves among the GPU columns.
        let gis: Vec<usize> = (0..gpu.len()).filter(|&g| gpu[g].0 == i).collect();
        let mut cs = ColumnStepStats {
            name: r.name.clone(),
            ..Default::default()
        };
        if !gis.is_empty() {
            let mine: Vec<&ChunkPages> = chunks.iter().filter(|c| gis.contains(&c.column)).collect();
            cs.pages = mine.iter().map(|c| c.infos.len()).sum();
            cs.compressed_bytes = mine
                .iter()
                .flat_map(|c| &c.infos)
                .map(|p| p.compressed_size.max(0) as u64)
                .sum();
            cs.uncompressed_bytes = mine
                .iter()
                .flat_map(|c| &c.infos)
                .map(|p| p.uncompressed_size.max(0) as u64)
                .sum();
            let mut codecs: Vec<String> = mine.iter().map(|c| format!("{:?}", c.codec)).collect();
            codecs.dedup();
            cs.codec = codecs.join(",");
            let mut on: Vec<&String> = gis.iter().filter_map(|g| decompressed_on.get(g)).flatten().collect();
            on.sort();
            on.dedup();
            cs.decompressed_on = if on.is_empty() {
                "none".into()
            } else {
                on.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            };
        } else {
            let mut codecs: Vec<String> = Vec::new();
            for &g in row_groups {
                for &l in &r.leaves {
                    let chunk = meta.row_group(g).column(l);
                    codecs.push(format!("{:?}", chunk.compression()));
                    cs.compressed_bytes += chunk.compressed_size().max(0) as u64;
                    cs.uncompressed_bytes += chunk.uncompressed_size().max(0) as u64;
                }
            }
            codecs.sort();
            codecs.dedup();
            cs.codec = codecs.join(",");
            cs.decompressed_on = "host (arrow-rs)".into();
        }
        cs.decoded_on = match &decoded {
            DecodedWhere::Gpu => "gpu".into(),
            DecodedWhere::Host(why) => format!("host ({why})"),
        };
        stats.columns.push(cs);
        columns.push(DeviceColumn {
            name: r.name.clone(),
            array,
            decoded,
        });
    }
    Ok(columns)
}
