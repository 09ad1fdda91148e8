//! The lowered predicate, run by the row filter's host references and by the kernels' CUDA source in
//! the emulation, selects exactly the rows [`Predicate::evaluate`] accepts: random filters over random
//! batches with NaN, -0.0, nulls, strings, decimals, dates, timestamps and dictionaries.

use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::{DataType, Field, Int32Type, Schema, UInt8Type};
use arrow::record_batch::RecordBatch;
use proptest::prelude::*;

use super::*;
use crate::decode::row_filter::{FilterMode, filter_array_data_with, filter_record_batch};
use crate::error::Location;
use crate::filter::{CmpOp, Expr, Literal};

const FLOATS: [f64; 9] = [
    f64::NAN,
    -0.0,
    0.0,
    1.5,
    -2.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    3.25,
    -f64::NAN,
];
const FLOAT_LITERALS: [&str; 9] = ["NaN", "-0", "0", "0.0", "1.5", "-2", "inf", "-inf", "3.25"];
const STRINGS: [&str; 5] = ["", "a", "ab", "b", "zz"];

struct Rng(Box<dyn FnMut() -> u64>);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(Box::new(crate::decode::host_kernels::xorshift(seed | 1)))
    }
    fn below(&mut self, n: usize) -> usize {
        ((self.0)() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
    /// Some of `xs` (null `nulls` percent of the time), `n` times.
    fn column<T: Clone>(&mut self, xs: &[T], n: usize, nulls: usize) -> Vec<Option<T>> {
        (0..n).map(|_| (!self.chance(nulls)).then(|| self.pick(xs))).collect()
    }
}

/// Every column kind the tests filter: its name and a batch column of `n` rows.
fn gen_batch(rng: &mut Rng, n: usize) -> RecordBatch {
    let nulls = rng.pick(&[0, 10, 40]);
    let strings = rng.column(&STRINGS, n, nulls);
    let dictionary_values = StringArray::from(vec![Some("a"), None, Some("zz"), Some("")]);
    let keys: Int32Array = (0..n)
        .map(|_| (!rng.chance(nulls)).then(|| rng.below(4) as i32))
        .collect();
    let float_dictionary = Float64Array::from(vec![Some(f64::NAN), Some(-0.0), Some(1.5), None]);
    let float_keys: UInt8Array = (0..n)
        .map(|_| (!rng.chance(nulls)).then(|| rng.below(4) as u8))
        .collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("f64", Arc::new(Float64Array::from(rng.column(&FLOATS, n, nulls)))),
        (
            "f32",
            Arc::new(Float32Array::from(
                rng.column(&FLOATS, n, nulls)
                    .into_iter()
                    .map(|x| x.map(|x| x as f32))
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "i32",
            Arc::new(Int32Array::from(rng.column(&[-3, 0, 1, 2, 5], n, nulls))),
        ),
        (
            "i64",
            Arc::new(Int64Array::from(rng.column(&[-3i64, 0, 2, i64::MAX], n, nulls))),
        ),
        (
            "u8",
            Arc::new(UInt8Array::from(rng.column(&[0u8, 1, 2, 255], n, nulls))),
        ),
        ("s", Arc::new(StringArray::from(strings.clone()))),
        ("ls", Arc::new(LargeStringArray::from(strings))),
        (
            "bin",
            Arc::new(BinaryArray::from(
                rng.column(&STRINGS, n, nulls)
                    .iter()
                    .map(|s| s.map(str::as_bytes))
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "fsb",
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    rng.column(&["aa", "ab", "zz"], n, nulls)
                        .into_iter()
                        .map(|s| s.map(str::as_bytes)),
                    2,
                )
                .expect("fixed size binary"),
            ),
        ),
        (
            "dec",
            Arc::new(
                Decimal128Array::from(rng.column(&[-150i128, 0, 5, 105, 700], n, nulls))
                    .with_precision_and_scale(10, 2)
                    .expect("decimal"),
            ),
        ),
        (
            "date",
            Arc::new(Date32Array::from(rng.column(&[-1, 0, 8766, 8767, 9000], n, nulls))),
        ),
        (
            "ts",
            Arc::new(TimestampMicrosecondArray::from(rng.column(
                &[-1i64, 0, 500_000, 1_000_000],
                n,
                nulls,
            ))),
        ),
        ("b", Arc::new(BooleanArray::from(rng.column(&[false, true], n, nulls)))),
        (
            "ds",
            Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(dictionary_values)).expect("dictionary")),
        ),
        (
            "df",
            Arc::new(
                DictionaryArray::<UInt8Type>::try_new(float_keys, Arc::new(float_dictionary)).expect("dictionary"),
            ),
        ),
    ];
    RecordBatch::try_from_iter(columns).expect("batch")
}

/// A literal of the column `c`'s domain, as a user writes it.
fn gen_literal(rng: &mut Rng, c: &str) -> Literal {
    let num = |s: &str| Literal::Number(s.to_string());
    let text = |s: &str| Literal::Str(s.to_string());
    match c {
        "f64" | "f32" | "df" => num(rng.pick(&FLOAT_LITERALS)),
        "i32" | "i64" => {
            num(rng.pick(&["-3", "0", "1", "2", "5", "9223372036854775807"][..if c == "i64" { 6 } else { 5 }]))
        }
        "u8" => num(rng.pick(&["0", "1", "2", "255"])),
        "s" | "ls" | "bin" | "ds" => text(rng.pick(&STRINGS)),
        "fsb" => text(rng.pick(&["aa", "ab", "zz", "b\u{0}"])),
        "dec" => num(rng.pick(&["-1.5", "0", "0.05", "1.05", "7"])),
        "date" => text(rng.pick(&["1969-12-31", "1970-01-01", "1994-01-01", "1994-01-02", "1994-08-22"])),
        "ts" => text(rng.pick(&[
            "1970-01-01T00:00:00",
            "1970-01-01T00:00:00.5",
            "1969-12-31T23:59:59.999999",
        ])),
        "b" => Literal::Bool(rng.chance(50)),
        other => panic!("no literal for {other}"),
    }
}

const COLUMNS: [&str; 15] = [
    "f64", "f32", "i32", "i64", "u8", "s", "ls", "bin", "fsb", "dec", "date", "ts", "b", "ds", "df",
];

/// A random filter of depth at most `depth`: every form the language has.
fn gen_expr(rng: &mut Rng, depth: u32) -> Expr {
    if depth > 0 && rng.chance(45) {
        let a = gen_expr(rng, depth - 1);
        return match rng.below(3) {
            0 => a.and(gen_expr(rng, depth - 1)),
            1 => a.or(gen_expr(rng, depth - 1)),
            _ => a.not(),
        };
    }
    let column = rng.pick(&COLUMNS).to_string();
    match rng.below(10) {
        0 => Expr::IsNull {
            column,
            negated: rng.chance(50),
        },
        1 | 2 => Expr::InList {
            values: (0..1 + rng.below(3)).map(|_| gen_literal(rng, &column)).collect(),
            negated: rng.chance(50),
            column,
        },
        3 => Expr::Between {
            low: gen_literal(rng, &column),
            high: gen_literal(rng, &column),
            column,
        },
        // A bare boolean column, as the parser makes it.
        4 => Expr::parse("b").expect("a bare boolean column"),
        _ => {
            let op = rng.pick(&[CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq]);
            Expr::Compare {
                value: gen_literal(rng, &column),
                column,
                op,
            }
        }
    }
}

/// `Predicate::evaluate`'s mask with unknown as false: the rows an exact filter keeps.
fn exact_mask(p: &Predicate, batch: &RecordBatch) -> BooleanArray {
    let m = p.evaluate(batch).expect("evaluate");
    if m.nulls().is_some() {
        arrow::compute::prep_null_mask_filter(&m)
    } else {
        m
    }
}

/// A random filter over a random batch, bound (or `None` where binding refuses a literal, e.g. a
/// fixed-size literal of the wrong length).
fn case(seed: u64, n: usize) -> Option<(RecordBatch, Expr, Predicate)> {
    let mut rng = Rng::new(seed);
    let batch = gen_batch(&mut rng, n);
    let e = gen_expr(&mut rng, 3);
    let p = e.bind(&batch.schema(), &Location::default()).ok()?;
    Some((batch, e, p))
}

/// The lowered filter through the references, both modes, equals the exact filter.
fn check_references(batch: &RecordBatch, e: &Expr, p: &Predicate) {
    let lowered = lower(p, &batch.schema()).unwrap_or_else(|why| panic!("{e}: {why}"));
    let want = exact_mask(p, batch);
    let (_, mask) = filter_record_batch(batch, &lowered, FilterMode::Mask).unwrap_or_else(|err| panic!("{e}: {err}"));
    assert_eq!(mask.expect("a mask"), want, "mask of {e} ({lowered:?})");
    let (rows, _) =
        filter_record_batch(batch, &lowered, FilterMode::Compact).unwrap_or_else(|err| panic!("{e}: {err}"));
    let rows = rows.expect("rows");
    let exact = p.filter(batch).expect("exact filter");
    assert_eq!(rows.num_rows(), exact.num_rows(), "{e}");
    for (k, (g, w)) in rows.columns().iter().zip(exact.columns()).enumerate() {
        assert_eq!(g.as_ref(), w.as_ref(), "column {k} of {e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn lowered_filters_select_what_evaluate_accepts(seed in any::<u64>(), n in 0usize..200) {
        if let Some((batch, e, p)) = case(seed, n) {
            check_references(&batch, &e, &p);
        }
    }
}

#[test]
fn floats_keep_ieee_semantics_through_the_lowering() {
    let mut rng = Rng::new(7);
    let batch = gen_batch(&mut rng, 300);
    let num = |s: &str| Literal::Number(s.to_string());
    let compare = |column: &str, op: CmpOp, literal: &str| Expr::Compare {
        column: column.to_string(),
        op,
        value: num(literal),
    };
    let ops = [CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq];
    for column in ["f64", "f32", "df"] {
        for literal in FLOAT_LITERALS {
            for op in ops {
                let e = compare(column, op, literal);
                let p = e.bind(&batch.schema(), &Location::default()).expect("bind");
                check_references(&batch, &e, &p);
            }
        }
        let e = Expr::InList {
            column: column.to_string(),
            values: vec![num("NaN"), num("-0"), num("1.5")],
            negated: true,
        };
        let p = e.bind(&batch.schema(), &Location::default()).expect("bind");
        check_references(&batch, &e, &p);
    }
    // NaN matches only `!=`; -0 equals 0.
    let schema = batch.schema();
    let count = |e: Expr| {
        let p = e.bind(&schema, &Location::default()).expect("bind");
        let (_, m) = filter_record_batch(&batch, &lower(&p, &schema).expect("lower"), FilterMode::Mask).expect("mask");
        m.expect("mask").true_count()
    };
    let f64s = batch
        .column_by_name("f64")
        .expect("f64")
        .as_primitive::<arrow::datatypes::Float64Type>()
        .clone();
    let valid = f64s.len() - f64s.null_count();
    let nan = f64s.iter().flatten().filter(|x| x.is_nan()).count();
    let zeros = f64s.iter().flatten().filter(|x| *x == 0.0).count();
    assert!(nan > 0 && zeros > 0);
    assert_eq!(count(compare("f64", CmpOp::Eq, "NaN")), 0);
    assert_eq!(count(compare("f64", CmpOp::NotEq, "NaN")), valid);
    assert_eq!(count(compare("f64", CmpOp::Eq, "-0")), zeros);
    assert_eq!(count(Expr::parse("f64 >= 0 or f64 < 0").expect("parse")), valid - nan);
}

#[test]
fn lowered_filters_run_in_the_kernel_emulation() {
    if let Err(why) = crate::decode::kernels::emu::available() {
        crate::test_skip(&why);
        return;
    }
    let mut done = 0;
    let mut seed = 1;
    while done < 12 {
        seed += 1;
        let Some((batch, e, p)) = case(seed, 120) else { continue };
        let lowered = lower(&p, &batch.schema()).unwrap_or_else(|why| panic!("{e}: {why}"));
        let data: Vec<ArrayData> = batch.columns().iter().map(|c| c.to_data()).collect();
        let names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
        let mut emu = crate::decode::row_filter::tests::EmuExecutor::default();
        let (_, mask) = filter_array_data_with(&mut emu, &data, &names, batch.num_rows(), &lowered, FilterMode::Mask)
            .unwrap_or_else(|err| panic!("{e}: {err}"));
        assert_eq!(mask.expect("mask"), exact_mask(&p, &batch), "emulated mask of {e}");
        done += 1;
    }
}

#[test]
fn leaves_the_gpu_cannot_run_say_why() {
    let schema = Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("t", DataType::Int32, true),
    ]);
    let p = Expr::parse("s = 'a' and t > 1")
        .unwrap()
        .bind(&schema, &Location::default())
        .unwrap();
    // The decoded batch lacks a column, or decoded it as another type than the literals'.
    let decoded = Schema::new(vec![Field::new("s", DataType::Utf8, true)]);
    let why = lower(&p, &decoded).unwrap_err();
    assert_eq!(why.column, "t");
    assert!(why.reason.contains("lacks"), "{why}");
    let decoded = Schema::new(vec![
        Field::new("s", DataType::Utf8View, true),
        Field::new("t", DataType::Int64, true),
    ]);
    let why = lower(&p, &decoded).unwrap_err();
    assert!(why.to_string().contains("column t: decoded as Int64"), "{why}");
    // Another layout of the same strings compares the same.
    let decoded = Schema::new(vec![
        Field::new(
            "s",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::LargeUtf8)),
            true,
        ),
        Field::new("t", DataType::Int32, true),
    ]);
    assert!(lower(&p, &decoded).is_ok());
    // A type with no row-filter leaf: nulls only.
    let nested = Schema::new(vec![Field::new(
        "l",
        DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
        true,
    )]);
    let is_null = Predicate::Leaf(crate::filter::Leaf {
        column: "l".into(),
        value_type: DataType::Int32,
        test: crate::filter::Test::IsNull,
    });
    assert!(lower(&is_null, &nested).is_ok());
    let cmp = Predicate::Leaf(crate::filter::Leaf {
        column: "l".into(),
        value_type: DataType::Int32,
        test: crate::filter::Test::Cmp(CmpOp::Eq, Arc::new(Int32Array::from(vec![1]))),
    });
    let why = lower(&cmp, &nested).unwrap_err();
    assert!(why.reason.contains("cannot compare"), "{why}");
}
