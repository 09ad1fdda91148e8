//! Pruning: which row groups, rows and pages of a file could hold a row a [`Predicate`] accepts,
//! decided from metadata before any data byte moves. Pure apart from the bloom filters (read through
//! `parquet`'s [`Sbbf`] reader) and dictionary pages (one small read each, decoded by `parquet`'s
//! page reader), both only for `=` / `in` tests on row groups the statistics kept; a chunk's
//! dictionary rules a value out only when every data page of the chunk is dictionary-encoded.
//!
//! Every decision is conservative: a row group, page or row range is dropped only when metadata
//! proves no row in it is accepted. Statistics may be absent (unknown: kept), truncated (byte
//! arrays: the bounds still bound, but are not values, so `!=` never prunes on inexact ones),
//! deprecated (`min`/`max` of old writers, in signed order: ignored for unsigned-ordered columns), or
//! hold NaN (ignored). Floats compare as IEEE 754 ([`super::bind`]).
//!
//! The result, a [`ScanSelection`], is made for page-level I/O: per surviving row group its row
//! ranges, and per column chunk of the projection the byte ranges of the pages that hold those rows
//! (from the OffsetIndex; offsets-only page indexes prune nothing but still give page ranges), plus
//! the dictionary page.

// A set of row ranges with one range in it is a `vec![a..b]`, as clear as it gets.
#![allow(clippy::single_range_in_vec_init)]

use std::collections::HashMap;
use std::ops::Range;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt64Array};
use arrow::datatypes::{DataType, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::basic::Encoding;
use parquet::basic::{SortOrder, Type as PhysicalType};
use parquet::bloom_filter::Sbbf;
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;

use super::bind::compare;
use super::{CmpOp, Leaf, Predicate, Test};
use crate::error::{Error, Location, Result};
use crate::metadata::chunk_start;
use crate::report::{ColumnPruningReport, PruningReport};

/// What survives pruning: the row groups (in the order asked), their row ranges and page byte
/// ranges, and the counters.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanSelection {
    /// Surviving row groups, in the order of the row groups given to [`prune`].
    pub row_groups: Vec<RowGroupSelection>,
    /// What was pruned, per reason and per filter column.
    pub report: PruningReport,
}

impl ScanSelection {
    /// The surviving row groups' indices.
    pub(crate) fn row_group_indices(&self) -> Vec<usize> {
        self.row_groups.iter().map(|g| g.row_group).collect()
    }
}

/// One surviving row group.
#[derive(Debug, Clone, PartialEq)]
pub struct RowGroupSelection {
    /// Its index in the file.
    pub row_group: usize,
    /// Its rows.
    pub num_rows: u64,
    /// The rows (0 = the row group's first) that may match: sorted, disjoint, non-empty ranges.
    pub rows: Vec<Range<u64>>,
    /// Per column chunk of the projection, the bytes to fetch.
    pub chunks: Vec<ChunkPages>,
    /// Whether the statistics prove every row accepted: its rows need no filter.
    pub all_accepted: bool,
    /// The rows the statistics prove accepted (of the row group, or of its pages by the page
    /// index): sorted, disjoint ranges within `rows`.
    pub surely_accepted: Vec<Range<u64>>,
}

/// The bytes of one column chunk that hold the selected rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkPages {
    /// Leaf column index.
    pub column: usize,
    /// The whole chunk's file byte range.
    pub chunk: Range<u64>,
    /// The dictionary page's byte range (the chunk's start to its first data page), when there is one.
    pub dictionary: Option<Range<u64>>,
    /// The data pages holding selected rows (file byte ranges, header included, in file order), or
    /// `None` without an OffsetIndex (then the whole chunk is needed).
    pub pages: Option<Vec<Range<u64>>>,
}

/// Sorted, disjoint row ranges.
type Ranges = Vec<Range<u64>>;

fn intersect(a: &Ranges, b: &Ranges) -> Ranges {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].start.max(b[j].start), a[i].end.min(b[j].end));
        if s < e {
            out.push(s..e);
        }
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

fn union(a: &Ranges, b: &Ranges) -> Ranges {
    let mut all: Ranges = a.iter().chain(b).cloned().collect();
    all.sort_by_key(|r| r.start);
    let mut out: Ranges = Vec::new();
    for r in all {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Minimum, maximum, null count and rows of a set of containers (row groups or pages), as Arrow
/// arrays of the column's value type; null where unknown.
struct Stats {
    mins: ArrayRef,
    maxes: ArrayRef,
    nulls: UInt64Array,
    rows: Vec<Option<u64>>,
    /// Whether the bounds are the values themselves (not truncated), where it matters (byte arrays).
    exact: Vec<bool>,
}

impl Stats {
    fn len(&self) -> usize {
        self.mins.len()
    }

    /// Only a null count equal to the rows says "all null": writers put -1 (read as 2^64 - 1) for
    /// unknown, and some write ColumnIndexes whose null_pages wrongly say so of required columns.
    fn all_null(&self, i: usize) -> bool {
        self.nulls.is_valid(i) && self.rows[i].is_some_and(|r| self.nulls.value(i) == r)
    }

    /// A known null count of 0.
    fn no_nulls(&self, i: usize) -> bool {
        self.nulls.is_valid(i) && self.nulls.value(i) == 0
    }

    /// `proves(a, op, v)[i]`: a known `a[i] op v`.
    fn proves(&self, a: &ArrayRef, op: CmpOp, v: &ArrayRef) -> Result<Vec<bool>> {
        let r = compare(a, op, v)?;
        Ok((0..self.len()).map(|i| r.is_valid(i) && r.value(i)).collect())
    }

    /// No row of a container is equal to `v`.
    fn never_eq(&self, v: &ArrayRef) -> Result<Vec<bool>> {
        let below = self.proves(&self.maxes, CmpOp::Lt, v)?;
        let above = self.proves(&self.mins, CmpOp::Gt, v)?;
        Ok((0..self.len()).map(|i| below[i] || above[i]).collect())
    }

    /// Every non-null row of a container equals `v` (bounds exact and both `v`). Never for floats:
    /// under IEEE, NaN rows (left out of the statistics) are unequal to everything.
    fn always_eq(&self, leaf: &Leaf, v: &ArrayRef) -> Result<Vec<bool>> {
        if is_float(&leaf.value_type) {
            return Ok(vec![false; self.len()]);
        }
        let lo = self.proves(&self.mins, CmpOp::Eq, v)?;
        let hi = self.proves(&self.maxes, CmpOp::Eq, v)?;
        Ok((0..self.len()).map(|i| lo[i] && hi[i] && self.exact[i]).collect())
    }
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

/// Per container: could a row of it pass `leaf`? False only where the statistics prove not.
fn could_match(leaf: &Leaf, stats: &Stats) -> Result<Vec<bool>> {
    let n = stats.len();
    let all_null = |i: usize| stats.all_null(i);
    let proves = |a: &ArrayRef, op: CmpOp, v: &ArrayRef| stats.proves(a, op, v);
    let never_eq = |v: &ArrayRef| stats.never_eq(v);
    let always_eq = |v: &ArrayRef| stats.always_eq(leaf, v);
    let excluded: Vec<bool> = match &leaf.test {
        Test::IsNull => (0..n).map(|i| stats.no_nulls(i)).collect(),
        Test::IsNotNull => (0..n).map(all_null).collect(),
        Test::Cmp(op, v) => {
            let by_bounds = match op {
                CmpOp::Eq => never_eq(v)?,
                CmpOp::NotEq => always_eq(v)?,
                CmpOp::Lt => proves(&stats.mins, CmpOp::GtEq, v)?,
                CmpOp::LtEq => proves(&stats.mins, CmpOp::Gt, v)?,
                CmpOp::Gt => proves(&stats.maxes, CmpOp::LtEq, v)?,
                CmpOp::GtEq => proves(&stats.maxes, CmpOp::Lt, v)?,
            };
            (0..n).map(|i| by_bounds[i] || all_null(i)).collect()
        }
        Test::In(values) => {
            let mut out: Vec<bool> = (0..n).map(all_null).collect();
            let mut none_equal = vec![true; n];
            for v in values {
                let e = never_eq(v)?;
                none_equal.iter_mut().zip(e).for_each(|(a, b)| *a &= b);
            }
            out.iter_mut().zip(none_equal).for_each(|(a, b)| *a |= b);
            out
        }
        Test::NotIn(values) => {
            let mut out: Vec<bool> = (0..n).map(all_null).collect();
            for v in values {
                let e = always_eq(v)?;
                out.iter_mut().zip(e).for_each(|(a, b)| *a |= b);
            }
            out
        }
    };
    Ok(excluded.into_iter().map(|x| !x).collect())
}

/// Per container: does every row of it pass `leaf`? True only where the statistics prove it: no
/// null (a null is never accepted but by `is null`) and bounds inside the test. Floats' ordered tests
/// and equalities never prove it: NaN rows, left out of the bounds, fail them under IEEE.
fn surely_matches(leaf: &Leaf, stats: &Stats) -> Result<Vec<bool>> {
    let n = stats.len();
    let float = is_float(&leaf.value_type);
    let no_nulls = |i: usize| stats.no_nulls(i);
    let proves = |a: &ArrayRef, op: CmpOp, v: &ArrayRef| stats.proves(a, op, v);
    let never_eq = |v: &ArrayRef| stats.never_eq(v);
    let always_eq = |v: &ArrayRef| stats.always_eq(leaf, v);
    let bounds: Vec<bool> = match &leaf.test {
        Test::IsNull => return Ok((0..n).map(|i| stats.all_null(i)).collect()),
        Test::IsNotNull => return Ok((0..n).map(no_nulls).collect()),
        Test::Cmp(op, v) => match op {
            _ if float && *op != CmpOp::NotEq => vec![false; n],
            CmpOp::Eq => always_eq(v)?,
            CmpOp::NotEq => never_eq(v)?,
            CmpOp::Lt => proves(&stats.maxes, CmpOp::Lt, v)?,
            CmpOp::LtEq => proves(&stats.maxes, CmpOp::LtEq, v)?,
            CmpOp::Gt => proves(&stats.mins, CmpOp::Gt, v)?,
            CmpOp::GtEq => proves(&stats.mins, CmpOp::GtEq, v)?,
        },
        Test::In(values) => {
            let mut any = vec![false; n];
            for v in values {
                any.iter_mut().zip(always_eq(v)?).for_each(|(a, b)| *a |= b);
            }
            any
        }
        Test::NotIn(values) => {
            let mut all = vec![true; n];
            for v in values {
                all.iter_mut().zip(never_eq(v)?).for_each(|(a, b)| *a &= b);
            }
            all
        }
    };
    Ok((0..n).map(|i| bounds[i] && no_nulls(i)).collect())
}

/// Whether the predicate holds, given each leaf's (numbered left to right) verdict.
fn eval_bool(p: &Predicate, leaf_no: &mut usize, leaf: &dyn Fn(usize) -> bool) -> bool {
    match p {
        Predicate::Leaf(_) => {
            let i = *leaf_no;
            *leaf_no += 1;
            leaf(i)
        }
        // Every part is walked (no short cut) so that the leaves keep their numbers.
        Predicate::And(parts) => parts.iter().fold(true, |acc, q| eval_bool(q, leaf_no, leaf) & acc),
        Predicate::Or(parts) => parts.iter().fold(false, |acc, q| eval_bool(q, leaf_no, leaf) | acc),
    }
}

/// NaN bounds say nothing (a writer that let NaN into them may have left others out): unknown.
fn without_nan(a: ArrayRef) -> ArrayRef {
    use arrow::datatypes::{Float32Type, Float64Type};
    let nan: Option<BooleanArray> = match a.data_type() {
        DataType::Float32 => Some(
            a.as_primitive::<Float32Type>()
                .iter()
                .map(|v| Some(v.is_some_and(f32::is_nan)))
                .collect(),
        ),
        DataType::Float64 => Some(
            a.as_primitive::<Float64Type>()
                .iter()
                .map(|v| Some(v.is_some_and(f64::is_nan)))
                .collect(),
        ),
        _ => None,
    };
    match nan {
        Some(mask) => arrow::compute::nullif(&a, &mask).unwrap_or(a),
        None => a,
    }
}

/// Bounds in the leaf's value type (a dictionary-typed column's statistics may come as dictionaries).
fn value_typed(a: ArrayRef, t: &DataType) -> Result<ArrayRef> {
    let a = if a.data_type() == t {
        a
    } else {
        arrow::compute::cast(&a, t).map_err(|e| Error::parquet(Location::default(), e))?
    };
    Ok(without_nan(a))
}

/// What one filter column's metadata says, resolved once.
struct ColumnMeta<'a> {
    name: String,
    converter: Option<StatisticsConverter<'a>>,
    /// Leaf column index in the file.
    leaf: Option<usize>,
    byte_array: bool,
    unsigned_order: bool,
}

/// Row-group statistics of `leaf`'s column over `row_groups`.
fn row_group_stats(
    meta: &ParquetMetaData,
    col: &ColumnMeta,
    leaf: &Leaf,
    row_groups: &[usize],
) -> Result<Option<Stats>> {
    let (Some(conv), Some(ci)) = (&col.converter, col.leaf) else {
        return Ok(None);
    };
    let err = |e: parquet::errors::ParquetError| Error::parquet(Location::default(), e);
    let groups: Vec<_> = row_groups.iter().map(|&g| meta.row_group(g)).collect();
    let mut mins = value_typed(
        conv.row_group_mins(groups.iter().copied()).map_err(err)?,
        &leaf.value_type,
    )?;
    let mut maxes = value_typed(
        conv.row_group_maxes(groups.iter().copied()).map_err(err)?,
        &leaf.value_type,
    )?;
    let nulls = conv.row_group_null_counts(groups.iter().copied()).map_err(err)?;
    let min_exact = conv.row_group_is_min_value_exact(groups.iter().copied()).map_err(err)?;
    let max_exact = conv.row_group_is_max_value_exact(groups.iter().copied()).map_err(err)?;
    // Old writers' `min`/`max` were computed in signed order: wrong bounds for unsigned-ordered
    // columns (strings, unsigned integers), so unknown.
    let untrusted: BooleanArray = groups
        .iter()
        .map(|g| {
            let deprecated = g.column(ci).statistics().is_some_and(|s| s.is_min_max_deprecated());
            Some(deprecated && col.unsigned_order)
        })
        .collect();
    if untrusted.true_count() > 0 {
        let arrow_err = |e| Error::parquet(Location::default(), e);
        mins = arrow::compute::nullif(&mins, &untrusted).map_err(arrow_err)?;
        maxes = arrow::compute::nullif(&maxes, &untrusted).map_err(arrow_err)?;
    }
    let exact = (0..groups.len())
        .map(|i| !col.byte_array || (min_exact.value(i) && max_exact.value(i)))
        .collect();
    Ok(Some(Stats {
        mins,
        maxes,
        nulls,
        rows: groups.iter().map(|g| Some(g.num_rows().max(0) as u64)).collect(),
        exact,
    }))
}

/// Page statistics of `leaf`'s column in row group `g`, with each page's first row; `None` without
/// a ColumnIndex and OffsetIndex for it.
fn page_stats(meta: &ParquetMetaData, col: &ColumnMeta, leaf: &Leaf, g: usize) -> Result<Option<(Stats, Vec<u64>)>> {
    let (Some(conv), Some(ci), Some(index)) = (&col.converter, col.leaf, meta.page_index()) else {
        return Ok(None);
    };
    let (Some(_), Some(offsets)) = (index.column_index(g, ci), index.offset_index(g, ci)) else {
        return Ok(None);
    };
    let locations = offsets.page_locations();
    let err = |e: parquet::errors::ParquetError| Error::parquet(Location::default(), e);
    let index = index.as_ref();
    let mins = value_typed(conv.data_page_mins(index, [g].iter()).map_err(err)?, &leaf.value_type)?;
    let maxes = value_typed(conv.data_page_maxes(index, [g].iter()).map_err(err)?, &leaf.value_type)?;
    let nulls = conv.data_page_null_counts(index, [g].iter()).map_err(err)?;
    if mins.len() != locations.len() || maxes.len() != locations.len() || nulls.len() != locations.len() {
        // A ColumnIndex that disagrees with its OffsetIndex: use neither.
        return Ok(None);
    }
    let group_rows = meta.row_group(g).num_rows().max(0) as u64;
    let firsts: Vec<u64> = locations.iter().map(|l| l.first_row_index.max(0) as u64).collect();
    if firsts.windows(2).any(|w| w[0] > w[1])
        || firsts.last().is_some_and(|&l| l > group_rows)
        || firsts.first().is_some_and(|&f| f != 0)
    {
        return Ok(None);
    }
    let rows = (0..firsts.len())
        .map(|i| Some(firsts.get(i + 1).copied().unwrap_or(group_rows) - firsts[i]))
        .collect();
    Ok(Some((
        Stats {
            mins,
            maxes,
            nulls,
            rows,
            // Page bounds of byte arrays may be truncated, and the ColumnIndex does not say.
            exact: vec![!col.byte_array; locations.len()],
        },
        firsts,
    )))
}

/// The literals of an `=` / `in` leaf as the bytes its bloom filter hashes (the Parquet plain
/// encoding of the physical value), or `None` where that is not sure (other tests, types whose
/// physical form we do not derive here).
fn bloom_probes(leaf: &Leaf, physical: PhysicalType) -> Option<Vec<Vec<u8>>> {
    use arrow::datatypes::*;
    let values: Vec<&ArrayRef> = match &leaf.test {
        Test::Cmp(CmpOp::Eq, v) => vec![v],
        Test::In(vs) => vs.iter().collect(),
        _ => return None,
    };
    let probe = |v: &ArrayRef| -> Option<Vec<u8>> {
        Some(match (v.data_type(), physical) {
            (DataType::Int8, PhysicalType::INT32) => {
                (v.as_primitive::<Int8Type>().value(0) as i32).to_le_bytes().to_vec()
            }
            (DataType::Int16, PhysicalType::INT32) => {
                (v.as_primitive::<Int16Type>().value(0) as i32).to_le_bytes().to_vec()
            }
            (DataType::Int32, PhysicalType::INT32) => v.as_primitive::<Int32Type>().value(0).to_le_bytes().to_vec(),
            (DataType::UInt8, PhysicalType::INT32) => {
                (v.as_primitive::<UInt8Type>().value(0) as i32).to_le_bytes().to_vec()
            }
            (DataType::UInt16, PhysicalType::INT32) => {
                (v.as_primitive::<UInt16Type>().value(0) as i32).to_le_bytes().to_vec()
            }
            (DataType::UInt32, PhysicalType::INT32) => v.as_primitive::<UInt32Type>().value(0).to_le_bytes().to_vec(),
            (DataType::Date32, PhysicalType::INT32) => v.as_primitive::<Date32Type>().value(0).to_le_bytes().to_vec(),
            (DataType::Int64, PhysicalType::INT64) => v.as_primitive::<Int64Type>().value(0).to_le_bytes().to_vec(),
            (DataType::UInt64, PhysicalType::INT64) => v.as_primitive::<UInt64Type>().value(0).to_le_bytes().to_vec(),
            (DataType::Float32, PhysicalType::FLOAT) => {
                let x = v.as_primitive::<Float32Type>().value(0);
                // -0 and 0 are equal but hash apart.
                if x == 0.0 {
                    return None;
                }
                x.to_le_bytes().to_vec()
            }
            (DataType::Float64, PhysicalType::DOUBLE) => {
                let x = v.as_primitive::<Float64Type>().value(0);
                if x == 0.0 {
                    return None;
                }
                x.to_le_bytes().to_vec()
            }
            (DataType::Utf8, PhysicalType::BYTE_ARRAY) => v.as_string::<i32>().value(0).as_bytes().to_vec(),
            (DataType::LargeUtf8, PhysicalType::BYTE_ARRAY) => v.as_string::<i64>().value(0).as_bytes().to_vec(),
            (DataType::Utf8View, PhysicalType::BYTE_ARRAY) => v.as_string_view().value(0).as_bytes().to_vec(),
            (DataType::Binary, PhysicalType::BYTE_ARRAY) => v.as_binary::<i32>().value(0).to_vec(),
            (DataType::LargeBinary, PhysicalType::BYTE_ARRAY) => v.as_binary::<i64>().value(0).to_vec(),
            (DataType::BinaryView, PhysicalType::BYTE_ARRAY) => v.as_binary_view().value(0).to_vec(),
            _ => return None,
        })
    };
    values.into_iter().map(probe).collect()
}

/// Whether every data page of `chunk` is dictionary-encoded, as its page encoding statistics say
/// (without them: unknown, so no).
fn all_dictionary_encoded(chunk: &ColumnChunkMetaData) -> bool {
    use parquet::basic::PageType;
    if chunk.dictionary_page_offset().is_none() {
        return false;
    }
    if let Some(mask) = chunk.page_encoding_stats_mask() {
        return mask.is_only(Encoding::PLAIN_DICTIONARY) || mask.is_only(Encoding::RLE_DICTIONARY);
    }
    chunk.page_encoding_stats().is_some_and(|stats| {
        stats
            .iter()
            .filter(|s| matches!(s.page_type, PageType::DATA_PAGE | PageType::DATA_PAGE_V2))
            .all(|s| matches!(s.encoding, Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY))
    })
}

/// The bytes of a file from `start`, as a [`ChunkReader`] at the file's offsets.
struct Window {
    start: u64,
    bytes: Bytes,
}

impl Length for Window {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for Window {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self
            .get_bytes(start, (self.len().saturating_sub(start)) as usize)?
            .reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let from = start
            .checked_sub(self.start)
            .map(|f| f as usize)
            .filter(|&f| f.checked_add(length).is_some_and(|e| e <= self.bytes.len()));
        match from {
            Some(f) => Ok(self.bytes.slice(f..f + length)),
            None => Err(parquet::errors::ParquetError::EOF(format!(
                "{start}+{length} is outside the dictionary page's bytes"
            ))),
        }
    }
}

/// The dictionary's values of an all-dictionary-encoded `chunk`, each in its Parquet plain encoding
/// (a BYTE_ARRAY's without its length), or `None` where it cannot say (not all pages dictionary
/// encoded, unreadable, a type not handled).
fn dictionary_values<R: ChunkReader>(chunk: &ColumnChunkMetaData, file: &R) -> Option<Vec<Bytes>> {
    if !all_dictionary_encoded(chunk) {
        return None;
    }
    let start = chunk_start(chunk).max(0) as u64;
    let end = (chunk.data_page_offset().max(0) as u64).min(start + chunk.compressed_size().max(0) as u64);
    let bytes = file.get_bytes(start, end.checked_sub(start)? as usize).ok()?;
    let window = std::sync::Arc::new(Window { start, bytes });
    let mut pages = SerializedPageReader::new(window, chunk, chunk.num_values().max(0) as usize, None).ok()?;
    let Ok(Some(Page::DictionaryPage { buf, num_values, .. })) = pages.get_next_page() else {
        return None;
    };
    let width = match chunk.column_type() {
        PhysicalType::INT32 | PhysicalType::FLOAT => Some(4),
        PhysicalType::INT64 | PhysicalType::DOUBLE => Some(8),
        PhysicalType::BYTE_ARRAY => None,
        _ => return None,
    };
    let mut out = Vec::with_capacity(num_values as usize);
    let mut at = 0usize;
    for _ in 0..num_values {
        let (from, len) = match width {
            Some(w) => (at, w),
            None => {
                let len = u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?) as usize;
                (at + 4, len)
            }
        };
        let to = from.checked_add(len).filter(|&t| t <= buf.len())?;
        out.push(buf.slice(from..to));
        at = to;
    }
    Some(out)
}

/// Prunes `row_groups` of a file (its `meta`, Arrow `schema`, and `file` for bloom filters; `None`
/// reads none) by `predicate`, and lays out the surviving pages of the projection's leaf columns
/// `leaves`. `location` names the file in errors.
pub fn prune<R: ChunkReader>(
    meta: &ParquetMetaData,
    schema: &Schema,
    predicate: &Predicate,
    row_groups: &[usize],
    leaves: &[usize],
    file: Option<&R>,
    location: &Location,
) -> Result<ScanSelection> {
    let name_file = |e: Error| match e {
        Error::Parquet { source, .. } => Error::Parquet {
            location: location.clone(),
            source,
        },
        other => other,
    };
    let descr = meta.file_metadata().schema_descr();
    let orders = meta.file_metadata().column_orders().map(|o| o.as_slice());
    let mut columns: HashMap<String, ColumnMeta> = HashMap::new();
    for name in predicate.columns() {
        let converter = StatisticsConverter::try_new(&name, schema, descr)
            .ok()
            .map(|c| c.with_missing_null_counts_as_zero(false).with_column_orders(orders));
        let leaf = converter.as_ref().and_then(|c| c.parquet_column_index());
        let (byte_array, unsigned_order) = leaf.map_or((false, false), |l| {
            let c = descr.column(l);
            (
                matches!(
                    c.physical_type(),
                    PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY
                ),
                c.sort_order() == SortOrder::UNSIGNED,
            )
        });
        columns.insert(
            name.clone(),
            ColumnMeta {
                name,
                converter,
                leaf,
                byte_array,
                unsigned_order,
            },
        );
    }

    // Leaves in order, each with its row-group verdicts by statistics.
    let leaves_of = predicate.leaves();
    let mut stats_verdict: Vec<Vec<bool>> = Vec::new();
    let mut stats_whole: Vec<Vec<bool>> = Vec::new();
    for leaf in &leaves_of {
        let col = &columns[&leaf.column];
        let (could, surely) = match row_group_stats(meta, col, leaf, row_groups).map_err(name_file)? {
            Some(s) => (
                could_match(leaf, &s).map_err(name_file)?,
                surely_matches(leaf, &s).map_err(name_file)?,
            ),
            None => (vec![true; row_groups.len()], vec![false; row_groups.len()]),
        };
        stats_verdict.push(could);
        stats_whole.push(surely);
    }

    let mut report = PruningReport {
        row_groups: row_groups.len() as u64,
        ..Default::default()
    };
    let mut per_column: HashMap<String, ColumnPruningReport> = HashMap::new();
    for name in columns.keys() {
        per_column.insert(
            name.clone(),
            ColumnPruningReport {
                column: name.clone(),
                ..Default::default()
            },
        );
    }

    let mut out = Vec::new();
    let mut bloom_cache: HashMap<(usize, usize), Option<Sbbf>> = HashMap::new();
    let mut dictionary_cache: HashMap<(usize, usize), Option<Vec<Bytes>>> = HashMap::new();
    for (k, &g) in row_groups.iter().enumerate() {
        let group = meta.row_group(g);
        let num_rows = group.num_rows().max(0) as u64;
        report.rows += num_rows;
        let full: Ranges = if num_rows > 0 { vec![0..num_rows] } else { Vec::new() };
        let chunk_bytes = |c: usize| group.column(c).compressed_size().max(0) as u64;
        let projection_bytes: u64 = leaves.iter().map(|&c| chunk_bytes(c)).sum();
        report.bytes += projection_bytes;

        // Which leaves may still match in this row group, narrowed stage by stage, and the rows the
        // predicate keeps over them.
        let mut alive: Vec<bool> = (0..leaves_of.len()).map(|i| stats_verdict[i][k]).collect();
        let surviving = |alive: &[bool]| {
            let mut leaf_no = 0;
            eval_ranges(predicate, &mut leaf_no, &mut |i, _| {
                if alive[i] { full.clone() } else { Vec::new() }
            })
        };

        // Stage 1: row-group statistics.
        for (i, leaf) in leaves_of.iter().enumerate() {
            if !alive[i] {
                counts(&mut per_column, &leaf.column).row_groups_pruned_by_statistics += 1;
            }
        }
        if surviving(&alive).is_empty() {
            report.row_groups_pruned_by_statistics += 1;
            report.bytes_avoided += projection_bytes;
            continue;
        }

        // Stage 2: bloom filters of `=` / `in` leaves the statistics kept.
        if let Some(file) = file {
            for (i, leaf) in leaves_of.iter().enumerate() {
                let col = &columns[&leaf.column];
                let Some(ci) = col.leaf else { continue };
                if !alive[i] || group.column(ci).bloom_filter_offset().is_none() {
                    continue;
                }
                let Some(probes) = bloom_probes(leaf, descr.column(ci).physical_type()) else {
                    continue;
                };
                let entry = bloom_cache.entry((g, ci)).or_insert_with(|| {
                    counts(&mut per_column, &leaf.column).bloom_filters_read += 1;
                    // An unreadable bloom filter prunes nothing; the data read will say what is wrong.
                    Sbbf::read_from_column_chunk(group.column(ci), file).ok().flatten()
                });
                if let Some(bloom) = entry
                    && probes.iter().all(|p| !bloom.check(p.as_slice()))
                {
                    alive[i] = false;
                    counts(&mut per_column, &leaf.column).row_groups_pruned_by_bloom_filter += 1;
                }
            }
        }
        if surviving(&alive).is_empty() {
            report.row_groups_pruned_by_bloom_filter += 1;
            report.bytes_avoided += projection_bytes;
            continue;
        }

        // Stage 3: dictionaries of `=` / `in` leaves still standing, where every data page uses one.
        if let Some(file) = file {
            for (i, leaf) in leaves_of.iter().enumerate() {
                let col = &columns[&leaf.column];
                let Some(ci) = col.leaf else { continue };
                if !(alive[i] && all_dictionary_encoded(group.column(ci))) {
                    continue;
                }
                let Some(probes) = bloom_probes(leaf, descr.column(ci).physical_type()) else {
                    continue;
                };
                let entry = dictionary_cache.entry((g, ci)).or_insert_with(|| {
                    counts(&mut per_column, &leaf.column).dictionary_pages_read += 1;
                    dictionary_values(group.column(ci), file)
                });
                if let Some(values) = entry
                    && probes
                        .iter()
                        .all(|p| !values.iter().any(|v| v.as_ref() == p.as_slice()))
                {
                    alive[i] = false;
                    counts(&mut per_column, &leaf.column).row_groups_pruned_by_dictionary += 1;
                }
            }
        }
        if surviving(&alive).is_empty() {
            report.row_groups_pruned_by_dictionary += 1;
            report.bytes_avoided += projection_bytes;
            continue;
        }

        // Stage 4: the page index, down to row ranges (those that may match, and those its page
        // statistics prove accepted).
        let mut page_verdicts: Vec<Option<Ranges>> = Vec::new();
        let mut page_sure: Vec<Ranges> = Vec::new();
        for (i, leaf) in leaves_of.iter().enumerate() {
            let col = &columns[&leaf.column];
            if !alive[i] {
                page_verdicts.push(Some(Vec::new()));
                page_sure.push(Vec::new());
                continue;
            }
            match page_stats(meta, col, leaf, g).map_err(name_file)? {
                Some((stats, firsts)) => {
                    let could = could_match(leaf, &stats).map_err(name_file)?;
                    let surely = surely_matches(leaf, &stats).map_err(name_file)?;
                    let c = counts(&mut per_column, &col.name);
                    let (mut ranges, mut sure) = (Vec::new(), Vec::new());
                    for (p, keep) in could.iter().enumerate() {
                        let end = firsts.get(p + 1).copied().unwrap_or(num_rows);
                        if *keep {
                            ranges = union(&ranges, &vec![firsts[p]..end]);
                        } else {
                            c.pages_pruned_by_page_index += 1;
                        }
                        if surely.get(p).copied().unwrap_or(false) {
                            sure = union(&sure, &vec![firsts[p]..end]);
                        }
                    }
                    ranges.retain(|r| r.start < r.end);
                    sure.retain(|r| r.start < r.end);
                    page_verdicts.push(Some(ranges));
                    page_sure.push(sure);
                }
                None => {
                    counts(&mut per_column, &col.name).chunks_without_column_index += 1;
                    page_verdicts.push(None);
                    page_sure.push(if stats_whole[i][k] { full.clone() } else { Vec::new() });
                }
            }
        }
        let mut leaf_no = 0;
        let rows = eval_ranges(predicate, &mut leaf_no, &mut |i, _| {
            page_verdicts[i].clone().unwrap_or_else(|| full.clone())
        });
        if rows.is_empty() {
            report.row_groups_pruned_by_page_index += 1;
            report.bytes_avoided += projection_bytes;
            continue;
        }
        report.rows_selected += rows.iter().map(|r| r.end - r.start).sum::<u64>();

        // The pages of the projection's chunks that hold the surviving rows.
        let mut chunks = Vec::new();
        for &c in leaves {
            let chunk = group.column(c);
            let start = chunk_start(chunk).max(0) as u64;
            let range = start..start + chunk_bytes(c);
            let first_data = chunk.data_page_offset().max(0) as u64;
            let dictionary = (start < first_data).then(|| start..first_data.min(range.end));
            let pages = meta.page_index().and_then(|p| p.offset_index(g, c)).map(|oi| {
                let locations = oi.page_locations();
                let mut kept = Vec::new();
                for (p, l) in locations.iter().enumerate() {
                    let first = l.first_row_index.max(0) as u64;
                    let end = locations
                        .get(p + 1)
                        .map_or(num_rows, |n| n.first_row_index.max(0) as u64);
                    let bytes = l.offset.max(0) as u64..(l.offset.max(0) as u64 + l.compressed_page_size.max(0) as u64);
                    report.pages += 1;
                    if rows.iter().any(|r| r.start < end && first < r.end) || first >= end {
                        kept.push(bytes);
                    } else {
                        report.pages_pruned += 1;
                        report.bytes_avoided += bytes.end - bytes.start;
                    }
                }
                kept
            });
            chunks.push(ChunkPages {
                column: c,
                chunk: range,
                dictionary,
                pages,
            });
        }
        let all_accepted = eval_bool(predicate, &mut 0, &|i| stats_whole[i][k]);
        report.row_groups_all_accepted += all_accepted as u64;
        let surely_accepted = if all_accepted {
            rows.clone()
        } else {
            // A leaf the row group's statistics prove holds on every row holds on each page.
            let sure = eval_ranges(predicate, &mut 0, &mut |i, _| {
                if stats_whole[i][k] {
                    full.clone()
                } else {
                    page_sure[i].clone()
                }
            });
            intersect(&sure, &rows)
        };
        out.push(RowGroupSelection {
            row_group: g,
            num_rows,
            rows,
            chunks,
            all_accepted,
            surely_accepted,
        });
    }
    report.row_groups_selected = out.len() as u64;
    let mut cols: Vec<ColumnPruningReport> = per_column.into_values().collect();
    cols.sort_by(|a, b| a.column.cmp(&b.column));
    report.columns = cols;
    Ok(ScanSelection {
        row_groups: out,
        report,
    })
}

/// The rows the predicate may accept, given each leaf's (numbered left to right) rows.
fn eval_ranges(p: &Predicate, leaf_no: &mut usize, leaf_rows: &mut dyn FnMut(usize, &Leaf) -> Ranges) -> Ranges {
    match p {
        Predicate::Leaf(l) => {
            let i = *leaf_no;
            *leaf_no += 1;
            leaf_rows(i, l)
        }
        Predicate::And(parts) => {
            let mut acc: Option<Ranges> = None;
            for part in parts {
                let r = eval_ranges(part, leaf_no, leaf_rows);
                acc = Some(match acc {
                    None => r,
                    Some(a) => intersect(&a, &r),
                });
            }
            acc.unwrap_or_default()
        }
        Predicate::Or(parts) => {
            let mut acc = Vec::new();
            for part in parts {
                acc = union(&acc, &eval_ranges(part, leaf_no, leaf_rows));
            }
            acc
        }
    }
}

/// The counters of filter column `name`, which the pruning fills in for every column before it
/// looks at a row group.
fn counts<'a>(per_column: &'a mut HashMap<String, ColumnPruningReport>, name: &str) -> &'a mut ColumnPruningReport {
    per_column.get_mut(name).expect("every filter column has its counters")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_intersect_and_unite() {
        let a = vec![0..10, 20..30];
        let b = vec![5..25];
        assert_eq!(intersect(&a, &b), vec![5..10, 20..25]);
        assert_eq!(union(&a, &b), vec![0..30]);
        assert_eq!(union(&vec![0..2], &vec![2..4]), vec![0..4]);
        assert!(intersect(&vec![0..2], &vec![2..4]).is_empty());
        assert!(intersect(&a, &Vec::new()).is_empty());
    }
}
