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
use crate::decode::table::{BITMAP_PADDING, DeviceArray, mask_array};
use crate::error::{Error, Result};

/// Per row group of a step, the rows of it a column's fetched pages hold, in order.
type HeldRows = Vec<Vec<Range<u64>>>;

/// Why route `i` (`r`) of a step read page by page cannot be decoded on the GPU and then cut to the
/// plan's rows: a nested column read in pieces (its leaves' pages hold other rows, and its structure
/// is built over the rows all its leaves share), or a type the kernels cannot compact.
pub(super) fn cannot_cut(input: &StepInput<'_>, i: usize, r: &ColumnRoute) -> Option<String> {
    if let Route::Host(_) = r.route {
        return None;
    }
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
    let mut groups: Vec<(HeldRows, Vec<usize>)> = Vec::new();
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
        let (bits, decoded, kept) = mask_of(&input.kept_of, &held);
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
        let mask = mask_array(&bits, decoded as usize, &mut |b: &[u8]| {
            let at = exec.upload(b)?;
            exec.take(at)
        })?;
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
/// column's pages hold, in order) that keeps the plan's rows (`kept_of`: per row group, `None` for
/// all): its LSB-first bits (padded to [`BITMAP_PADDING`]), the rows decoded and the rows kept.
fn mask_of(kept_of: &[Option<&[Range<u64>]>], held: &[Vec<Range<u64>>]) -> (Vec<u8>, u64, u64) {
    let decoded: u64 = held.iter().flatten().map(|r| r.end - r.start).sum();
    let mut bits = vec![
        0u8;
        (decoded.div_ceil(8) as usize)
            .next_multiple_of(BITMAP_PADDING)
            .max(BITMAP_PADDING)
    ];
    let mut at = 0u64; // the decoded row of the current range's start
    let mut kept = 0u64;
    let everything = 0..u64::MAX;
    let all = std::slice::from_ref(&everything);
    for (slot, ranges) in held.iter().enumerate() {
        let keep: &[Range<u64>] = kept_of.get(slot).copied().flatten().unwrap_or(all);
        // Both lists are sorted and disjoint: one merge over them. A filter's exact rows can be a
        // range per row, so a nested loop over both would be quadratic.
        let mut k = 0usize;
        for h in ranges {
            // Ranges ending before this held range cannot meet a later one either.
            while keep.get(k).is_some_and(|r| r.end <= h.start) {
                k += 1;
            }
            // Those meeting it; the last of them may reach into the next held range, so `k` stays.
            for r in keep[k.min(keep.len())..].iter().take_while(|r| r.start < h.end) {
                let (s, e) = (h.start.max(r.start), h.end.min(r.end));
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
        if i.is_multiple_of(8) && to - i >= 8 {
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
    use std::sync::Arc;

    use arrow::array::{
        Array, ArrayRef, BooleanArray, DictionaryArray, Int64Array, ListArray, StringArray, StringViewArray,
    };
    use arrow::datatypes::Int32Type;
    use proptest::prelude::*;

    use super::*;
    use crate::decode::exec::HostExecutor;
    use crate::decode::row_filter::tests::EmuExecutor;
    use crate::decode::table::upload_array;

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

    /// Each row group's rows held (decoded), and the rows the plan keeps of each (`None`: all).
    type Cut = (Vec<Vec<Range<u64>>>, [Option<&'static [Range<u64>]>; 2]);

    /// Two row groups: the first read page by page (its pages hold rows 0..40 and 100..140; the plan
    /// keeps 5..12, 38..40 and 100..101), the second whole (60 rows, all kept).
    fn a_cut() -> Cut {
        static KEPT: [Range<u64>; 3] = [5..12, 38..40, 100..101];
        (vec![vec![0..40, 100..140], vec![0..60]], [Some(&KEPT), None])
    }

    #[test]
    fn the_mask_keeps_the_plans_rows_of_the_rows_decoded() {
        let (held, kept_of) = a_cut();
        let (bits, decoded, kept) = mask_of(&kept_of, &held);
        assert_eq!((decoded, kept), (140, 7 + 2 + 1 + 60));
        let set: Vec<u64> = (0..decoded)
            .filter(|&i| bits[(i / 8) as usize] >> (i % 8) & 1 == 1)
            .collect();
        let want: Vec<u64> = (5..12).chain(38..40).chain([40]).chain(80..140).collect();
        assert_eq!(set, want);
        assert_eq!(bits.len() % BITMAP_PADDING, 0);
    }

    /// Sorted, disjoint, non-empty ranges below 300 (the shape of held and kept rows).
    fn ranges() -> impl Strategy<Value = Vec<Range<u64>>> {
        proptest::collection::vec((0u64..300, 1u64..20), 0..40).prop_map(|mut v| {
            v.sort_unstable();
            let mut out: Vec<Range<u64>> = Vec::new();
            for (s, len) in v {
                let start = out.last().map_or(s, |l| s.max(l.end + 1));
                out.push(start..start + len);
            }
            out
        })
    }

    proptest! {
        /// The merge equals the rows each kept range shares with each held range, row by row.
        #[test]
        fn the_mask_equals_a_brute_force_cut(
            held in proptest::collection::vec(ranges(), 1..4),
            keep in proptest::collection::vec(proptest::option::of(ranges()), 1..4),
        ) {
            let kept_of: Vec<Option<&[Range<u64>]>> = keep.iter().map(|k| k.as_deref()).collect();
            let (bits, decoded, kept) = mask_of(&kept_of, &held);
            let mut want = Vec::new();
            for (slot, ranges) in held.iter().enumerate() {
                for row in ranges.iter().flat_map(Clone::clone) {
                    let k = kept_of.get(slot).copied().flatten();
                    want.push(k.is_none_or(|k| k.iter().any(|r| r.contains(&row))));
                }
            }
            prop_assert_eq!(decoded, want.len() as u64);
            prop_assert_eq!(kept, want.iter().filter(|&&b| b).count() as u64);
            let got: Vec<bool> = (0..decoded).map(|i| bits[(i / 8) as usize] >> (i % 8) & 1 == 1).collect();
            prop_assert_eq!(got, want);
        }
    }

    /// Columns of the layouts the GPU decodes, cut by the mask of [`a_cut`] through the kernels: the
    /// references (`HostExecutor`) and the CUDA source in the emulation (`EmuExecutor`) both give
    /// arrow-rs's filter of the same rows.
    #[test]
    fn columns_cut_to_the_plans_rows_equal_arrow_rs_filter() {
        let (held, kept_of) = a_cut();
        let (bits, decoded, _) = mask_of(&kept_of, &held);
        let n = decoded as usize;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter(
                (0..n as i64).map(|i| (i % 3 != 0).then_some(i * 7)),
            )),
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 5 != 1).then(|| format!("s{i}"))),
            )),
            Arc::new(StringViewArray::from_iter(
                (0..n).map(|i| Some(format!("a view longer than twelve {i}"))),
            )),
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
            Arc::new(DictionaryArray::<Int32Type>::from_iter(
                (0..n).map(|i| (i % 4 != 2).then_some(["x", "y"][i % 2])),
            )),
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>((0..n).map(|i| {
                (i % 6 != 0).then(|| (0..(i % 3) as i32).map(Some).collect::<Vec<_>>())
            }))),
        ];
        let selected = BooleanArray::from_iter((0..n).map(|i| Some(bits[i / 8] >> (i % 8) & 1 == 1)));
        let want: Vec<ArrayRef> = columns
            .iter()
            .map(|c| arrow::compute::filter(c, &selected).unwrap())
            .collect();
        fn cut<E: FilterExecutor<Buffer = Vec<u8>>>(
            exec: &mut E,
            columns: &[ArrayRef],
            bits: &[u8],
            n: usize,
        ) -> Result<Vec<ArrayRef>> {
            let arrays = columns
                .iter()
                .map(|c| upload_array(&c.to_data(), &mut |b: &[u8]| Ok(b.to_vec())))
                .collect::<Result<Vec<_>>>()?;
            let mask = DeviceArray {
                data_type: DataType::Boolean,
                len: n,
                null_count: 0,
                validity: None,
                buffers: vec![bits.to_vec()],
                children: Vec::new(),
            };
            let ctx = FilterContext {
                names: (0..columns.len()).map(|k| format!("c{k}")).collect(),
                ..Default::default()
            };
            let (out, rows) = compact_arrays(exec, arrays, &mask, ctx)?;
            assert_eq!(rows, 70);
            out.iter().map(DeviceArray::to_host).collect()
        }
        let host = cut(&mut HostExecutor::new(), &columns, &bits, n).unwrap();
        for (k, (g, w)) in host.iter().zip(&want).enumerate() {
            assert_eq!(g.to_data(), w.to_data(), "column {k}, references");
        }
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let emulated = cut(&mut EmuExecutor::default(), &columns, &bits, n).unwrap();
        for (k, (g, w)) in emulated.iter().zip(&want).enumerate() {
            assert_eq!(g.to_data(), w.to_data(), "column {k}, emulation");
        }
    }
}
