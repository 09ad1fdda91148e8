//! The row filter of a selective scan, on the decode layer: a lowered predicate ([`RowPredicate`]) over
//! the columns of a decoded batch, evaluated per row by kernels (`kernels/row_filter.cu`, references in
//! [`crate::decode::host_kernels::row_filter`]) into a tri-state byte per row (SQL's three-valued logic:
//! a row whose predicate is unknown is not selected), then either returned as a bit mask or used to
//! compact every column to the selected rows.
//!
//! One orchestration, [`filter_columns`], runs on any [`Executor`]: the GPU's or the host references'
//! (which CI checks against arrow-rs's `cmp`, `boolean` and `filter` kernels). It works on an
//! already-assembled batch ([`DeviceBatch::filter`] on the GPU, [`DeviceBatch::filter_host`] on host
//! copies, [`filter_record_batch`] on arrow-rs arrays): a decoded column is plain Arrow layout by then,
//! so the filter needs nothing from the decode step and can run after any of them, on any batch. Its
//! inputs are only read (the device executor addresses the batch's buffers in place); buffers a column
//! keeps unchanged (a dictionary's values, a view column's data buffers) move to the output.
//!
//! For a two-pass scan, the predicate's mask over a batch of the filter columns
//! ([`RowPredicate::columns`], [`RowPredicate::map_columns`], [`FilterMode::Mask`]) then compacts the
//! payload batch of the same rows ([`DeviceBatch::compact`], [`compact_batch`]).
//!
//! What runs where: the predicate's leaves compare one column with literals typed to its Arrow layout
//! ([`Scalar`]), floats in arrow-rs's total order or as IEEE 754 does ([`FloatOrder`], what the user's
//! filters, lowered by the filter module, ask); `and` / `or` / `not` combine them by Kleene logic. The
//! mask's selected rows are counted and numbered by a multi-block scan (tile sums, tile bases, tile
//! scan), then each column is gathered: fixed-width values, bit-packed validity and booleans, strings
//! and binaries (lengths, their scan into offsets, then the characters), views (the views; data
//! buffers kept), dictionaries (keys; values kept), structs (validity and children) and lists (offsets
//! by the same scan, then their items as a column of their own). Other types ([`compaction_support`], [`leaf_support`]) are an
//! `InvalidRequest` naming the column and type, for the caller to filter that column on the host.

use std::sync::Arc;

use arrow::array::{Array, ArrayData, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, make_array};
use arrow::buffer::Buffer;
use arrow::datatypes::{ArrowPrimitiveType, DataType, Float16Type, SchemaRef, i256};
use bytemuck::Pod;

use crate::decode::exec::{Executor, HostExecutor, Kernel, OwnedBuffer};
use crate::decode::table::{BITMAP_PADDING, DeviceArray, DeviceBatch, DeviceColumn};
use crate::error::{Error, Location, Result};

/// Arrow's half-precision float (the `half` crate's, which this crate does not name itself).
pub(crate) type F16 = <Float16Type as ArrowPrimitiveType>::Native;

pub(crate) use crate::decode::layout::row_filter::*;

/// Threads a block of every row-filter kernel.
const BLOCK: u32 = 256;

/// A comparison: the row filter's, and the filter language's (`crate::filter::CmpOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=` (the filter syntax also takes `==`).
    Eq,
    /// `!=` (the filter syntax also takes `<>`).
    NotEq,
    /// `<`.
    Lt,
    /// `<=`.
    LtEq,
    /// `>`.
    Gt,
    /// `>=`.
    GtEq,
}

impl CmpOp {
    fn code(self) -> u32 {
        match self {
            CmpOp::Eq => OP_EQ,
            CmpOp::NotEq => OP_NE,
            CmpOp::Lt => OP_LT,
            CmpOp::LtEq => OP_LE,
            CmpOp::Gt => OP_GT,
            CmpOp::GtEq => OP_GE,
        }
    }
}

/// A literal typed to a column's physical Arrow layout: dates, times, timestamps and durations as
/// their integers, decimals as their integers (`Int32` for Decimal32, `Int64` for Decimal64,
/// `Int128`, `Int256`), strings and binaries (all offset widths, views, fixed size) as bytes; a
/// dictionary-typed column takes its values' literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// Boolean.
    Boolean(bool),
    /// Int8.
    Int8(i8),
    /// Int16.
    Int16(i16),
    /// Int32, Date32, Time32, Decimal32.
    Int32(i32),
    /// Int64, Date64, Time64, Timestamp, Duration, Decimal64.
    Int64(i64),
    /// UInt8.
    UInt8(u8),
    /// UInt16.
    UInt16(u16),
    /// UInt32.
    UInt32(u32),
    /// UInt64.
    UInt64(u64),
    /// Float16.
    Float16(F16),
    /// Float32.
    Float32(f32),
    /// Float64.
    Float64(f64),
    /// Decimal128.
    Int128(i128),
    /// Decimal256.
    Int256(i256),
    /// Utf8, LargeUtf8, Utf8View, Binary, LargeBinary, BinaryView, FixedSizeBinary.
    Bytes(Vec<u8>),
}

impl Scalar {
    /// Its little-endian bytes (booleans one byte, 0 or 1).
    fn to_le(&self) -> Vec<u8> {
        match self {
            Scalar::Boolean(b) => vec![*b as u8],
            Scalar::Int8(v) => v.to_le_bytes().to_vec(),
            Scalar::Int16(v) => v.to_le_bytes().to_vec(),
            Scalar::Int32(v) => v.to_le_bytes().to_vec(),
            Scalar::Int64(v) => v.to_le_bytes().to_vec(),
            Scalar::UInt8(v) => v.to_le_bytes().to_vec(),
            Scalar::UInt16(v) => v.to_le_bytes().to_vec(),
            Scalar::UInt32(v) => v.to_le_bytes().to_vec(),
            Scalar::UInt64(v) => v.to_le_bytes().to_vec(),
            Scalar::Float16(v) => v.to_le_bytes().to_vec(),
            Scalar::Float32(v) => v.to_le_bytes().to_vec(),
            Scalar::Float64(v) => v.to_le_bytes().to_vec(),
            Scalar::Int128(v) => v.to_le_bytes().to_vec(),
            Scalar::Int256(v) => v.to_le_bytes().to_vec(),
            Scalar::Bytes(b) => b.clone(),
        }
    }

    /// The `(kind, width)` a literal of this variant compares as.
    fn layout(&self) -> (u32, u32) {
        match self {
            Scalar::Boolean(_) => (LEAF_BOOL, 1),
            Scalar::Int8(_) => (LEAF_SIGNED, 1),
            Scalar::Int16(_) => (LEAF_SIGNED, 2),
            Scalar::Int32(_) => (LEAF_SIGNED, 4),
            Scalar::Int64(_) => (LEAF_SIGNED, 8),
            Scalar::UInt8(_) => (LEAF_UNSIGNED, 1),
            Scalar::UInt16(_) => (LEAF_UNSIGNED, 2),
            Scalar::UInt32(_) => (LEAF_UNSIGNED, 4),
            Scalar::UInt64(_) => (LEAF_UNSIGNED, 8),
            Scalar::Float16(_) => (LEAF_FLOAT, 2),
            Scalar::Float32(_) => (LEAF_FLOAT, 4),
            Scalar::Float64(_) => (LEAF_FLOAT, 8),
            Scalar::Int128(_) => (LEAF_SIGNED, 16),
            Scalar::Int256(_) => (LEAF_SIGNED, 32),
            Scalar::Bytes(_) => (LEAF_BYTES, 0),
        }
    }
}

/// How a leaf on a float column compares (other types ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FloatOrder {
    /// IEEE 754 total order, as arrow-rs's comparison kernels (`total_cmp`): -NaN < -inf < -0 < +0 <
    /// inf < NaN, NaN equal to itself.
    #[default]
    Total,
    /// IEEE 754 comparison, as C, SQL engines and pyarrow: NaN is neither equal, less nor greater
    /// than anything (only `!=` holds), -0 equals +0. What the user's filters mean
    /// (the filter module's `Predicate`).
    Ieee,
}

/// A predicate over the columns of a batch (by index), lowered from the user's filter expression.
/// Leaves compare one column with literals; a row is selected where the whole predicate is true
/// (unknown, SQL's null, is not selected).
#[derive(Debug, Clone, PartialEq)]
pub enum RowPredicate {
    /// `column op value`; unknown where the column is null.
    Compare {
        /// Column index in the batch.
        column: usize,
        /// The comparison.
        op: CmpOp,
        /// The literal.
        value: Scalar,
        /// How floats compare.
        floats: FloatOrder,
    },
    /// `column in (values)`; unknown where the column is null, false for an empty list.
    InList {
        /// Column index in the batch.
        column: usize,
        /// The literals.
        values: Vec<Scalar>,
        /// How floats compare.
        floats: FloatOrder,
    },
    /// `column is null` (a dictionary's null values included, as arrow-rs's logical nulls).
    IsNull(usize),
    /// `column is not null`.
    IsNotNull(usize),
    /// Kleene `and`.
    And(Box<RowPredicate>, Box<RowPredicate>),
    /// Kleene `or`.
    Or(Box<RowPredicate>, Box<RowPredicate>),
    /// Kleene `not`.
    Not(Box<RowPredicate>),
}

impl RowPredicate {
    /// `column op value` (floats in total order, as arrow-rs compares them).
    pub fn compare(column: usize, op: CmpOp, value: Scalar) -> Self {
        RowPredicate::Compare {
            column,
            op,
            value,
            floats: FloatOrder::Total,
        }
    }
    /// `column in (values)` (floats in total order).
    pub fn in_list(column: usize, values: Vec<Scalar>) -> Self {
        RowPredicate::InList {
            column,
            values,
            floats: FloatOrder::Total,
        }
    }
    /// The same predicate with every float leaf comparing by `floats`.
    pub fn with_floats(self, floats: FloatOrder) -> Self {
        match self {
            RowPredicate::Compare { column, op, value, .. } => RowPredicate::Compare {
                column,
                op,
                value,
                floats,
            },
            RowPredicate::InList { column, values, .. } => RowPredicate::InList { column, values, floats },
            RowPredicate::And(a, b) => a.with_floats(floats).and(b.with_floats(floats)),
            RowPredicate::Or(a, b) => a.with_floats(floats).or(b.with_floats(floats)),
            RowPredicate::Not(a) => a.with_floats(floats).not(),
            other => other,
        }
    }
    /// `self and other`.
    pub fn and(self, other: RowPredicate) -> Self {
        RowPredicate::And(Box::new(self), Box::new(other))
    }
    /// `self or other`.
    pub fn or(self, other: RowPredicate) -> Self {
        RowPredicate::Or(Box::new(self), Box::new(other))
    }
    /// `not self`.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        RowPredicate::Not(Box::new(self))
    }

    /// The columns it reads, ascending, each once: those to decode before the others.
    pub fn columns(&self) -> Vec<usize> {
        fn walk(p: &RowPredicate, out: &mut Vec<usize>) {
            match p {
                RowPredicate::Compare { column, .. }
                | RowPredicate::InList { column, .. }
                | RowPredicate::IsNull(column)
                | RowPredicate::IsNotNull(column) => out.push(*column),
                RowPredicate::And(a, b) | RowPredicate::Or(a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                RowPredicate::Not(a) => walk(a, out),
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The same predicate over other column indices (`to(column)`): for a batch of only the filter
    /// columns, say.
    pub fn map_columns(&self, to: &impl Fn(usize) -> usize) -> Self {
        match self {
            RowPredicate::Compare {
                column,
                op,
                value,
                floats,
            } => RowPredicate::Compare {
                column: to(*column),
                op: *op,
                value: value.clone(),
                floats: *floats,
            },
            RowPredicate::InList { column, values, floats } => RowPredicate::InList {
                column: to(*column),
                values: values.clone(),
                floats: *floats,
            },
            RowPredicate::IsNull(c) => RowPredicate::IsNull(to(*c)),
            RowPredicate::IsNotNull(c) => RowPredicate::IsNotNull(to(*c)),
            RowPredicate::And(a, b) => a.map_columns(to).and(b.map_columns(to)),
            RowPredicate::Or(a, b) => a.map_columns(to).or(b.map_columns(to)),
            RowPredicate::Not(a) => a.map_columns(to).not(),
        }
    }
}

/// What the filter returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterMode {
    /// Every column compacted to the selected rows.
    #[default]
    Compact,
    /// The columns untouched and a boolean mask of the selected rows (no nulls: unknown is false).
    Mask,
}

/// A buffer the filter addresses: where, and how many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BufRef {
    /// Address in the executor's memory (or device memory its kernels can read).
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// A bitmap the filter addresses: its buffer and the bit of element 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BitsRef {
    /// The bytes.
    pub buf: BufRef,
    /// The bit of the array's element 0.
    pub bit_offset: u64,
}

/// A column as the filter kernels read it: Arrow layout at `offset` (the value index of element 0;
/// children have their own), its buffers in Arrow's order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnRef {
    /// The Arrow type.
    pub data_type: DataType,
    /// Elements.
    pub len: u64,
    /// Value index of element 0.
    pub offset: u64,
    /// Nulls (0: the validity, if any, is not read).
    pub null_count: u64,
    /// Validity bitmap.
    pub validity: Option<BitsRef>,
    /// The type's buffers, in Arrow's order (a boolean's values: bits from `offset`).
    pub buffers: Vec<BufRef>,
    /// Children.
    pub children: Vec<ColumnRef>,
}

/// Where an output buffer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutBuf {
    /// A new allocation of the executor ([`Executor::take`] it).
    New(u64),
    /// The input column's buffer of the same index, unchanged.
    Kept,
}

/// A filtered column: new buffers, or some of the input's kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FilteredColumn {
    /// The Arrow type.
    pub data_type: DataType,
    /// Elements.
    pub len: u64,
    /// Nulls.
    pub null_count: u64,
    /// Whether the whole column is the input's, unchanged (a dictionary's values): its buffers,
    /// validity and children are then all [`OutBuf::Kept`] and its offset the input's.
    pub kept: bool,
    /// Validity (padded to [`BITMAP_PADDING`]), `None` without nulls.
    pub validity: Option<OutBuf>,
    /// Buffers in Arrow's order (bitmaps padded), at offset 0 unless `kept`.
    pub buffers: Vec<OutBuf>,
    /// Children.
    pub children: Vec<FilteredColumn>,
    /// The counter of the validity's set bits, until the null count is known.
    set_counter: Option<usize>,
}

impl FilteredColumn {
    fn kept(c: &ColumnRef) -> Self {
        FilteredColumn {
            data_type: c.data_type.clone(),
            len: c.len,
            null_count: c.null_count,
            set_counter: None,
            kept: true,
            validity: c.validity.map(|_| OutBuf::Kept),
            buffers: c.buffers.iter().map(|_| OutBuf::Kept).collect(),
            children: c.children.iter().map(FilteredColumn::kept).collect(),
        }
    }
}

/// What [`filter_columns`] made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FilterOutput {
    /// The columns compacted to `num_rows` selected rows.
    Rows {
        /// Selected rows.
        num_rows: u64,
        /// One per input column.
        columns: Vec<FilteredColumn>,
    },
    /// The selected rows as an LSB-first bitmap of `len` bits (padded to [`BITMAP_PADDING`] bytes).
    Mask {
        /// The bitmap (a new allocation).
        bits: u64,
        /// Rows.
        len: u64,
        /// Bits set.
        selected: u64,
    },
}

/// Whether a column of type `t` can be compacted by the kernels; `Err` names what cannot.
pub(crate) fn compaction_support(t: &DataType) -> std::result::Result<(), String> {
    use DataType as D;
    match t {
        _ if t.primitive_width().is_some() => Ok(()),
        D::Boolean
        | D::Utf8
        | D::LargeUtf8
        | D::Binary
        | D::LargeBinary
        | D::Utf8View
        | D::BinaryView
        | D::FixedSizeBinary(_) => Ok(()),
        D::Dictionary(k, _) if k.is_dictionary_key_type() => Ok(()),
        D::Struct(fields) => fields.iter().try_for_each(|f| compaction_support(f.data_type())),
        D::List(f) | D::LargeList(f) | D::Map(f, _) => compaction_support(f.data_type()),
        _ => Err(format!("the GPU row filter cannot compact a column of type {t}")),
    }
}

/// How a comparison leaf on a column of type `t` compares: `(kind, width)`; `Err` names what cannot.
pub(crate) fn leaf_support(t: &DataType) -> std::result::Result<(u32, u32), String> {
    use DataType as D;
    let fixed = |w: usize| -> u32 { w as u32 };
    Ok(match t {
        D::Int8 | D::Int16 | D::Int32 | D::Int64 => (LEAF_SIGNED, fixed(t.primitive_width().unwrap_or(0))),
        D::Date32 | D::Time32(_) | D::Decimal32(_, _) => (LEAF_SIGNED, 4),
        D::Date64 | D::Time64(_) | D::Timestamp(_, _) | D::Duration(_) | D::Decimal64(_, _) => (LEAF_SIGNED, 8),
        D::Decimal128(_, _) => (LEAF_SIGNED, 16),
        D::Decimal256(_, _) => (LEAF_SIGNED, 32),
        D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => (LEAF_UNSIGNED, fixed(t.primitive_width().unwrap_or(0))),
        D::Float16 => (LEAF_FLOAT, 2),
        D::Float32 => (LEAF_FLOAT, 4),
        D::Float64 => (LEAF_FLOAT, 8),
        D::Boolean => (LEAF_BOOL, 1),
        D::Utf8 | D::Binary => (LEAF_BYTES, 4),
        D::LargeUtf8 | D::LargeBinary => (LEAF_BYTES, 8),
        D::Utf8View | D::BinaryView => (LEAF_VIEW, 16),
        D::FixedSizeBinary(n) if *n >= 0 => (LEAF_FIXED_BYTES, *n as u32),
        D::Dictionary(k, v) if k.is_dictionary_key_type() => {
            leaf_support(v)?;
            let kind = if k.is_signed_integer() {
                LEAF_DICT_SIGNED
            } else {
                LEAF_DICT_UNSIGNED
            };
            (kind, fixed(k.primitive_width().unwrap_or(0)))
        }
        _ => return Err(format!("the GPU row filter cannot compare a column of type {t}")),
    })
}

/// Names columns and the batch for errors.
#[derive(Debug, Clone, Default)]
pub(crate) struct FilterContext {
    /// The file (or whatever the batch came from).
    pub location: Location,
    /// Column names, by index.
    pub names: Vec<String>,
}

impl FilterContext {
    fn at(&self, column: usize) -> Location {
        Location {
            column: Some(self.names.get(column).cloned().unwrap_or_else(|| format!("#{column}"))),
            ..self.location.clone()
        }
    }
    fn request(&self, column: usize, message: impl Into<String>) -> Error {
        Error::InvalidRequest {
            location: self.at(column),
            message: message.into(),
        }
    }
}

/// `u64` words the kernels add or min into: allocated in chunks, each read once at the end.
struct Words {
    init: u64,
    chunks: Vec<u64>,
    used: usize,
}

const WORDS_A_CHUNK: usize = 128;

impl Words {
    fn new(init: u64) -> Self {
        Words {
            init,
            chunks: Vec::new(),
            used: WORDS_A_CHUNK,
        }
    }
    fn next<E: Executor>(&mut self, exec: &mut E) -> Result<(usize, u64)> {
        if self.used == WORDS_A_CHUNK {
            self.chunks.push(exec.upload(&vec![self.init; WORDS_A_CHUNK])?);
            self.used = 0;
        }
        let k = self.used;
        self.used += 1;
        let chunk = self.chunks.len() - 1;
        Ok((chunk * WORDS_A_CHUNK + k, self.chunks[chunk] + 8 * k as u64))
    }
    fn read_all<E: Executor>(&self, exec: &mut E) -> Result<Vec<u64>> {
        let mut all = Vec::new();
        for &c in &self.chunks {
            all.extend(exec.read::<u64>(c, WORDS_A_CHUNK)?);
        }
        Ok(all)
    }
}

/// Bytes of a bitmap of `bits` bits, padded as [`DeviceArray`] wants.
fn padded_bitmap_bytes(bits: u64) -> usize {
    (bits.div_ceil(8) as usize)
        .next_multiple_of(BITMAP_PADDING)
        .max(BITMAP_PADDING)
}

struct Run<'a, E: Executor> {
    exec: &'a mut E,
    ctx: &'a FilterContext,
    /// Error words (start at `u64::MAX`), each with its column and what it checked.
    errors: Words,
    error_what: Vec<(usize, String)>,
    /// Set-bit counters (start at 0).
    sets: Words,
    /// Scratch allocations freed at the end.
    scratch: Vec<u64>,
}

impl<E: Executor> Run<'_, E> {
    fn error_word(&mut self, column: usize, what: impl Into<String>) -> Result<u64> {
        let (k, addr) = self.errors.next(self.exec)?;
        debug_assert_eq!(k, self.error_what.len());
        self.error_what.push((column, what.into()));
        Ok(addr)
    }

    fn scratch_upload<T: Pod>(&mut self, items: &[T]) -> Result<u64> {
        let a = self.exec.upload(items)?;
        self.scratch.push(a);
        Ok(a)
    }

    fn scratch_uninit(&mut self, bytes: usize) -> Result<u64> {
        let a = self.exec.alloc_uninit(bytes)?;
        self.scratch.push(a);
        Ok(a)
    }

    /// The predicate's tri-state bytes over the batch's `n` rows (a scratch allocation).
    fn eval(&mut self, p: &RowPredicate, cols: &[ColumnRef], n: u64) -> Result<u64> {
        let logic = |run: &mut Self, op: RowLogicOp, a: u64, b: u64| -> Result<u64> {
            let out = run.scratch_uninit(n as usize)?;
            run.exec.launch(Kernel::RowLogic { op, a, b, n, out })?;
            Ok(out)
        };
        match p {
            RowPredicate::Compare {
                column,
                op,
                value,
                floats,
            } => self.leaf(*column, cols, op.code(), std::slice::from_ref(value), *floats, n),
            RowPredicate::InList { column, values, floats } => self.leaf(*column, cols, OP_IN, values, *floats, n),
            RowPredicate::IsNull(c) => self.leaf(*c, cols, OP_IS_NULL, &[], FloatOrder::Total, n),
            RowPredicate::IsNotNull(c) => self.leaf(*c, cols, OP_IS_NOT_NULL, &[], FloatOrder::Total, n),
            RowPredicate::And(a, b) | RowPredicate::Or(a, b) => {
                let op = if matches!(p, RowPredicate::And(..)) {
                    RowLogicOp::And
                } else {
                    RowLogicOp::Or
                };
                let (x, y) = (self.eval(a, cols, n)?, self.eval(b, cols, n)?);
                logic(self, op, x, y)
            }
            RowPredicate::Not(a) => {
                let x = self.eval(a, cols, n)?;
                logic(self, RowLogicOp::Not, x, x)
            }
        }
    }

    fn leaf(
        &mut self,
        column: usize,
        cols: &[ColumnRef],
        op: u32,
        lits: &[Scalar],
        floats: FloatOrder,
        n: u64,
    ) -> Result<u64> {
        let Some(col) = cols.get(column) else {
            return Err(self.ctx.request(
                column,
                format!("the filter names column {column} of a batch of {}", cols.len()),
            ));
        };
        if col.len != n {
            return Err(self.ctx.request(column, format!("{} rows in a batch of {n}", col.len)));
        }
        self.leaf_over(column, col, op, lits, floats)
    }

    /// The leaf over all of `col`'s elements.
    fn leaf_over(
        &mut self,
        column: usize,
        col: &ColumnRef,
        op: u32,
        lits: &[Scalar],
        floats: FloatOrder,
    ) -> Result<u64> {
        let n = col.len;
        let null_test = matches!(op, OP_IS_NULL | OP_IS_NOT_NULL);
        let is_dict = matches!(col.data_type, DataType::Dictionary(..));
        let (kind, width) = match leaf_support(&col.data_type) {
            _ if null_test && !is_dict => (LEAF_NULLS, 0),
            Ok((LEAF_FLOAT, w)) if floats == FloatOrder::Ieee => (LEAF_FLOAT_IEEE, w),
            support => support.map_err(|m| self.ctx.request(column, m))?,
        };
        let mut d = RowLeafDesc {
            kind,
            op,
            width,
            offset: col.offset,
            error: self.error_word(column, "a value of the filter's column")?,
            ..Default::default()
        };
        if let Some(v) = col.validity.filter(|_| col.null_count > 0) {
            d.validity = v.buf.addr;
            d.validity_len = v.buf.len;
            d.validity_offset = v.bit_offset;
        }
        let buf = |k: usize| col.buffers.get(k).copied().unwrap_or_default();
        match kind {
            LEAF_NULLS => {}
            LEAF_DICT_SIGNED | LEAF_DICT_UNSIGNED => {
                let Some(values) = col.children.first() else {
                    return Err(self.ctx.request(column, "a dictionary column without its values"));
                };
                let table = self.leaf_over(column, values, op, lits, floats)?;
                (d.values, d.values_len) = (buf(0).addr, buf(0).len);
                let Ok(nlits) = u32::try_from(values.len) else {
                    return Err(self
                        .ctx
                        .request(column, format!("a dictionary of {} values", values.len)));
                };
                (d.lits, d.lits_len, d.nlits) = (table, values.len, nlits);
            }
            _ => {
                self.literals(column, col, &mut d, lits)?;
                match kind {
                    LEAF_BYTES => {
                        (d.offsets, d.offsets_len) = (buf(0).addr, buf(0).len);
                        (d.values, d.values_len) = (buf(1).addr, buf(1).len);
                    }
                    LEAF_VIEW => {
                        (d.values, d.values_len) = (buf(0).addr, buf(0).len);
                        let data = &col.buffers[1.min(col.buffers.len())..];
                        let addrs: Vec<u64> = data.iter().map(|b| b.addr).chain([0]).collect();
                        let lens: Vec<u64> = data.iter().map(|b| b.len).chain([0]).collect();
                        d.offsets = self.scratch_upload(&addrs)?;
                        d.offsets_len = 8 * data.len() as u64;
                        d.aux = self.scratch_upload(&lens)?;
                        d.aux_len = 8 * data.len() as u64;
                    }
                    _ => (d.values, d.values_len) = (buf(0).addr, buf(0).len),
                }
            }
        }
        let leaf = self.scratch_upload(&[d])?;
        let out = self.scratch_uninit(n as usize)?;
        self.exec.launch(Kernel::RowLeaf { leaf, n, out })?;
        Ok(out)
    }

    /// Checks `lits` against the column's layout and uploads them into `d`.
    fn literals(&mut self, column: usize, col: &ColumnRef, d: &mut RowLeafDesc, lits: &[Scalar]) -> Result<()> {
        let byte_kind = matches!(d.kind, LEAF_BYTES | LEAF_VIEW | LEAF_FIXED_BYTES);
        for l in lits {
            let (k, w) = l.layout();
            let fits = if byte_kind {
                k == LEAF_BYTES
            } else {
                (k == d.kind || (k, d.kind) == (LEAF_FLOAT, LEAF_FLOAT_IEEE)) && w == d.width
            };
            if !fits {
                return Err(self.ctx.request(
                    column,
                    format!("a literal {l:?} does not fit the column's type {}", col.data_type),
                ));
            }
        }
        let Ok(nlits) = u32::try_from(lits.len()) else {
            return Err(self.ctx.request(column, format!("{} literals", lits.len())));
        };
        d.nlits = nlits;
        let bytes: Vec<u8> = lits.iter().flat_map(Scalar::to_le).collect();
        d.lits_len = bytes.len() as u64;
        d.lits = self.scratch_upload(&bytes)?;
        if byte_kind {
            let mut offs = vec![0u64];
            for l in lits {
                offs.push(offs.last().copied().unwrap_or(0) + l.to_le().len() as u64);
            }
            d.lit_offsets = self.scratch_upload(&offs)?;
        }
        Ok(())
    }

    /// Scans `n` items (tile sums, then tile bases): the tile bases and the total's address.
    fn scan_totals(&mut self, kind: RowScan, src: u64, n: u64) -> Result<(u64, u64)> {
        let ntiles = n.div_ceil(SCAN_TILE);
        let sums = self.scratch_uninit(8 * ntiles as usize)?;
        let total = self.exec.alloc(8)?;
        self.scratch.push(total);
        if n > 0 {
            self.exec.launch(Kernel::RowTileSums { kind, src, n, sums })?;
            self.exec.launch(Kernel::RowTileBases { sums, ntiles, total })?;
        }
        Ok((sums, total))
    }

    /// `count` lengths (`u64` at `lens`) into new offsets (`wide`: `i64`); their total.
    fn offsets_of(&mut self, column: usize, lens: u64, count: u64, wide: bool) -> Result<(u64, u64)> {
        let kind = if wide { RowScan::Lengths64 } else { RowScan::Lengths32 };
        let (bases, total_at) = self.scan_totals(kind, lens, count)?;
        let total = self.exec.read::<u64>(total_at, 1)?[0];
        if !wide && total > i32::MAX as u64 {
            return Err(self.ctx.request(
                column,
                format!("the selected rows hold {total} bytes or items, past 32-bit offsets"),
            ));
        }
        let w = if wide { 8 } else { 4 };
        let offsets = self.exec.alloc(w * (count as usize + 1))?;
        if count > 0 {
            self.exec.launch(Kernel::RowTileScan {
                kind,
                src: lens,
                n: count,
                bases,
                total: total_at,
                out: offsets,
                out_cap: count + 1,
            })?;
        }
        Ok((offsets, total))
    }

    /// `col` gathered at `count` rows `idx` (indices into the column shifted by `add`, each below
    /// `rows`).
    fn gather(
        &mut self,
        column: usize,
        col: &ColumnRef,
        add: u64,
        rows: u64,
        idx: u64,
        count: u64,
    ) -> Result<FilteredColumn> {
        use DataType as D;
        let eff = col.offset + add;
        let mut out = FilteredColumn {
            data_type: col.data_type.clone(),
            len: count,
            null_count: 0,
            kept: false,
            validity: None,
            buffers: Vec::new(),
            children: Vec::new(),
            set_counter: None,
        };
        let buf = |k: usize| col.buffers.get(k).copied().unwrap_or_default();
        let mut set_word = None;
        if let Some(v) = col.validity.filter(|_| col.null_count > 0) {
            let dst = self.exec.alloc(padded_bitmap_bytes(count))?;
            let (k, set) = self.sets.next(self.exec)?;
            let error = self.error_word(column, "a validity bit")?;
            self.exec.launch(Kernel::RowGatherBits {
                src: v.buf.addr,
                src_len: v.buf.len,
                bit_offset: v.bit_offset + add,
                rows,
                indices: idx,
                count,
                dst,
                set,
                error,
            })?;
            out.validity = Some(OutBuf::New(dst));
            set_word = Some(k);
        }
        let fixed = |run: &mut Self, width: u64, src: BufRef| -> Result<OutBuf> {
            let dst = run.exec.alloc_uninit((count * width) as usize)?;
            let error = run.error_word(column, "a value")?;
            run.exec.launch(Kernel::RowGatherFixed {
                src: src.addr,
                src_len: src.len,
                width: width as u32,
                offset: eff,
                rows,
                indices: idx,
                count,
                dst,
                error,
            })?;
            Ok(OutBuf::New(dst))
        };
        match &col.data_type {
            t if t.primitive_width().is_some() => {
                let w = t.primitive_width().unwrap_or(0) as u64;
                out.buffers.push(fixed(self, w, buf(0))?);
            }
            D::FixedSizeBinary(w) => out.buffers.push(fixed(self, (*w).max(0) as u64, buf(0))?),
            D::Boolean => {
                let dst = self.exec.alloc(padded_bitmap_bytes(count))?;
                let (_, set) = self.sets.next(self.exec)?;
                let error = self.error_word(column, "a boolean value")?;
                self.exec.launch(Kernel::RowGatherBits {
                    src: buf(0).addr,
                    src_len: buf(0).len,
                    bit_offset: eff,
                    rows,
                    indices: idx,
                    count,
                    dst,
                    set,
                    error,
                })?;
                out.buffers.push(OutBuf::New(dst));
            }
            D::Utf8 | D::Binary | D::LargeUtf8 | D::LargeBinary => {
                let wide = matches!(col.data_type, D::LargeUtf8 | D::LargeBinary);
                let (offsets, chars) = (buf(0), buf(1));
                let lens = self.scratch_uninit(8 * count as usize)?;
                let error = self.error_word(column, "a string's offsets")?;
                self.exec.launch(Kernel::RowGatherLengths {
                    offsets: offsets.addr,
                    offsets_len: offsets.len,
                    wide,
                    offset: eff,
                    rows,
                    chars_len: chars.len,
                    indices: idx,
                    count,
                    lens,
                    error,
                })?;
                let (dst_offsets, total) = self.offsets_of(column, lens, count, wide)?;
                let dst = self.exec.alloc_uninit(total as usize)?;
                self.exec.launch(Kernel::RowGatherChars {
                    offsets: offsets.addr,
                    offsets_len: offsets.len,
                    wide,
                    offset: eff,
                    rows,
                    chars: chars.addr,
                    chars_len: chars.len,
                    indices: idx,
                    count,
                    dst_offsets,
                    dst_wide: wide,
                    dst,
                    dst_len: total,
                    error,
                })?;
                out.buffers.push(OutBuf::New(dst_offsets));
                out.buffers.push(OutBuf::New(dst));
            }
            D::Utf8View | D::BinaryView => {
                out.buffers.push(fixed(self, 16, buf(0))?);
                out.buffers.extend(col.buffers.iter().skip(1).map(|_| OutBuf::Kept));
            }
            D::Dictionary(k, _) => {
                let w = k.primitive_width().unwrap_or(0) as u64;
                out.buffers.push(fixed(self, w, buf(0))?);
                out.children = col.children.iter().map(FilteredColumn::kept).collect();
            }
            D::Struct(_) => {
                for child in &col.children {
                    out.children.push(self.gather(column, child, eff, rows, idx, count)?);
                }
            }
            D::List(_) | D::LargeList(_) | D::Map(_, _) => {
                let wide = matches!(col.data_type, D::LargeList(_));
                let Some(child) = col.children.first() else {
                    return Err(self.ctx.request(column, "a list column without its items"));
                };
                if child.len > u32::MAX as u64 + 1 {
                    return Err(self.ctx.request(column, format!("a list of {} items", child.len)));
                }
                let offsets = buf(0);
                let lens = self.scratch_uninit(8 * count as usize)?;
                let error = self.error_word(column, "a list's offsets")?;
                self.exec.launch(Kernel::RowGatherLengths {
                    offsets: offsets.addr,
                    offsets_len: offsets.len,
                    wide,
                    offset: eff,
                    rows,
                    chars_len: child.len,
                    indices: idx,
                    count,
                    lens,
                    error,
                })?;
                let (dst_offsets, total) = self.offsets_of(column, lens, count, wide)?;
                let child_idx = self.scratch_uninit(4 * total as usize)?;
                self.exec.launch(Kernel::RowExpandRanges {
                    offsets: offsets.addr,
                    offsets_len: offsets.len,
                    wide,
                    offset: eff,
                    rows,
                    child_rows: child.len,
                    indices: idx,
                    count,
                    dst_offsets,
                    dst_wide: wide,
                    child_indices: child_idx,
                    child_count: total,
                    error,
                })?;
                out.buffers.push(OutBuf::New(dst_offsets));
                out.children
                    .push(self.gather(column, child, 0, child.len, child_idx, total)?);
            }
            t => {
                return Err(self.ctx.request(
                    column,
                    format!("the GPU row filter cannot compact a column of type {t}"),
                ));
            }
        }
        // The null count is the set bits' complement, filled in once the counters are read.
        out.set_counter = set_word;
        Ok(out)
    }
}

/// Fills each column's null count from the set-bit counters, and drops a validity without nulls; the
/// validity buffers dropped are returned.
fn settle_nulls(c: &mut FilteredColumn, sets: &[u64], dropped: &mut Vec<u64>) {
    if let Some(k) = c.set_counter.take() {
        c.null_count = c.len - sets.get(k).copied().unwrap_or(0).min(c.len);
        if c.null_count == 0
            && let Some(OutBuf::New(a)) = c.validity.take()
        {
            dropped.push(a);
        }
    }
    if !c.kept {
        for child in &mut c.children {
            settle_nulls(child, sets, dropped);
        }
    }
}

/// Filters `columns` (all of `num_rows` rows) by `predicate` on `exec`: the selected rows' mask, or
/// every column compacted to them (`mode`). Types the kernels cannot compare or compact, literals that
/// do not fit their column and bad column indices are `InvalidRequest`s naming the column; a bounds
/// failure in the data (offsets past the characters, say) is a `CorruptPage` naming the column and
/// the row.
pub(crate) fn filter_columns<E: Executor>(
    exec: &mut E,
    columns: &[ColumnRef],
    num_rows: u64,
    predicate: &RowPredicate,
    mode: FilterMode,
    ctx: &FilterContext,
) -> Result<FilterOutput> {
    if num_rows > u32::MAX as u64 + 1 {
        return Err(Error::InvalidRequest {
            location: ctx.location.clone(),
            message: format!("the GPU row filter takes batches of up to 2^32 rows, not {num_rows}"),
        });
    }
    if mode == FilterMode::Compact {
        for (k, c) in columns.iter().enumerate() {
            compaction_support(&c.data_type).map_err(|m| ctx.request(k, m))?;
            if c.len != num_rows {
                return Err(ctx.request(k, format!("{} rows in a batch of {num_rows}", c.len)));
            }
        }
    }
    let mut run = Run {
        exec,
        ctx,
        errors: Words::new(u64::MAX),
        error_what: Vec::new(),
        sets: Words::new(0),
        scratch: Vec::new(),
    };
    let result = (|| {
        let n = num_rows;
        let mask = run.eval(predicate, columns, n)?;
        let out = match mode {
            FilterMode::Mask => {
                let bits = run.exec.alloc(padded_bitmap_bytes(n))?;
                let count = run.exec.alloc(8)?;
                run.scratch.push(count);
                run.exec.launch(Kernel::RowMaskBits {
                    mask,
                    n,
                    words: bits,
                    count,
                })?;
                let selected = run.exec.read::<u64>(count, 1)?[0];
                FilterOutput::Mask { bits, len: n, selected }
            }
            FilterMode::Compact => {
                let (bases, total) = run.scan_totals(RowScan::Mask, mask, n)?;
                let count = run.exec.read::<u64>(total, 1)?[0].min(n);
                let idx = run.scratch_uninit(4 * count as usize)?;
                if n > 0 {
                    run.exec.launch(Kernel::RowTileScan {
                        kind: RowScan::Mask,
                        src: mask,
                        n,
                        bases,
                        total,
                        out: idx,
                        out_cap: count,
                    })?;
                }
                let mut cols = Vec::with_capacity(columns.len());
                for (k, c) in columns.iter().enumerate() {
                    cols.push(run.gather(k, c, 0, c.len, idx, count)?);
                }
                let sets = run.sets.read_all(run.exec)?;
                let mut dropped = Vec::new();
                for c in &mut cols {
                    settle_nulls(c, &sets, &mut dropped);
                }
                for a in dropped {
                    run.exec.free(a);
                }
                FilterOutput::Rows {
                    num_rows: count,
                    columns: cols,
                }
            }
        };
        let errors = run.errors.read_all(run.exec)?;
        for ((column, what), &row) in run.error_what.iter().zip(&errors) {
            if row != u64::MAX {
                return Err(Error::CorruptPage {
                    location: ctx.at(*column),
                    page: None,
                    message: format!("{what} at row {row} lies outside its buffers (the row filter checked it)"),
                });
            }
        }
        Ok(out)
    })();
    for a in std::mem::take(&mut run.scratch) {
        run.exec.free(a);
    }
    for &c in run.errors.chunks.iter().chain(&run.sets.chunks) {
        run.exec.free(c);
    }
    // On an error, outputs made before it go with the executor.
    result
}

/// An executor whose kernels can read a batch's buffers: where a buffer is, in their memory.
pub(crate) trait FilterExecutor: Executor {
    /// The address the kernels read `buf` at (a copy into the executor's memory where they cannot
    /// read it in place).
    fn address_of(&mut self, buf: &Self::Buffer) -> Result<u64>;
}

impl FilterExecutor for HostExecutor {
    fn address_of(&mut self, buf: &Vec<u8>) -> Result<u64> {
        self.upload(buf.as_slice())
    }
}

fn column_ref<E: FilterExecutor>(exec: &mut E, a: &DeviceArray<E::Buffer>) -> Result<ColumnRef> {
    let mut r = |b: &E::Buffer| -> Result<BufRef> {
        Ok(BufRef {
            addr: exec.address_of(b)?,
            len: b.len() as u64,
        })
    };
    let validity = match &a.validity {
        Some(v) => Some(BitsRef {
            buf: r(v)?,
            bit_offset: 0,
        }),
        None => None,
    };
    let buffers = a.buffers.iter().map(&mut r).collect::<Result<Vec<_>>>()?;
    let children = a
        .children
        .iter()
        .map(|c| column_ref(exec, c))
        .collect::<Result<Vec<_>>>()?;
    Ok(ColumnRef {
        data_type: a.data_type.clone(),
        len: a.len as u64,
        offset: 0,
        null_count: a.null_count as u64,
        validity,
        buffers,
        children,
    })
}

fn into_device_array<E: Executor>(
    exec: &mut E,
    f: FilteredColumn,
    input: DeviceArray<E::Buffer>,
) -> Result<DeviceArray<E::Buffer>> {
    if f.kept {
        return Ok(input);
    }
    let mut inputs: Vec<Option<E::Buffer>> = input.buffers.into_iter().map(Some).collect();
    let mut take = |exec: &mut E, k: usize, o: OutBuf| -> Result<E::Buffer> {
        match o {
            OutBuf::New(a) => exec.take(a),
            OutBuf::Kept => inputs
                .get_mut(k)
                .and_then(Option::take)
                .ok_or_else(|| Error::device("the row filter", format!("no input buffer {k} to keep"))),
        }
    };
    let validity = match f.validity {
        Some(OutBuf::New(a)) => Some(exec.take(a)?),
        _ => None,
    };
    let buffers = f
        .buffers
        .iter()
        .enumerate()
        .map(|(k, &o)| take(exec, k, o))
        .collect::<Result<Vec<_>>>()?;
    let children = f
        .children
        .into_iter()
        .zip(input.children)
        .map(|(fc, ic)| into_device_array(exec, fc, ic))
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceArray {
        data_type: f.data_type,
        len: f.len as usize,
        null_count: f.null_count as usize,
        validity,
        buffers,
        children,
    })
}

/// A filtered batch.
#[derive(Debug)]
pub enum Filtered<B: OwnedBuffer> {
    /// The batch compacted to its selected rows.
    Rows(DeviceBatch<B>),
    /// The batch unchanged and its selected rows.
    Mask {
        /// The input batch.
        batch: DeviceBatch<B>,
        /// A `Boolean` array of the batch's rows, without nulls: true where selected.
        mask: DeviceArray<B>,
        /// True rows.
        selected: usize,
    },
}

impl<B: OwnedBuffer> Filtered<B> {
    /// A host copy: the compacted batch, or the input batch and the mask.
    pub fn to_host(&self) -> Result<(RecordBatch, Option<BooleanArray>)> {
        match self {
            Filtered::Rows(b) => Ok((b.to_host()?, None)),
            Filtered::Mask { batch, mask, .. } => {
                let m = mask.to_host()?;
                let m = m
                    .as_any()
                    .downcast_ref::<BooleanArray>()
                    .cloned()
                    .ok_or_else(|| Error::device("the row filter", "a mask that is not boolean"))?;
                Ok((batch.to_host()?, Some(m)))
            }
        }
    }
}

/// Filters `batch` on `exec` (see [`filter_columns`]).
pub(crate) fn filter_batch<E: FilterExecutor>(
    exec: &mut E,
    batch: DeviceBatch<E::Buffer>,
    predicate: &RowPredicate,
    mode: FilterMode,
) -> Result<Filtered<E::Buffer>> {
    let refs = batch
        .columns
        .iter()
        .map(|c| column_ref(exec, &c.array))
        .collect::<Result<Vec<_>>>()?;
    let ctx = FilterContext {
        location: batch.location.clone(),
        names: batch.columns.iter().map(|c| c.name.clone()).collect(),
    };
    match filter_columns(exec, &refs, batch.num_rows as u64, predicate, mode, &ctx)? {
        FilterOutput::Mask { bits, len, selected } => {
            let mask = DeviceArray {
                data_type: DataType::Boolean,
                len: len as usize,
                null_count: 0,
                validity: None,
                buffers: vec![exec.take(bits)?],
                children: Vec::new(),
            };
            Ok(Filtered::Mask {
                batch,
                mask,
                selected: selected as usize,
            })
        }
        FilterOutput::Rows { num_rows, columns } => Ok(Filtered::Rows(assemble(exec, batch, num_rows, columns)?)),
    }
}

/// `batch` with its columns replaced by their filtered outputs (`num_rows` rows).
fn assemble<E: Executor>(
    exec: &mut E,
    batch: DeviceBatch<E::Buffer>,
    num_rows: u64,
    columns: Vec<FilteredColumn>,
) -> Result<DeviceBatch<E::Buffer>> {
    let DeviceBatch {
        schema,
        columns: inputs,
        row_groups,
        location,
        ..
    } = batch;
    let columns = columns
        .into_iter()
        .zip(inputs)
        .map(|(f, c)| {
            Ok(DeviceColumn {
                name: c.name,
                array: into_device_array(exec, f, c.array)?,
                decoded: c.decoded,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceBatch {
        schema,
        num_rows: num_rows as usize,
        columns,
        row_groups,
        location,
    })
}

/// Frees the new buffers of a filtered column.
fn free_outputs<E: Executor>(exec: &mut E, f: &FilteredColumn) {
    for o in f.validity.iter().chain(&f.buffers) {
        if let OutBuf::New(a) = *o {
            exec.free(a);
        }
    }
    for c in &f.children {
        free_outputs(exec, c);
    }
}

/// `batch` compacted to the rows `mask` selects (a `Boolean` array of its rows, as
/// [`FilterMode::Mask`] gives, null or false rows left out) on `exec`: the payload columns of a step
/// whose predicate was evaluated over its filter columns before.
pub(crate) fn compact_batch<E: FilterExecutor>(
    exec: &mut E,
    batch: DeviceBatch<E::Buffer>,
    mask: &DeviceArray<E::Buffer>,
) -> Result<DeviceBatch<E::Buffer>> {
    if mask.len != batch.num_rows {
        return Err(Error::InvalidRequest {
            location: batch.location.clone(),
            message: format!("a mask of {} rows for a batch of {} rows", mask.len, batch.num_rows),
        });
    }
    let DeviceBatch {
        schema,
        columns,
        row_groups,
        location,
        ..
    } = batch;
    let ctx = FilterContext {
        location: location.clone(),
        names: columns.iter().map(|c| c.name.clone()).collect(),
    };
    let mut rest = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    for c in columns {
        arrays.push(c.array);
        rest.push((c.name, c.decoded));
    }
    let (arrays, num_rows) = compact_arrays(exec, arrays, mask, ctx)?;
    Ok(DeviceBatch {
        schema,
        num_rows: num_rows as usize,
        columns: rest
            .into_iter()
            .zip(arrays)
            .map(|((name, decoded), array)| DeviceColumn { name, array, decoded })
            .collect(),
        row_groups,
        location,
    })
}

/// `arrays` (each of `mask.len` rows) compacted on `exec` to the rows `mask` selects (a `Boolean`
/// array, null or false rows left out), and how many those are. `ctx` names the arrays for errors.
pub(crate) fn compact_arrays<E: FilterExecutor>(
    exec: &mut E,
    arrays: Vec<DeviceArray<E::Buffer>>,
    mask: &DeviceArray<E::Buffer>,
    mut ctx: FilterContext,
) -> Result<(Vec<DeviceArray<E::Buffer>>, u64)> {
    if mask.data_type != DataType::Boolean {
        return Err(Error::InvalidRequest {
            location: ctx.location.clone(),
            message: format!("a mask of {} {} rows", mask.len, mask.data_type),
        });
    }
    let mut refs = arrays.iter().map(|a| column_ref(exec, a)).collect::<Result<Vec<_>>>()?;
    let mask_column = refs.len();
    refs.push(column_ref(exec, mask)?);
    ctx.names.resize(mask_column, String::new());
    ctx.names.push("the mask".to_string());
    let selected = RowPredicate::compare(mask_column, CmpOp::Eq, Scalar::Boolean(true));
    let FilterOutput::Rows { num_rows, mut columns } =
        filter_columns(exec, &refs, mask.len as u64, &selected, FilterMode::Compact, &ctx)?
    else {
        return Err(Error::device("the row filter", "a mask where rows were asked for"));
    };
    // The mask compacted along with the columns: all true, of no use.
    if let Some(m) = columns.pop() {
        free_outputs(exec, &m);
    }
    let arrays = columns
        .into_iter()
        .zip(arrays)
        .map(|(f, a)| into_device_array(exec, f, a))
        .collect::<Result<Vec<_>>>()?;
    Ok((arrays, num_rows))
}

impl DeviceBatch<Vec<u8>> {
    /// [`DeviceBatch::filter`] on a host batch (the reference decoder's), through the kernels'
    /// references.
    pub fn filter_host(self, predicate: &RowPredicate, mode: FilterMode) -> Result<Filtered<Vec<u8>>> {
        filter_batch(&mut HostExecutor::new(), self, predicate, mode)
    }

    /// [`DeviceBatch::compact`] on a host batch, through the kernels' references.
    pub fn compact_host(self, mask: &DeviceArray<Vec<u8>>) -> Result<Self> {
        compact_batch(&mut HostExecutor::new(), self, mask)
    }
}

/// The first buffer of `batch`, for its stream.
pub(crate) fn first_buffer<B: OwnedBuffer>(batch: &DeviceBatch<B>) -> Option<&B> {
    fn of<B: OwnedBuffer>(a: &DeviceArray<B>) -> Option<&B> {
        a.validity
            .as_ref()
            .or_else(|| a.buffers.first())
            .or_else(|| a.children.iter().find_map(of))
    }
    batch.columns.iter().find_map(|c| of(&c.array))
}

/// An arrow-rs array's layout in `exec` (buffers uploaded, offsets kept).
fn upload_array_data<E: Executor>(exec: &mut E, d: &ArrayData) -> Result<ColumnRef> {
    let validity = match d.nulls() {
        Some(n) if n.null_count() > 0 => Some(BitsRef {
            buf: BufRef {
                addr: exec.upload(n.buffer().as_slice())?,
                len: n.buffer().len() as u64,
            },
            bit_offset: n.offset() as u64,
        }),
        _ => None,
    };
    let buffers = d
        .buffers()
        .iter()
        .map(|b| {
            Ok(BufRef {
                addr: exec.upload(b.as_slice())?,
                len: b.len() as u64,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let children = d
        .child_data()
        .iter()
        .map(|c| upload_array_data(exec, c))
        .collect::<Result<Vec<_>>>()?;
    Ok(ColumnRef {
        data_type: d.data_type().clone(),
        len: d.len() as u64,
        offset: d.offset() as u64,
        null_count: d.null_count() as u64,
        validity,
        buffers,
        children,
    })
}

fn to_array_data<E: Executor>(exec: &mut E, f: &FilteredColumn, input: &ArrayData) -> Result<ArrayData> {
    if f.kept {
        return Ok(input.clone());
    }
    let fail = |e: arrow::error::ArrowError| Error::device("building the row filter's output", e);
    let mut take = |o: OutBuf, k: usize| -> Result<Buffer> {
        match o {
            OutBuf::New(a) => Ok(Buffer::from_vec(exec.take(a)?.to_host()?)),
            OutBuf::Kept => input
                .buffers()
                .get(k)
                .cloned()
                .ok_or_else(|| Error::device("the row filter", format!("no input buffer {k} to keep"))),
        }
    };
    let mut b = ArrayData::builder(f.data_type.clone()).len(f.len as usize);
    if let Some(v) = f.validity {
        b = b
            .null_bit_buffer(Some(take(v, usize::MAX)?))
            .null_count(f.null_count as usize);
    }
    for (k, &o) in f.buffers.iter().enumerate() {
        b = b.add_buffer(take(o, k)?);
    }
    for (fc, ic) in f.children.iter().zip(input.child_data()) {
        b = b.add_child_data(to_array_data(exec, fc, ic)?);
    }
    b.align_buffers(true).build().map_err(fail)
}

/// Filters an arrow-rs batch through the kernels' references ([`filter_columns`] on the host
/// executor): the compacted batch, or the mask. What CI compares with arrow-rs's own filter.
pub fn filter_record_batch(
    batch: &RecordBatch,
    predicate: &RowPredicate,
    mode: FilterMode,
) -> Result<(Option<RecordBatch>, Option<BooleanArray>)> {
    let data: Vec<ArrayData> = batch.columns().iter().map(|c| c.to_data()).collect();
    let names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
    let (rows, mask) = filter_array_data(&data, &names, batch.num_rows(), predicate, mode)?;
    let rows = match rows {
        Some(r) => {
            let options = RecordBatchOptions::new().with_row_count(Some(r.num_rows()));
            Some(
                RecordBatch::try_new_with_options(batch.schema(), r.columns().to_vec(), &options)
                    .map_err(|e| Error::device("building the row filter's output", e))?,
            )
        }
        None => None,
    };
    Ok((rows, mask))
}

/// [`filter_record_batch`] over arrow-rs arrays (at any offsets) named `names`, of `num_rows` rows
/// (the output's fields are nullable).
pub(crate) fn filter_array_data(
    data: &[ArrayData],
    names: &[String],
    num_rows: usize,
    predicate: &RowPredicate,
    mode: FilterMode,
) -> Result<(Option<RecordBatch>, Option<BooleanArray>)> {
    filter_array_data_with(&mut HostExecutor::new(), data, names, num_rows, predicate, mode)
}

/// [`filter_array_data`] on `exec`.
pub(crate) fn filter_array_data_with<E: Executor>(
    exec: &mut E,
    data: &[ArrayData],
    names: &[String],
    num_rows: usize,
    predicate: &RowPredicate,
    mode: FilterMode,
) -> Result<(Option<RecordBatch>, Option<BooleanArray>)> {
    let refs = data
        .iter()
        .map(|d| upload_array_data(exec, d))
        .collect::<Result<Vec<_>>>()?;
    let ctx = FilterContext {
        location: Location::default(),
        names: names.to_vec(),
    };
    match filter_columns(exec, &refs, num_rows as u64, predicate, mode, &ctx)? {
        FilterOutput::Mask { bits, len, .. } => {
            let bytes = exec.take(bits)?.to_host()?;
            let d = ArrayData::builder(DataType::Boolean)
                .len(len as usize)
                .add_buffer(Buffer::from_vec(bytes))
                .build()
                .map_err(|e| Error::device("building the row filter's mask", e))?;
            Ok((None, Some(BooleanArray::from(d))))
        }
        FilterOutput::Rows { num_rows, columns } => {
            let arrays = columns
                .iter()
                .zip(data)
                .map(|(f, d)| to_array_data(exec, f, d).map(make_array))
                .collect::<Result<Vec<ArrayRef>>>()?;
            let fields: Vec<arrow::datatypes::Field> = names
                .iter()
                .zip(&arrays)
                .map(|(n, a)| arrow::datatypes::Field::new(n, a.data_type().clone(), true))
                .collect();
            let schema: SchemaRef = Arc::new(arrow::datatypes::Schema::new(fields));
            let options = RecordBatchOptions::new().with_row_count(Some(num_rows as usize));
            let out = RecordBatch::try_new_with_options(schema, arrays, &options)
                .map_err(|e| Error::device("building the row filter's output", e))?;
            Ok((Some(out), None))
        }
    }
}

/// An argument of a row-filter kernel: a device address (0 or inside a buffer), or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowArg {
    /// An address.
    Ptr(u64),
    /// A `u64`.
    U64(u64),
    /// A `u32`.
    U32(u32),
}

/// One launch of a row-filter kernel: its name, grid and block, and arguments in the kernel's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowLaunch {
    /// The kernel.
    pub name: &'static str,
    /// Blocks.
    pub grid: u32,
    /// Threads a block.
    pub block: u32,
    /// Arguments.
    pub args: Vec<RowArg>,
}

/// Blocks of a grid-stride launch over `items` at `per_block` items a block.
fn stride_grid(items: u64, per_block: u64) -> u32 {
    items.div_ceil(per_block).clamp(1, 65_535) as u32
}

/// How the GPU runs a row-filter [`Kernel`] (`None` for the others): shared by the device executor and
/// the kernel emulation's tests, so the emulation runs exactly the GPU's launches.
pub(crate) fn launch_plan(kernel: &Kernel) -> Option<RowLaunch> {
    use RowArg::*;
    let b = BLOCK as u64;
    let (name, grid, args) = match *kernel {
        Kernel::RowLeaf { leaf, n, out } => ("gp_rf_leaf", stride_grid(n, b), vec![Ptr(leaf), U64(n), Ptr(out)]),
        Kernel::RowLogic { op, a, b: y, n, out } => (
            "gp_rf_logic",
            stride_grid(n, b),
            vec![U32(op as u32), Ptr(a), Ptr(y), U64(n), Ptr(out)],
        ),
        Kernel::RowTileSums { kind, src, n, sums } => (
            "gp_rf_tile_sums",
            n.div_ceil(SCAN_TILE) as u32,
            vec![U32(kind as u32), Ptr(src), U64(n), Ptr(sums)],
        ),
        Kernel::RowTileBases { sums, ntiles, total } => {
            ("gp_rf_tile_bases", 1, vec![Ptr(sums), U64(ntiles), Ptr(total)])
        }
        Kernel::RowTileScan {
            kind,
            src,
            n,
            bases,
            total,
            out,
            out_cap,
        } => (
            "gp_rf_tile_scan",
            n.div_ceil(SCAN_TILE) as u32,
            vec![
                U32(kind as u32),
                Ptr(src),
                U64(n),
                Ptr(bases),
                Ptr(total),
                Ptr(out),
                U64(out_cap),
            ],
        ),
        Kernel::RowMaskBits { mask, n, words, count } => (
            "gp_rf_mask_bits",
            stride_grid(n.div_ceil(32), b),
            vec![Ptr(mask), U64(n), Ptr(words), Ptr(count)],
        ),
        Kernel::RowGatherFixed {
            src,
            src_len,
            width,
            offset,
            rows,
            indices,
            count,
            dst,
            error,
        } => (
            "gp_rf_gather_fixed",
            stride_grid(count, b),
            vec![
                Ptr(src),
                U64(src_len),
                U32(width),
                U64(offset),
                U64(rows),
                Ptr(indices),
                U64(count),
                Ptr(dst),
                Ptr(error),
            ],
        ),
        Kernel::RowGatherBits {
            src,
            src_len,
            bit_offset,
            rows,
            indices,
            count,
            dst,
            set,
            error,
        } => (
            "gp_rf_gather_bits",
            stride_grid(count.div_ceil(32), b),
            vec![
                Ptr(src),
                U64(src_len),
                U64(bit_offset),
                U64(rows),
                Ptr(indices),
                U64(count),
                Ptr(dst),
                Ptr(set),
                Ptr(error),
            ],
        ),
        Kernel::RowGatherLengths {
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            chars_len,
            indices,
            count,
            lens,
            error,
        } => (
            "gp_rf_gather_lengths",
            stride_grid(count, b),
            vec![
                Ptr(offsets),
                U64(offsets_len),
                U32(wide as u32),
                U64(offset),
                U64(rows),
                U64(chars_len),
                Ptr(indices),
                U64(count),
                Ptr(lens),
                Ptr(error),
            ],
        ),
        Kernel::RowGatherChars {
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            chars,
            chars_len,
            indices,
            count,
            dst_offsets,
            dst_wide,
            dst,
            dst_len,
            error,
        } => (
            "gp_rf_gather_chars",
            stride_grid(count, b / 32),
            vec![
                Ptr(offsets),
                U64(offsets_len),
                U32(wide as u32),
                U64(offset),
                U64(rows),
                Ptr(chars),
                U64(chars_len),
                Ptr(indices),
                U64(count),
                Ptr(dst_offsets),
                U32(dst_wide as u32),
                Ptr(dst),
                U64(dst_len),
                Ptr(error),
            ],
        ),
        Kernel::RowExpandRanges {
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            child_rows,
            indices,
            count,
            dst_offsets,
            dst_wide,
            child_indices,
            child_count,
            error,
        } => (
            "gp_rf_expand_ranges",
            stride_grid(count, b / 32),
            vec![
                Ptr(offsets),
                U64(offsets_len),
                U32(wide as u32),
                U64(offset),
                U64(rows),
                U64(child_rows),
                Ptr(indices),
                U64(count),
                Ptr(dst_offsets),
                U32(dst_wide as u32),
                Ptr(child_indices),
                U64(child_count),
                Ptr(error),
            ],
        ),
        _ => return None,
    };
    Some(RowLaunch {
        name,
        grid,
        block: BLOCK,
        args,
    })
}

#[cfg(test)]
#[path = "row_filter_tests.rs"]
pub(crate) mod tests;
