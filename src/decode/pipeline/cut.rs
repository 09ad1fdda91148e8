//! Phase 7 of a step whose row groups are read page by page ([`ReadPlan::rows`]): every GPU column
//! cut to the plan's rows before the columns are zipped. A column decodes the rows its fetched pages
//! hold (its row groups' rows for chunks read whole), which differ from column to column, since
//! each chunk has pages of its own; a mask over those rows, built on the host from the pieces'
//! rows, compacts it with the row filter's kernels ([`compact_arrays`]). Columns holding the same
//! rows are cut together. Host-routed columns are decoded by arrow-rs with the rows selected.
//!
//! [`ReadPlan::rows`]: crate::plan::ReadPlan::rows

use std::collections::BTreeMap;
use std::ops::Range;

use arrow::datatypes::DataType;

use super::{ColumnRoute, Route, StepColumns, StepInput};
use crate::decode::row_filter::{FilterContext, FilterExecutor, compact_arrays, compaction_support};
use crate::decode::table::{BITMAP_PADDING, DeviceArray};
use crate::error::{Error, Result};

/// Why route `i` (`r`) of a step read page by page cannot be decoded on the GPU and then cut to the
/// plan's rows: a nested column read in pieces (its leaves' pages hold other rows, and its structure
/// is built over the rows all its leaves share), or a type the kernels cannot compact.
pub(super) fn cannot_cut(input: &StepInput<'_>, i: usize, r: &ColumnRoute) -> Option<String> {
    if let Route::GpuNested(_) = r.route {
        let paged = r.leaves.iter().any(|&l| {
            input.row_groups.iter().any(|&g| {
                input
                    .chunk_of
                    .get(&(g, l))
                    .is_some_and(|p| p.iter().any(|c| c.pages.is_some()))
            })
        });
        if paged {
            return Some("a nested column read page by page: decoded on the host".into());
        }
    }
    let field = input.schema.fields().get(i)?;
    match field.data_type() {
        DataType::Null => None,
        t => compaction_support(t)
            .err()
            .map(|why| format!("{why}, to the rows of its pages read: decoded on the host")),
    }
}

/// Cuts every GPU column of `arrays` (by route) to the plan's rows; nothing where the step reads its
/// row groups whole.
pub(super) fn gpu_to_rows<E: FilterExecutor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &StepColumns,
    arrays: &mut BTreeMap<usize, DeviceArray<E::Buffer>>,
) -> Result<()> {
    if !input.is_cut() {
        return Ok(());
    }
    // Routes by the rows they decoded (per row group of the step), from their first GPU leaf's chunks.
    let mut groups: Vec<(Vec<Vec<Range<u64>>>, Vec<usize>)> = Vec::new();
    for &route in arrays.keys() {
        let Some(gi) = step.gpu.iter().position(|(r, _)| *r == route) else {
            continue;
        };
        let held: Vec<Vec<Range<u64>>> = step
            .chunks
            .iter()
            .filter(|c| c.column == gi)
            .map(|c| c.held.clone())
            .collect();
        match groups.iter_mut().find(|g| g.0 == held) {
            Some(g) => g.1.push(route),
            None => groups.push((held, vec![route])),
        }
    }
    for (held, routes) in groups {
        let (bits, decoded, kept) = mask_of(input, &held);
        if kept == decoded {
            continue;
        }
        let mut names = Vec::with_capacity(routes.len());
        let mut cut = Vec::with_capacity(routes.len());
        let mut taken = Vec::with_capacity(routes.len());
        for &route in &routes {
            let Some(a) = arrays.remove(&route) else { continue };
            if a.len as u64 != decoded {
                return Err(Error::parquet(
                    input.location.clone(),
                    format!(
                        "column '{}' decoded {} rows where its pages hold {decoded}",
                        input.routes[route].name, a.len
                    ),
                ));
            }
            if a.data_type == DataType::Null {
                // No buffers to cut.
                arrays.insert(
                    route,
                    DeviceArray {
                        len: kept as usize,
                        ..a
                    },
                );
                continue;
            }
            names.push(input.routes[route].name.clone());
            taken.push(route);
            cut.push(a);
        }
        if cut.is_empty() {
            continue;
        }
        let at = exec.upload(&bits)?;
        let mask = DeviceArray {
            data_type: DataType::Boolean,
            len: decoded as usize,
            null_count: 0,
            validity: None,
            buffers: vec![exec.take(at)?],
            children: Vec::new(),
        };
        let ctx = FilterContext {
            location: input.location.clone(),
            names,
        };
        let (out, rows) = compact_arrays(exec, cut, &mask, ctx)?;
        if rows != kept {
            return Err(Error::device(
                "cutting columns to the rows read",
                format!("{rows} rows kept of {decoded}, where the plan keeps {kept}"),
            ));
        }
        for (route, a) in taken.into_iter().zip(out) {
            arrays.insert(route, a);
        }
    }
    Ok(())
}

/// The mask over a column's decoded rows (`held`: per row group of the step, the rows of it the
/// column's pages hold, in order) that keeps the plan's rows: its LSB-first bits (padded to
/// [`BITMAP_PADDING`]), the rows decoded and the rows kept.
fn mask_of(input: &StepInput<'_>, held: &[Vec<Range<u64>>]) -> (Vec<u8>, u64, u64) {
    let decoded: u64 = held.iter().flatten().map(|r| r.end - r.start).sum();
    let mut bits = vec![
        0u8;
        (decoded.div_ceil(8) as usize)
            .next_multiple_of(BITMAP_PADDING)
            .max(BITMAP_PADDING)
    ];
    let mut at = 0u64; // the decoded row of the current range's start
    let mut kept = 0u64;
    for (slot, ranges) in held.iter().enumerate() {
        let all = [0..u64::MAX];
        let keep: &[Range<u64>] = input.kept_of.get(slot).copied().flatten().unwrap_or(&all);
        for h in ranges {
            for k in keep {
                let (s, e) = (h.start.max(k.start), h.end.min(k.end));
                if s < e {
                    set_bits(&mut bits, at + (s - h.start), at + (e - h.start));
                    kept += e - s;
                }
            }
            at += h.end - h.start;
        }
    }
    (bits, decoded, kept)
}

/// Sets bits `[from, to)` of an LSB-first bitmap.
fn set_bits(bits: &mut [u8], from: u64, to: u64) {
    let mut i = from;
    while i < to {
        if i % 8 == 0 && to - i >= 8 {
            let n = ((to - i) / 8) as usize;
            let b = (i / 8) as usize;
            bits[b..b + n].fill(0xff);
            i += 8 * n as u64;
        } else {
            bits[(i / 8) as usize] |= 1 << (i % 8);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::set_bits;

    #[test]
    fn bits_set_in_runs_and_singly() {
        let mut b = vec![0u8; 4];
        set_bits(&mut b, 3, 21);
        assert_eq!(b, [0b1111_1000, 0xff, 0b0001_1111, 0]);
        let mut b = vec![0u8; 2];
        set_bits(&mut b, 0, 16);
        assert_eq!(b, [0xff, 0xff]);
        set_bits(&mut b, 5, 5);
        assert_eq!(b, [0xff, 0xff]);
    }
}
