//! The row filter through the host executor (the kernels' references) against arrow-rs: its `cmp`,
//! `boolean` and `is_null` kernels for the predicate, `filter_record_batch` for the compaction.

use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::{Buffer, NullBuffer};
use arrow::compute::kernels::{boolean, cmp};
use arrow::datatypes::{
    Date32Type, Decimal32Type, Decimal64Type, Field, Fields, Float16Type, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, Schema, TimeUnit, TimestampMicrosecondType, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use bytemuck::Pod;
use proptest::prelude::*;

use super::Scalar;
use super::*;
use crate::decode::host_kernels::{Arena, row_filter as r};

/// A xorshift generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// `f`'s value, or `None` `nulls` percent of the time.
    fn maybe<T>(&mut self, nulls: u64, f: impl FnOnce(&mut Rng) -> T) -> Option<T> {
        let v = f(self);
        (!self.chance(nulls)).then_some(v)
    }
}

const INTS: [i64; 9] = [-3, -1, 0, 1, 2, 5, i64::MIN, i64::MAX, 7];
const FLOATS: [f64; 10] = [
    -2.0,
    -0.0,
    0.0,
    1.5,
    f64::NAN,
    -f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    3.25,
    1e-300,
];
const STRINGS: [&str; 9] = [
    "",
    "a",
    "ab",
    "abc",
    "b",
    "a string longer than twelve",
    "a string longer than twelve!",
    "é",
    "abcdefghijkl",
];
const BYTES: [&[u8]; 7] = [
    b"",
    b"\x00",
    b"\xff",
    b"\x00\xff",
    b"\xff\x00",
    b"a binary longer than 12",
    b"z",
];

fn types() -> Vec<DataType> {
    use DataType as D;
    let dict = |k: DataType, v: DataType| D::Dictionary(Box::new(k), Box::new(v));
    vec![
        D::Int8,
        D::Int16,
        D::Int32,
        D::Int64,
        D::UInt8,
        D::UInt16,
        D::UInt32,
        D::UInt64,
        D::Float16,
        D::Float32,
        D::Float64,
        D::Date32,
        D::Timestamp(TimeUnit::Microsecond, None),
        D::Decimal32(7, 2),
        D::Decimal64(15, 2),
        D::Decimal128(30, 2),
        D::Decimal256(60, 2),
        D::Boolean,
        D::Utf8,
        D::LargeUtf8,
        D::Binary,
        D::LargeBinary,
        D::Utf8View,
        D::BinaryView,
        D::FixedSizeBinary(3),
        dict(D::Int32, D::Utf8),
        dict(D::UInt8, D::Int64),
        float_dictionary(),
        D::Struct(Fields::from(vec![
            Field::new("x", D::Int32, true),
            Field::new("s", D::Utf8, true),
        ])),
        D::List(Arc::new(Field::new("item", D::Int32, true))),
        D::LargeList(Arc::new(Field::new("item", D::Utf8, true))),
        map_type(),
    ]
}

/// A dictionary of floats (NaN, -0 and +0 among them).
fn float_dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::UInt8), Box::new(DataType::Float32))
}

/// arrow-rs's map of Utf8 keys to Int32 values, as `MapBuilder` makes it.
fn map_type() -> DataType {
    MapBuilder::new(None, StringBuilder::new(), Int32Builder::new())
        .finish()
        .data_type()
        .clone()
}

/// `n` random values of type `t`, `nulls` percent of them null.
fn gen_array(rng: &mut Rng, t: &DataType, n: usize, nulls: u64) -> ArrayRef {
    use DataType as D;
    macro_rules! ints {
        ($ty:ty) => {{
            let v: PrimitiveArray<$ty> = (0..n)
                .map(|_| {
                    let x = rng.pick(&INTS);
                    rng.maybe(nulls, |_| x as <$ty as ArrowPrimitiveType>::Native)
                })
                .collect();
            Arc::new(v.with_data_type(t.clone())) as ArrayRef
        }};
    }
    match t {
        D::Int8 => ints!(Int8Type),
        D::Int16 => ints!(Int16Type),
        D::Int32 => ints!(Int32Type),
        D::Int64 => ints!(Int64Type),
        D::UInt8 => ints!(UInt8Type),
        D::UInt16 => ints!(UInt16Type),
        D::UInt32 => ints!(UInt32Type),
        D::UInt64 => ints!(UInt64Type),
        D::Date32 => ints!(Date32Type),
        D::Timestamp(..) => ints!(TimestampMicrosecondType),
        D::Decimal32(..) => ints!(Decimal32Type),
        D::Decimal64(..) => ints!(Decimal64Type),
        D::Decimal128(..) => {
            let v: Decimal128Array = (0..n)
                .map(|_| {
                    let x = (rng.pick(&INTS) as i128).wrapping_mul(if rng.chance(30) { 1 << 60 } else { 1 });
                    rng.maybe(nulls, |_| x)
                })
                .collect();
            Arc::new(v.with_data_type(t.clone()))
        }
        D::Decimal256(..) => {
            let v: Decimal256Array = (0..n)
                .map(|_| {
                    let x = i256::from_i128(rng.pick(&INTS) as i128);
                    let x = if rng.chance(30) {
                        x.wrapping_mul(i256::from_i128(1 << 100))
                    } else {
                        x
                    };
                    rng.maybe(nulls, |_| x)
                })
                .collect();
            Arc::new(v.with_data_type(t.clone()))
        }
        D::Float16 => {
            let v: PrimitiveArray<Float16Type> = (0..n)
                .map(|_| rng.maybe(nulls, |rng| F16::from_f64(rng.pick(&FLOATS))))
                .collect();
            Arc::new(v)
        }
        D::Float32 => {
            let v: PrimitiveArray<Float32Type> = (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&FLOATS) as f32))
                .collect();
            Arc::new(v)
        }
        D::Float64 => {
            let v: PrimitiveArray<Float64Type> = (0..n).map(|_| rng.maybe(nulls, |rng| rng.pick(&FLOATS))).collect();
            Arc::new(v)
        }
        D::Boolean => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.chance(50)))
                .collect::<BooleanArray>(),
        ),
        D::Utf8 => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&STRINGS)))
                .collect::<StringArray>(),
        ),
        D::LargeUtf8 => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&STRINGS)))
                .collect::<LargeStringArray>(),
        ),
        D::Utf8View => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&STRINGS)))
                .collect::<StringViewArray>(),
        ),
        D::Binary => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&BYTES)))
                .collect::<BinaryArray>(),
        ),
        D::LargeBinary => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&BYTES)))
                .collect::<LargeBinaryArray>(),
        ),
        D::BinaryView => Arc::new(
            (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.pick(&BYTES)))
                .collect::<BinaryViewArray>(),
        ),
        D::FixedSizeBinary(w) => {
            let vals: Vec<Option<Vec<u8>>> = (0..n)
                .map(|_| {
                    let b: Vec<u8> = (0..*w).map(|_| rng.pick(&[0u8, 1, 0xff])).collect();
                    rng.maybe(nulls, |_| b)
                })
                .collect();
            Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(vals.into_iter(), *w).expect("fsb"))
        }
        D::Dictionary(k, v) => {
            // Values with a null among them (arrow-rs's logical nulls include it), keys into them.
            let nvalues = 1 + rng.below(6) as usize;
            let values = gen_array(rng, v, nvalues, 20);
            let keys: Vec<Option<i64>> = (0..n)
                .map(|_| rng.maybe(nulls, |rng| rng.below(nvalues as u64) as i64))
                .collect();
            match k.as_ref() {
                D::Int32 => Arc::new(
                    DictionaryArray::<Int32Type>::try_new(keys.iter().map(|k| k.map(|k| k as i32)).collect(), values)
                        .expect("dictionary"),
                ),
                _ => Arc::new(
                    DictionaryArray::<UInt8Type>::try_new(keys.iter().map(|k| k.map(|k| k as u8)).collect(), values)
                        .expect("dictionary"),
                ),
            }
        }
        D::Struct(fields) => {
            let children: Vec<ArrayRef> = fields.iter().map(|f| gen_array(rng, f.data_type(), n, nulls)).collect();
            let validity: NullBuffer = (0..n).map(|_| !rng.chance(nulls)).collect();
            Arc::new(StructArray::new(fields.clone(), children, Some(validity)))
        }
        D::List(f) | D::LargeList(f) => {
            let lens: Vec<usize> = (0..n).map(|_| rng.below(4) as usize).collect();
            let items = gen_array(rng, f.data_type(), lens.iter().sum(), nulls);
            let validity: NullBuffer = (0..n).map(|_| !rng.chance(nulls)).collect();
            if matches!(t, D::List(_)) {
                let offsets = arrow::buffer::OffsetBuffer::<i32>::from_lengths(lens);
                Arc::new(ListArray::new(f.clone(), offsets, items, Some(validity)))
            } else {
                let offsets = arrow::buffer::OffsetBuffer::<i64>::from_lengths(lens);
                Arc::new(LargeListArray::new(f.clone(), offsets, items, Some(validity)))
            }
        }
        D::Map(..) => {
            let mut b = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
            for _ in 0..n {
                if rng.chance(nulls) {
                    b.append(false).expect("map");
                    continue;
                }
                for k in 0..rng.below(3) {
                    b.keys().append_value(rng.pick(&STRINGS));
                    b.values().append_option(rng.maybe(nulls, |_| k as i32));
                }
                b.append(true).expect("map");
            }
            Arc::new(b.finish())
        }
        other => panic!("no generator for {other}"),
    }
}

/// A literal for a column of type `t` (a dictionary's: of its values), from the generators' domains.
fn gen_scalar(rng: &mut Rng, t: &DataType) -> Scalar {
    use DataType as D;
    let i = rng.pick(&INTS);
    match t {
        D::Int8 => Scalar::Int8(i as i8),
        D::Int16 => Scalar::Int16(i as i16),
        D::Int32 | D::Date32 | D::Decimal32(..) => Scalar::Int32(i as i32),
        D::Int64 | D::Timestamp(..) | D::Decimal64(..) => Scalar::Int64(i),
        D::UInt8 => Scalar::UInt8(i as u8),
        D::UInt16 => Scalar::UInt16(i as u16),
        D::UInt32 => Scalar::UInt32(i as u32),
        D::UInt64 => Scalar::UInt64(i as u64),
        D::Decimal128(..) => Scalar::Int128((i as i128).wrapping_mul(if rng.chance(30) { 1 << 60 } else { 1 })),
        D::Decimal256(..) => Scalar::Int256(i256::from_i128(i as i128)),
        D::Float16 => Scalar::Float16(F16::from_f64(rng.pick(&FLOATS))),
        D::Float32 => Scalar::Float32(rng.pick(&FLOATS) as f32),
        D::Float64 => Scalar::Float64(rng.pick(&FLOATS)),
        D::Boolean => Scalar::Boolean(rng.chance(50)),
        D::Utf8 | D::LargeUtf8 | D::Utf8View => Scalar::Bytes(rng.pick(&STRINGS).as_bytes().to_vec()),
        D::Binary | D::LargeBinary | D::BinaryView => Scalar::Bytes(rng.pick(&BYTES).to_vec()),
        D::FixedSizeBinary(w) => Scalar::Bytes((0..*w).map(|_| rng.pick(&[0u8, 1, 0xff])).collect()),
        D::Dictionary(_, v) => gen_scalar(rng, v),
        other => panic!("no literal for {other}"),
    }
}

/// `s` as a one-element arrow-rs array of type `t` (a dictionary's values' type).
fn scalar_array(s: &Scalar, t: &DataType) -> ArrayRef {
    use DataType as D;
    match (t, s) {
        (D::Dictionary(_, v), _) => scalar_array(s, v),
        (D::Boolean, Scalar::Boolean(b)) => Arc::new(BooleanArray::from(vec![*b])),
        (D::Utf8, Scalar::Bytes(b)) => Arc::new(StringArray::from(vec![std::str::from_utf8(b).expect("utf8")])),
        (D::LargeUtf8, Scalar::Bytes(b)) => {
            Arc::new(LargeStringArray::from(vec![std::str::from_utf8(b).expect("utf8")]))
        }
        (D::Utf8View, Scalar::Bytes(b)) => Arc::new(StringViewArray::from(vec![std::str::from_utf8(b).expect("utf8")])),
        (D::Binary, Scalar::Bytes(b)) => Arc::new(BinaryArray::from(vec![b.as_slice()])),
        (D::LargeBinary, Scalar::Bytes(b)) => Arc::new(LargeBinaryArray::from(vec![b.as_slice()])),
        (D::BinaryView, Scalar::Bytes(b)) => Arc::new(BinaryViewArray::from(vec![b.as_slice()])),
        (D::FixedSizeBinary(_), Scalar::Bytes(b)) => {
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(b.as_slice())).expect("fsb"))
        }
        _ => make_array(
            ArrayData::builder(t.clone())
                .len(1)
                .add_buffer(Buffer::from_vec(s.to_le()))
                .build()
                .expect("a primitive literal"),
        ),
    }
}

fn leaf_ok(t: &DataType) -> bool {
    leaf_support(t).is_ok()
}

/// A random predicate of depth at most `depth` over `batch`'s columns.
fn gen_predicate(rng: &mut Rng, batch: &RecordBatch, depth: u32) -> RowPredicate {
    if depth > 0 && rng.chance(45) {
        let a = gen_predicate(rng, batch, depth - 1);
        return match rng.below(3) {
            0 => a.and(gen_predicate(rng, batch, depth - 1)),
            1 => a.or(gen_predicate(rng, batch, depth - 1)),
            _ => a.not(),
        };
    }
    let column = rng.below(batch.num_columns() as u64) as usize;
    let t = batch.column(column).data_type().clone();
    if !leaf_ok(&t) || rng.chance(15) {
        return if rng.chance(50) {
            RowPredicate::IsNull(column)
        } else {
            RowPredicate::IsNotNull(column)
        };
    }
    let floats = rng.pick(&[FloatOrder::Total, FloatOrder::Ieee]);
    if rng.chance(20) {
        let values = (0..rng.below(4)).map(|_| gen_scalar(rng, &t)).collect();
        return RowPredicate::in_list(column, values).with_floats(floats);
    }
    let op = rng.pick(&[CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq]);
    RowPredicate::compare(column, op, gen_scalar(rng, &t)).with_floats(floats)
}

/// `c op value` over a float column (or a dictionary of floats) compared as IEEE 754 does (NaN
/// unordered, -0 equal to +0); `None` for other columns.
fn ieee_eval(c: &ArrayRef, op: CmpOp, value: &Scalar) -> Option<BooleanArray> {
    let values = match c.data_type() {
        DataType::Dictionary(_, v) => arrow::compute::cast(c, v).expect("dictionary values"),
        _ => c.clone(),
    };
    if !matches!(
        values.data_type(),
        DataType::Float16 | DataType::Float32 | DataType::Float64
    ) {
        return None;
    }
    let v = match value {
        Scalar::Float16(x) => x.to_f64(),
        Scalar::Float32(x) => *x as f64,
        Scalar::Float64(x) => *x,
        other => panic!("{other:?} on a float column"),
    };
    // IEEE 754's partial order: NaN unordered, -0 equal to +0.
    use std::cmp::Ordering::{Equal, Greater, Less};
    let xs = arrow::compute::cast(&values, &DataType::Float64).expect("as f64");
    let holds = |x: f64| {
        let ord = x.partial_cmp(&v);
        match op {
            CmpOp::Eq => ord == Some(Equal),
            CmpOp::NotEq => ord != Some(Equal),
            CmpOp::Lt => ord == Some(Less),
            CmpOp::LtEq => matches!(ord, Some(Less | Equal)),
            CmpOp::Gt => ord == Some(Greater),
            CmpOp::GtEq => matches!(ord, Some(Greater | Equal)),
        }
    };
    Some(xs.as_primitive::<Float64Type>().iter().map(|x| x.map(holds)).collect())
}

/// arrow-rs's result of `p` over `batch`.
fn arrow_eval(batch: &RecordBatch, p: &RowPredicate) -> BooleanArray {
    let col = |c: usize| batch.column(c).clone();
    let eq = |c: &ArrayRef, s: &Scalar, floats: FloatOrder| {
        if let Some(r) = ieee_eval(c, CmpOp::Eq, s).filter(|_| floats == FloatOrder::Ieee) {
            return r;
        }
        let lit = arrow::array::Scalar::new(scalar_array(s, c.data_type()));
        cmp::eq(c, &lit).expect("arrow eq")
    };
    match p {
        RowPredicate::Compare {
            column,
            op,
            value,
            floats,
        } => {
            let c = col(*column);
            if let Some(r) = ieee_eval(&c, *op, value).filter(|_| *floats == FloatOrder::Ieee) {
                return r;
            }
            let lit = arrow::array::Scalar::new(scalar_array(value, c.data_type()));
            match op {
                CmpOp::Eq => cmp::eq(&c, &lit),
                CmpOp::NotEq => cmp::neq(&c, &lit),
                CmpOp::Lt => cmp::lt(&c, &lit),
                CmpOp::LtEq => cmp::lt_eq(&c, &lit),
                CmpOp::Gt => cmp::gt(&c, &lit),
                CmpOp::GtEq => cmp::gt_eq(&c, &lit),
            }
            .expect("arrow cmp")
        }
        RowPredicate::InList { column, values, floats } => {
            let c = col(*column);
            // SQL: unknown where the column is null, else whether any literal is equal.
            let none = BooleanArray::new(arrow::buffer::BooleanBuffer::new_unset(c.len()), c.logical_nulls());
            values.iter().fold(none, |acc, v| {
                boolean::or_kleene(&acc, &eq(&c, v, *floats)).expect("or")
            })
        }
        RowPredicate::IsNull(c) => arrow::compute::is_null(&col(*c)).expect("is_null"),
        RowPredicate::IsNotNull(c) => arrow::compute::is_not_null(&col(*c)).expect("is_not_null"),
        RowPredicate::And(a, b) => boolean::and_kleene(&arrow_eval(batch, a), &arrow_eval(batch, b)).expect("and"),
        RowPredicate::Or(a, b) => boolean::or_kleene(&arrow_eval(batch, a), &arrow_eval(batch, b)).expect("or"),
        RowPredicate::Not(a) => boolean::not(&arrow_eval(batch, a)).expect("not"),
    }
}

/// Asserts the filter of `data` (columns, possibly at offsets) by `p` equals arrow-rs's, both modes.
/// `mask` with unknown as false.
fn nulls_false(mask: &BooleanArray) -> BooleanArray {
    if mask.nulls().is_some() {
        arrow::compute::prep_null_mask_filter(mask)
    } else {
        mask.clone()
    }
}

fn check(data: &[ArrayData], p: &RowPredicate) {
    let arrays: Vec<ArrayRef> = data.iter().map(|d| make_array(d.clone())).collect();
    let fields: Vec<Field> = arrays
        .iter()
        .enumerate()
        .map(|(k, a)| Field::new(format!("c{k}"), a.data_type().clone(), true))
        .collect();
    let n = data.first().map_or(0, ArrayData::len);
    let batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .expect("batch");
    let mask = arrow_eval(&batch, p);
    let want = arrow::compute::filter_record_batch(&batch, &mask).expect("arrow filter");
    let names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
    let (got, _) = filter_array_data(data, &names, n, p, FilterMode::Compact).unwrap_or_else(|e| panic!("{e}"));
    let got = got.expect("rows");
    assert_eq!(got.num_rows(), want.num_rows(), "{p:?}");
    for (k, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
        assert_eq!(g.data_type(), w.data_type(), "column {k}");
        assert_eq!(g.null_count(), w.null_count(), "column {k} null count, {p:?}");
        assert_eq!(g.as_ref(), w.as_ref(), "column {k} ({}), {p:?}", g.data_type());
        g.to_data().validate_full().expect("a valid output");
    }
    let (_, got_mask) = filter_array_data(data, &names, n, p, FilterMode::Mask).unwrap_or_else(|e| panic!("{e}"));
    let want_mask = nulls_false(&mask);
    assert_eq!(got_mask.expect("mask"), want_mask, "mask of {p:?}");
}

/// Columns of `types` over `n` rows, each sliced at a random offset (the data's own offset for all
/// but structs, whose slice goes to their children).
fn gen_columns(rng: &mut Rng, types: &[DataType], n: usize) -> Vec<ArrayData> {
    types
        .iter()
        .map(|t| {
            let skip = rng.below(5) as usize;
            let extra = rng.below(3) as usize;
            let nulls = rng.pick(&[0, 10, 40, 100]);
            gen_array(rng, t, skip + n + extra, nulls).to_data().slice(skip, n)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn filter_equals_arrow_over_random_columns_and_predicates(seed in any::<u64>(), n in 0usize..300) {
        let mut rng = Rng::new(seed);
        let all = types();
        let picked: Vec<DataType> = (0..1 + rng.below(4)).map(|_| rng.pick(&all)).collect();
        let data = gen_columns(&mut rng, &picked, n);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(picked.iter().enumerate().map(|(k, t)| Field::new(format!("c{k}"), t.clone(), true)).collect::<Vec<_>>())),
            data.iter().map(|d| make_array(d.clone())).collect(),
        ).expect("batch");
        let p = gen_predicate(&mut rng, &batch, 3);
        check(&data, &p);
    }
}

#[test]
fn every_type_filters_as_arrow_does() {
    let mut rng = Rng::new(43);
    for t in types() {
        for _ in 0..6 {
            let data = gen_columns(&mut rng, std::slice::from_ref(&t), 200);
            let p = if leaf_ok(&t) {
                let op = rng.pick(&[CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq]);
                RowPredicate::compare(0, op, gen_scalar(&mut rng, &t))
            } else {
                RowPredicate::IsNotNull(0)
            };
            check(&data, &p);
        }
    }
}

#[test]
fn more_rows_than_one_tile_empty_none_and_all() {
    let mut rng = Rng::new(7);
    let ts = [DataType::Int64, DataType::Utf8, DataType::Boolean, DataType::Utf8View];
    for n in [0usize, 1, 4095, 4096, 4097, 70_000] {
        let data = gen_columns(&mut rng, &ts, n);
        check(&data, &RowPredicate::compare(0, CmpOp::GtEq, Scalar::Int64(0)));
        // Nothing, everything (a tautology over non-null rows, and over all rows).
        check(&data, &RowPredicate::in_list(1, vec![]));
        let all = RowPredicate::IsNull(2).or(RowPredicate::IsNotNull(2));
        check(&data, &all);
        check(&data, &all.clone().not());
    }
}

#[test]
fn mask_and_rows_of_a_device_batch_on_the_host_executor() {
    let mut rng = Rng::new(11);
    let ts = [DataType::Int32, DataType::LargeUtf8, DataType::Boolean];
    let data: Vec<ArrayData> = ts.iter().map(|t| gen_array(&mut rng, t, 1000, 30).to_data()).collect();
    let arrays: Vec<ArrayRef> = data.iter().map(|d| make_array(d.clone())).collect();
    let schema = Arc::new(Schema::new(
        ts.iter()
            .enumerate()
            .map(|(k, t)| Field::new(format!("c{k}"), t.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema.clone(), arrays).expect("batch");
    let device_batch = || -> DeviceBatch<Vec<u8>> {
        DeviceBatch {
            schema: schema.clone(),
            num_rows: 1000,
            columns: batch
                .columns()
                .iter()
                .enumerate()
                .map(|(k, a)| DeviceColumn {
                    name: format!("c{k}"),
                    array: crate::decode::table::upload_array(&a.to_data(), &mut |b: &[u8]| Ok(b.to_vec()))
                        .expect("upload"),
                    decoded: crate::decode::table::DecodedWhere::Gpu,
                })
                .collect(),
            row_groups: vec![0],
            location: Location::file("test.parquet"),
        }
    };
    let p = RowPredicate::compare(0, CmpOp::Gt, Scalar::Int32(0)).or(RowPredicate::IsNull(2));
    let mask = arrow_eval(&batch, &p);
    let want = arrow::compute::filter_record_batch(&batch, &mask).expect("filter");
    let rows = device_batch().filter_host(&p, FilterMode::Compact).expect("filter");
    let (got, none) = rows.to_host().expect("host copy");
    assert!(none.is_none());
    assert_eq!(got, want);
    let Filtered::Mask {
        batch: same,
        mask: m,
        selected,
    } = device_batch().filter_host(&p, FilterMode::Mask).expect("mask")
    else {
        panic!("a mask asked for");
    };
    assert_eq!(same.to_host().expect("host"), batch);
    assert_eq!(selected, want.num_rows());
    assert_eq!(m.buffers[0].len() % BITMAP_PADDING, 0, "a padded bitmap");
    let mask_array = m;
    let m = mask_array.to_host().expect("host");
    assert_eq!(m.as_boolean(), &nulls_false(&mask));
    // The mask of the filter columns compacts the batch as the predicate would.
    let compacted = device_batch().compact_host(&mask_array).expect("compact");
    assert_eq!(compacted.to_host().expect("host"), want);
    // A mask of another length is refused.
    let mut short = device_batch();
    short.num_rows = 999;
    let e = short.compact_host(&mask_array).unwrap_err();
    assert!(e.to_string().contains("999"), "{e}");
}

#[test]
fn a_predicate_names_its_columns_and_moves_to_others() {
    let p = RowPredicate::compare(4, CmpOp::Gt, Scalar::Int32(0))
        .and(RowPredicate::IsNull(1).or(RowPredicate::in_list(4, vec![]).not()));
    assert_eq!(p.columns(), vec![1, 4]);
    let q = p.map_columns(&|c| if c == 4 { 0 } else { 1 });
    assert_eq!(q.columns(), vec![0, 1]);
    assert_eq!(q.map_columns(&|c| if c == 0 { 4 } else { 1 }), p);
}

/// A Utf8 column of `n` rows in `exec` whose offsets run past its characters at row `bad`.
fn bad_strings<E: Executor>(exec: &mut E, n: u64, bad: u64) -> ColumnRef {
    let offsets: Vec<i32> = (0..=n as i32)
        .map(|i| if i as u64 > bad { 90 + i } else { i })
        .collect();
    let chars = vec![b'a'; n as usize];
    let offsets = BufRef {
        addr: exec.upload(&offsets).expect("upload"),
        len: 4 * (n + 1),
    };
    let chars = BufRef {
        addr: exec.upload(&chars).expect("upload"),
        len: n,
    };
    ColumnRef {
        data_type: DataType::Utf8,
        len: n,
        offset: 0,
        null_count: 0,
        validity: None,
        buffers: vec![offsets, chars],
        children: Vec::new(),
    }
}

/// The error of filtering `bad_strings(n, bad)` by `p` on `exec`.
fn bad_strings_error<E: Executor>(exec: &mut E, p: &RowPredicate, mode: FilterMode) -> String {
    let col = bad_strings(exec, 5, 2);
    let ctx = FilterContext {
        location: Location::file("f.parquet"),
        names: vec!["s".to_string()],
    };
    filter_columns(exec, &[col], 5, p, mode, &ctx).unwrap_err().to_string()
}

#[test]
fn a_bad_offset_buffer_is_an_error_naming_the_column_and_row() {
    let p = RowPredicate::compare(0, CmpOp::Eq, Scalar::Bytes(b"a".to_vec()));
    let msg = bad_strings_error(&mut HostExecutor::new(), &p, FilterMode::Mask);
    assert!(
        msg.contains("f.parquet") && msg.contains("'s'") && msg.contains("row 2"),
        "{msg}"
    );
    // A predicate that reads no string, and the compaction then meets the bad row.
    let msg = bad_strings_error(
        &mut HostExecutor::new(),
        &RowPredicate::IsNotNull(0),
        FilterMode::Compact,
    );
    assert!(msg.contains("'s'") && msg.contains("row 2"), "{msg}");
}

#[test]
fn unsupported_types_and_literals_are_clear_errors() {
    let names = vec!["m".to_string()];
    let fsl = FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), Some(2)])], 2);
    let d = fsl.to_data();
    let e = filter_array_data(
        std::slice::from_ref(&d),
        &names,
        1,
        &RowPredicate::IsNull(0),
        FilterMode::Compact,
    )
    .unwrap_err();
    assert!(e.to_string().contains("FixedSizeList"), "{e}");
    // The mask of an `is null` needs no compaction: any type.
    let (_, m) = filter_array_data(
        std::slice::from_ref(&d),
        &names,
        1,
        &RowPredicate::IsNull(0),
        FilterMode::Mask,
    )
    .expect("mask");
    assert_eq!(m.expect("mask").true_count(), 0);
    let ints = Int32Array::from(vec![1, 2, 3]).to_data();
    let e = filter_array_data(
        std::slice::from_ref(&ints),
        &names,
        3,
        &RowPredicate::compare(0, CmpOp::Eq, Scalar::Int64(1)),
        FilterMode::Compact,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("does not fit") && e.to_string().contains("Int32"),
        "{e}"
    );
    let e = filter_array_data(&[ints], &names, 3, &RowPredicate::IsNull(4), FilterMode::Compact).unwrap_err();
    assert!(e.to_string().contains("column 4"), "{e}");
}

#[test]
fn kleene_truth_tables() {
    use r::{FALSE as F, TRUE as T, UNKNOWN as U};
    let and = [[F, F, F], [F, T, U], [F, U, U]];
    let or = [[F, T, U], [T, T, T], [U, T, U]];
    for (i, p) in [F, T, U].into_iter().enumerate() {
        for (j, q) in [F, T, U].into_iter().enumerate() {
            assert_eq!(r::kleene(RowLogicOp::And, p, q), and[i][j]);
            assert_eq!(r::kleene(RowLogicOp::Or, p, q), or[i][j]);
        }
    }
    assert_eq!([F, T, U].map(|p| r::kleene(RowLogicOp::Not, p, 0)), [T, F, U]);
}

#[test]
fn the_scan_numbers_selected_rows_across_tiles() {
    let mut a = Arena::new();
    let n = 3 * SCAN_TILE + 17;
    let mask: Vec<u8> = (0..n).map(|i| [1u8, 0, 2, 1, 1][(i % 5) as usize]).collect();
    let m = a.upload(&mask);
    let ntiles = n.div_ceil(SCAN_TILE);
    let sums = a.alloc(8 * ntiles as usize);
    let total = a.alloc(8);
    r::tile_sums(&mut a, RowScan::Mask, m, n, sums);
    r::tile_bases(&mut a, sums, ntiles, total);
    let count = a.read::<u64>(total, 1).expect("total")[0];
    let want: Vec<u32> = (0..n as u32).filter(|&i| mask[i as usize] == 1).collect();
    assert_eq!(count, want.len() as u64);
    let out = a.alloc(4 * count as usize);
    r::tile_scan(&mut a, RowScan::Mask, m, n, sums, total, out, count);
    assert_eq!(a.read::<u32>(out, count as usize).expect("out"), want);
}

/// Floats in total order.
const TOTAL_ORDER: [f64; 8] = [
    -f64::NAN,
    f64::NEG_INFINITY,
    -1.0,
    -0.0,
    0.0,
    1.0,
    f64::INFINITY,
    f64::NAN,
];

#[test]
fn floats_compare_in_total_order_as_arrow_does() {
    // -NaN < -inf < -0 < +0 < inf < NaN, NaN equal to itself.
    let xs = TOTAL_ORDER;
    let col = Float64Array::from(xs.to_vec()).to_data();
    for (k, &x) in xs.iter().enumerate() {
        for op in [CmpOp::Eq, CmpOp::Lt, CmpOp::GtEq] {
            check(
                std::slice::from_ref(&col),
                &RowPredicate::compare(0, op, Scalar::Float64(x)),
            );
        }
        let (_, m) = filter_array_data(
            std::slice::from_ref(&col),
            &["f".to_string()],
            xs.len() as u64 as usize,
            &RowPredicate::compare(0, CmpOp::Lt, Scalar::Float64(x)),
            FilterMode::Mask,
        )
        .expect("mask");
        assert_eq!(m.expect("mask").true_count(), k, "values below {x}");
    }
}

#[test]
fn floats_compare_as_ieee_when_asked() {
    // NaN matches only `!=`; -0 equals +0; at every width.
    let xs = TOTAL_ORDER;
    let ops = [CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq];
    let columns = [
        Float64Array::from(xs.to_vec()).to_data(),
        Float32Array::from(xs.iter().map(|&x| x as f32).collect::<Vec<_>>()).to_data(),
        Float16Array::from(xs.iter().map(|&x| F16::from_f64(x)).collect::<Vec<_>>()).to_data(),
    ];
    for col in &columns {
        for &x in &xs {
            let lit = match col.data_type() {
                DataType::Float64 => Scalar::Float64(x),
                DataType::Float32 => Scalar::Float32(x as f32),
                _ => Scalar::Float16(F16::from_f64(x)),
            };
            for op in ops {
                let p = RowPredicate::compare(0, op, lit.clone()).with_floats(FloatOrder::Ieee);
                check(std::slice::from_ref(col), &p);
                let (_, m) =
                    filter_array_data(std::slice::from_ref(col), &["f".into()], xs.len(), &p, FilterMode::Mask)
                        .expect("mask");
                let want: Vec<bool> = xs
                    .iter()
                    .map(|&v| match op {
                        CmpOp::Eq => v == x,
                        CmpOp::NotEq => v != x,
                        CmpOp::Lt => v < x,
                        CmpOp::LtEq => v <= x,
                        CmpOp::Gt => v > x,
                        CmpOp::GtEq => v >= x,
                    })
                    .collect();
                assert_eq!(
                    m.expect("mask"),
                    BooleanArray::from(want),
                    "{op:?} {x} on {}",
                    col.data_type()
                );
            }
            let p = RowPredicate::in_list(0, vec![lit.clone(), lit.clone()]).with_floats(FloatOrder::Ieee);
            check(std::slice::from_ref(col), &p);
        }
    }
}

/// The kernels' CUDA source run on the CPU ([`crate::decode::kernels::emu`], under ASan and UBSan) as
/// an executor: memory is an arena, each launch runs its [`launch_plan`] in the emulation over all of
/// it, every allocation exactly its size there.
#[derive(Debug)]
pub(crate) struct EmuExecutor {
    arena: Arena,
}

impl Default for EmuExecutor {
    fn default() -> Self {
        // Arena::new, not Arena's derived default: addresses start above 0, as 0 means none.
        EmuExecutor { arena: Arena::new() }
    }
}

impl EmuExecutor {
    fn missing(addr: u64) -> Error {
        Error::device("the kernel emulation", format!("{addr:#x} is outside every allocation"))
    }
}

impl Executor for EmuExecutor {
    type Buffer = Vec<u8>;

    fn alloc(&mut self, bytes: usize) -> Result<u64> {
        Ok(self.arena.alloc(bytes))
    }
    fn alloc_uninit(&mut self, bytes: usize) -> Result<u64> {
        Ok(self.arena.upload(&vec![crate::decode::exec::UNINIT_POISON; bytes]))
    }
    fn upload<T: Pod>(&mut self, items: &[T]) -> Result<u64> {
        Ok(self.arena.upload_slice(items))
    }
    fn write<T: Pod>(&mut self, addr: u64, items: &[T]) -> Result<()> {
        if self.arena.write(addr, items) {
            Ok(())
        } else {
            Err(Self::missing(addr))
        }
    }
    fn read<T: Pod>(&mut self, addr: u64, count: usize) -> Result<Vec<T>> {
        self.arena.read(addr, count).ok_or_else(|| Self::missing(addr))
    }
    fn take(&mut self, addr: u64) -> Result<Vec<u8>> {
        let bytes = self.arena.region(addr).ok_or_else(|| Self::missing(addr))?.to_vec();
        self.arena.free(addr);
        Ok(bytes)
    }
    fn free(&mut self, addr: u64) {
        self.arena.free(addr);
    }
    fn adopt(&mut self, buffer: Vec<u8>) -> Result<u64> {
        Ok(self.arena.upload(&buffer))
    }
    fn release_chunks(&mut self, chunk_base: u64) {
        self.arena.free(chunk_base);
    }
    fn launch(&mut self, kernel: Kernel) -> Result<()> {
        let plan = launch_plan(&kernel)
            .ok_or_else(|| Error::device("the kernel emulation", format!("{kernel:?} is not a row-filter kernel")))?;
        let regions: Vec<(u64, Vec<u8>)> = self.arena.iter().map(|(a, b)| (a, b.to_vec())).collect();
        let back = crate::decode::kernels::emu::run_row_filter_emulated(&regions, &plan);
        for ((addr, _), bytes) in regions.iter().zip(back) {
            self.arena.write(*addr, &bytes);
        }
        Ok(())
    }
    fn decompress(
        &mut self,
        _codec: parquet::basic::Compression,
        _items: &[crate::decode::exec::Decompress],
    ) -> Result<(
        Vec<std::result::Result<usize, String>>,
        crate::decode::exec::DecompressedOn,
    )> {
        Err(Error::device("the kernel emulation", "runs no decompression"))
    }
}

impl FilterExecutor for EmuExecutor {
    fn address_of(&mut self, buf: &Vec<u8>) -> Result<u64> {
        self.upload(buf.as_slice())
    }
}

/// The emulated kernels' filter of `data` equals the references' (and so arrow-rs's), both modes.
fn check_emulated(data: &[ArrayData], p: &RowPredicate) {
    let n = data.first().map_or(0, ArrayData::len);
    let names: Vec<String> = (0..data.len()).map(|k| format!("c{k}")).collect();
    for mode in [FilterMode::Compact, FilterMode::Mask] {
        let want = filter_array_data(data, &names, n, p, mode).unwrap_or_else(|e| panic!("{e}"));
        let got = filter_array_data_with(&mut EmuExecutor::default(), data, &names, n, p, mode)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, want, "{mode:?} of {p:?}");
    }
}

#[test]
fn kernels_match_references_in_the_emulation() {
    if let Err(why) = crate::decode::kernels::emu::available() {
        crate::test_skip(&why);
        return;
    }
    let mut rng = Rng::new(2024);
    let all = types();
    // Every type once, under a random predicate over it and a neighbour.
    for pair in all.chunks(2) {
        let data = gen_columns(&mut rng, pair, 150);
        let schema = Schema::new(
            pair.iter()
                .enumerate()
                .map(|(k, t)| Field::new(format!("c{k}"), t.clone(), true))
                .collect::<Vec<_>>(),
        );
        let batch = RecordBatch::try_new(Arc::new(schema), data.iter().map(|d| make_array(d.clone())).collect())
            .expect("batch");
        let p = gen_predicate(&mut rng, &batch, 2);
        check_emulated(&data, &p);
    }
    // Floats as IEEE 754 compares them, at every width and through a dictionary.
    let floats = [
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        float_dictionary(),
    ];
    let data = gen_columns(&mut rng, &floats, 200);
    for (k, t) in floats.iter().enumerate() {
        for op in [CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::GtEq] {
            for _ in 0..2 {
                let p = RowPredicate::compare(k, op, gen_scalar(&mut rng, t)).with_floats(FloatOrder::Ieee);
                check(&data, &p);
                check_emulated(&data, &p);
            }
        }
        let values = (0..3).map(|_| gen_scalar(&mut rng, t)).collect();
        check_emulated(
            &data,
            &RowPredicate::in_list(k, values).with_floats(FloatOrder::Ieee).not(),
        );
    }
    // Several tiles of the scan, and a bad offset buffer's error.
    let data = gen_columns(&mut rng, &[DataType::Int64, DataType::Utf8], 9000);
    check_emulated(&data, &RowPredicate::compare(0, CmpOp::Gt, Scalar::Int64(0)));
    let p = RowPredicate::compare(0, CmpOp::Eq, Scalar::Bytes(b"a".to_vec()));
    let msg = bad_strings_error(&mut EmuExecutor::default(), &p, FilterMode::Compact);
    assert!(msg.contains("row 2"), "{msg}");
    let msg = bad_strings_error(
        &mut EmuExecutor::default(),
        &RowPredicate::IsNotNull(0),
        FilterMode::Compact,
    );
    assert!(msg.contains("row 2"), "{msg}");
}

/// Columns whose buffers hold garbage where Arrow wants order: random offsets (some backwards, negative
/// or past the characters), views pointing anywhere, dictionary keys out of range, list offsets past
/// the items, validity and value buffers shorter than the rows. Built in `exec` as the filter reads
/// them (no arrow-rs array could hold them).
fn hostile_columns<E: Executor>(exec: &mut E, rng: &mut Rng, n: u64) -> Vec<ColumnRef> {
    let buf = |exec: &mut E, bytes: Vec<u8>| BufRef {
        len: bytes.len() as u64,
        addr: exec.upload(&bytes).expect("upload"),
    };
    let offsets32 = |rng: &mut Rng, n: u64, within: u64| -> Vec<u8> {
        let mut at = 0i64;
        (0..=n)
            .flat_map(|_| {
                at = if rng.chance(3) {
                    rng.next() as i32 as i64
                } else {
                    (at + rng.below(4) as i64).min(within as i64 + 1)
                };
                (at as i32).to_le_bytes()
            })
            .collect()
    };
    let chars_len = rng.below(3 * n + 1);
    let short = |rng: &mut Rng, len: u64| if rng.chance(20) { rng.below(len + 1) } else { len };
    let col = |t: DataType, buffers: Vec<BufRef>, children: Vec<ColumnRef>| ColumnRef {
        data_type: t,
        len: n,
        offset: 0,
        null_count: 0,
        validity: None,
        buffers,
        children,
    };
    let mut cols = Vec::new();
    // Utf8 with hostile offsets.
    let o = offsets32(rng, n, chars_len);
    let (o, c) = (buf(exec, o), buf(exec, vec![b'x'; chars_len as usize]));
    cols.push(col(DataType::Utf8, vec![o, c], vec![]));
    // LargeBinary: 64-bit offsets, some huge.
    let o: Vec<u8> = (0..=n)
        .flat_map(|i| {
            let v = if rng.chance(3) { rng.next() as i64 } else { i as i64 };
            v.to_le_bytes()
        })
        .collect();
    let (o, c) = (buf(exec, o), buf(exec, vec![b'y'; n as usize]));
    cols.push(col(DataType::LargeBinary, vec![o, c], vec![]));
    // Views: lengths, buffer indices and offsets at random, one data buffer of 40 bytes.
    let views: Vec<u8> = (0..n)
        .flat_map(|_| {
            let len = rng.pick(&[0u32, 5, 12, 13, 30, u32::MAX]);
            let mut v = [0u8; 16];
            v[..4].copy_from_slice(&len.to_le_bytes());
            v[4..8].copy_from_slice(b"abcd");
            v[8..12].copy_from_slice(&rng.pick(&[0u32, 1, u32::MAX]).to_le_bytes());
            v[12..16].copy_from_slice(&rng.pick(&[0u32, 10, 39, u32::MAX - 3]).to_le_bytes());
            v
        })
        .collect();
    let len = short(rng, views.len() as u64) as usize;
    let (v, d) = (buf(exec, views[..len].to_vec()), buf(exec, vec![b'v'; 40]));
    cols.push(col(DataType::Utf8View, vec![v, d], vec![]));
    // Dictionary with Int8 keys, some negative or past its three values.
    let keys: Vec<u8> = (0..n).map(|_| rng.pick(&[0i8, 1, 2, 3, -1, 127]) as u8).collect();
    let vo = buf(exec, [0i32, 1, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect());
    let vc = buf(exec, b"abc".to_vec());
    let values = ColumnRef {
        len: 3,
        ..col(DataType::Utf8, vec![vo, vc], vec![])
    };
    let k = buf(exec, keys);
    cols.push(col(
        DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
        vec![k],
        vec![values],
    ));
    // A list of Int32 whose offsets may run past its items.
    let items = rng.below(2 * n + 1);
    let o = offsets32(rng, n, items);
    let o = buf(exec, o);
    let iv = buf(exec, (0..items as i32).flat_map(|x| x.to_le_bytes()).collect());
    let child = ColumnRef {
        len: items,
        ..col(DataType::Int32, vec![iv], vec![])
    };
    cols.push(col(
        DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
        vec![o],
        vec![child],
    ));
    // Int32 with values and validity perhaps shorter than the rows.
    let vals = (0..n as i32).flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>();
    let vlen = short(rng, vals.len() as u64) as usize;
    let validity: Vec<u8> = (0..n.div_ceil(8)).map(|_| rng.next() as u8).collect();
    let blen = short(rng, validity.len() as u64) as usize;
    let (v, b) = (buf(exec, vals[..vlen].to_vec()), buf(exec, validity[..blen].to_vec()));
    cols.push(ColumnRef {
        null_count: 1,
        validity: Some(BitsRef { buf: b, bit_offset: 0 }),
        ..col(DataType::Int32, vec![v], vec![])
    });
    cols
}

fn hostile_predicates() -> Vec<RowPredicate> {
    let cmp = RowPredicate::compare;
    vec![
        RowPredicate::IsNotNull(5),
        cmp(0, CmpOp::GtEq, Scalar::Bytes(b"x".to_vec())),
        cmp(1, CmpOp::NotEq, Scalar::Bytes(Vec::new())),
        cmp(2, CmpOp::Lt, Scalar::Bytes(b"abcd".to_vec())),
        cmp(3, CmpOp::Eq, Scalar::Bytes(b"b".to_vec())),
        cmp(5, CmpOp::Gt, Scalar::Int32(3)).or(RowPredicate::IsNull(4)),
    ]
}

/// What a filter made, as host bytes: each output buffer's bytes in order, or the error.
fn outcome<E: Executor>(exec: &mut E, r: Result<FilterOutput>) -> std::result::Result<Vec<Vec<u8>>, String> {
    fn bufs<E: Executor>(exec: &mut E, c: &FilteredColumn, out: &mut Vec<Vec<u8>>) {
        out.push(vec![c.null_count as u8, c.len as u8]);
        for o in c.validity.iter().chain(&c.buffers) {
            if let OutBuf::New(a) = *o {
                out.push(exec.take(a).expect("take").to_host().expect("host"));
            }
        }
        for ch in &c.children {
            bufs(exec, ch, out);
        }
    }
    let mut out = Vec::new();
    match r.map_err(|e| e.to_string())? {
        FilterOutput::Mask { bits, selected, .. } => {
            out.push(exec.take(bits).expect("take").to_host().expect("host"));
            out.push(selected.to_le_bytes().to_vec());
        }
        FilterOutput::Rows { num_rows, columns } => {
            out.push(num_rows.to_le_bytes().to_vec());
            for c in &columns {
                bufs(exec, c, &mut out);
            }
        }
    }
    Ok(out)
}

#[test]
fn hostile_buffers_give_the_references_result_and_stay_inside_in_the_emulation() {
    let emulate = crate::decode::kernels::emu::available();
    if let Err(why) = &emulate {
        crate::test_skip(&format!("the references run alone: {why}"));
    }
    let ctx = FilterContext::default();
    let mut errors = 0;
    for seed in 1..=4u64 {
        for (k, p) in hostile_predicates().iter().enumerate() {
            for mode in [FilterMode::Compact, FilterMode::Mask] {
                let n = 40 + 50 * seed;
                let mut host = HostExecutor::new();
                let cols = hostile_columns(&mut host, &mut Rng::new(seed), n);
                let r = filter_columns(&mut host, &cols, n, p, mode, &ctx);
                let want = outcome(&mut host, r);
                errors += want.is_err() as usize;
                // Only the compaction of every column is emulated for each seed (the slow part).
                if emulate.is_ok() && (k == 0 || seed == 1) {
                    let mut emu = EmuExecutor::default();
                    let cols = hostile_columns(&mut emu, &mut Rng::new(seed), n);
                    let r = filter_columns(&mut emu, &cols, n, p, mode, &ctx);
                    assert_eq!(outcome(&mut emu, r), want, "seed {seed}, {p:?}, {mode:?}");
                }
            }
        }
    }
    assert!(errors > 0, "the hostile buffers must be found out");
}
