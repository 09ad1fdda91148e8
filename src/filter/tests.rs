//! Parsing, typing and exact evaluation.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float64Array, Int32Array,
    StringArray, TimestampMicrosecondArray, UInt32Array,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;

use super::*;
use crate::error::Location;

fn col(c: &str, op: CmpOp, v: Literal) -> Expr {
    Expr::Compare {
        column: c.into(),
        op,
        value: v,
    }
}

fn num(n: &str) -> Literal {
    Literal::Number(n.into())
}

#[test]
fn precedence_is_not_then_and_then_or() {
    let e = Expr::parse("a = 1 or b = 2 and not c = 3").unwrap();
    let want = col("a", CmpOp::Eq, num("1")).or(col("b", CmpOp::Eq, num("2")).and(col("c", CmpOp::Eq, num("3")).not()));
    assert_eq!(e, want);
    let e = Expr::parse("(a = 1 or b = 2) and c = 3").unwrap();
    let want = col("a", CmpOp::Eq, num("1"))
        .or(col("b", CmpOp::Eq, num("2")))
        .and(col("c", CmpOp::Eq, num("3")));
    assert_eq!(e, want);
    // and / or are left-associative.
    let e = Expr::parse("a=1 or b=2 or c=3").unwrap();
    assert_eq!(
        e,
        col("a", CmpOp::Eq, num("1"))
            .or(col("b", CmpOp::Eq, num("2")))
            .or(col("c", CmpOp::Eq, num("3")))
    );
}

#[test]
fn the_issue_example_parses() {
    let e = Expr::parse("l_shipdate >= '1994-01-01' and l_discount between 0.05 and 0.07 and l_quantity < 24").unwrap();
    let want = col("l_shipdate", CmpOp::GtEq, Literal::Str("1994-01-01".into()))
        .and(Expr::Between {
            column: "l_discount".into(),
            low: num("0.05"),
            high: num("0.07"),
        })
        .and(col("l_quantity", CmpOp::Lt, num("24")));
    assert_eq!(e, want);
    // Display reads back to the same expression.
    assert_eq!(Expr::parse(&e.to_string()).unwrap(), e);
}

#[test]
fn every_form_parses() {
    let cases = [
        ("x != 1", col("x", CmpOp::NotEq, num("1"))),
        ("x <> 1", col("x", CmpOp::NotEq, num("1"))),
        ("x == -1.5e3", col("x", CmpOp::Eq, num("-1.5e3"))),
        ("x<=1", col("x", CmpOp::LtEq, num("1"))),
        ("x>1", col("x", CmpOp::Gt, num("1"))),
        ("b = TRUE", col("b", CmpOp::Eq, Literal::Bool(true))),
        ("s = 'it''s'", col("s", CmpOp::Eq, Literal::Str("it's".into()))),
        (
            "d >= date '1994-01-01'",
            col("d", CmpOp::GtEq, Literal::Str("1994-01-01".into())),
        ),
        ("\"my col\" = 1", col("my col", CmpOp::Eq, num("1"))),
        ("`and` = 1", col("and", CmpOp::Eq, num("1"))),
        ("a.b = 1", col("a.b", CmpOp::Eq, num("1"))),
        (
            "x IS NOT NULL",
            Expr::IsNull {
                column: "x".into(),
                negated: true,
            },
        ),
        (
            "x is null",
            Expr::IsNull {
                column: "x".into(),
                negated: false,
            },
        ),
        (
            "x not in (1, 2)",
            Expr::InList {
                column: "x".into(),
                values: vec![num("1"), num("2")],
                negated: true,
            },
        ),
        (
            "x not between 1 and 2",
            Expr::Between {
                column: "x".into(),
                low: num("1"),
                high: num("2"),
            }
            .not(),
        ),
    ];
    for (text, want) in cases {
        let got = Expr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got, want, "{text}");
        assert_eq!(Expr::parse(&got.to_string()).unwrap(), got, "{text} → {got}");
    }
}

#[test]
fn syntax_errors_say_where() {
    let cases = [
        ("", 0, "expected a filter expression"),
        ("x =", 3, "expected a literal"),
        ("x = 1 and", 9, "expected a column name"),
        ("x = 1 y = 2", 6, "expected 'and', 'or' or the end"),
        ("(x = 1", 6, "expected ')'"),
        ("x in 1", 5, "expected '(' after 'in'"),
        ("x in (1 2)", 8, "expected ',' or ')'"),
        ("x = 'abc", 4, "unterminated"),
        ("x = null", 4, "use 'is null'"),
        ("x is 1", 5, "expected 'null'"),
        ("x between 1 or 2", 12, "expected 'and'"),
        ("x = 1.2.3", 4, "is not a number"),
        ("x ~ 1", 2, "unexpected character '~'"),
        ("= 1", 0, "expected a column name"),
        ("x 1", 2, "a comparison"),
        ("x not 1", 6, "'in' or 'between' after 'not'"),
    ];
    for (text, pos, what) in cases {
        let e = parse::parse(text).expect_err(text);
        assert_eq!(e.position, pos, "{text}: {e}");
        assert!(e.to_string().contains(what), "{text}: {e}");
        // Through the public entry point: a Config error naming the filter.
        let public = Expr::parse(text).unwrap_err().to_string();
        assert!(
            public.contains("filter") && public.contains(&format!("at position {pos}")),
            "{public}"
        );
    }
}

#[test]
fn dnf_is_an_or_of_ands() {
    let term = |c: &str, op: &str, v: Vec<Literal>| DnfTerm {
        column: c.into(),
        op: op.into(),
        values: v,
    };
    let e = Expr::from_dnf(&[
        vec![term("a", "==", vec![num("1")]), term("b", "<", vec![num("2")])],
        vec![term("c", "in", vec![num("3"), num("4")])],
    ])
    .unwrap();
    let want = col("a", CmpOp::Eq, num("1"))
        .and(col("b", CmpOp::Lt, num("2")))
        .or(Expr::InList {
            column: "c".into(),
            values: vec![num("3"), num("4")],
            negated: false,
        });
    assert_eq!(e, want);
    // `not in` keeps the nulls, as pyarrow's `~isin` does.
    let e = Expr::from_dnf(&[vec![term("c", "not in", vec![num("3")])]]).unwrap();
    assert_eq!(e.to_string(), "(c not in (3) or c is null)");
    for (bad, what) in [
        (vec![vec![term("a", "like", vec![num("1")])]], "unknown operator 'like'"),
        (vec![vec![term("a", "=", vec![num("1"), num("2")])]], "takes one value"),
        (vec![vec![term("a", "in", vec![])]], "non-empty list"),
        (vec![vec![]], "conjunction 0 is empty"),
        (vec![], "the filter list is empty"),
    ] {
        let e = Expr::from_dnf(&bad).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("u", DataType::UInt32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("d", DataType::Decimal128(15, 2), true),
        Field::new("s", DataType::Utf8, true),
        Field::new("day", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("b", DataType::Boolean, true),
        Field::new(
            "k",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new("l", DataType::new_list(DataType::Int32, true), true),
    ])
}

fn batch() -> RecordBatch {
    let dict: DictionaryArray<Int32Type> = vec![Some("x"), None, Some("y"), Some("x"), Some("z")]
        .into_iter()
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![Some(1), None, Some(3), Some(-4), Some(5)])),
        Arc::new(UInt32Array::from(vec![Some(1), Some(u32::MAX), None, Some(7), Some(0)])),
        Arc::new(Float64Array::from(vec![
            Some(0.5),
            Some(f64::NAN),
            Some(-0.0),
            None,
            Some(2.0),
        ])),
        Arc::new(
            Decimal128Array::from(vec![Some(5), Some(6), Some(7), None, Some(8)])
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from(vec![
            Some("apple"),
            Some("b"),
            None,
            Some("it's"),
            Some(""),
        ])),
        Arc::new(Date32Array::from(vec![
            Some(8766),
            Some(8765),
            None,
            Some(9000),
            Some(0),
        ])),
        Arc::new(TimestampMicrosecondArray::from(vec![
            Some(0),
            Some(1_000_000),
            None,
            Some(-1),
            Some(86_400_000_000),
        ])),
        Arc::new(BooleanArray::from(vec![
            Some(true),
            Some(false),
            None,
            Some(true),
            Some(false),
        ])),
        Arc::new(dict),
        arrow::array::new_null_array(&DataType::new_list(DataType::Int32, true), 5),
    ];
    RecordBatch::try_new(Arc::new(schema()), columns).unwrap()
}

/// The rows (0-based) a filter keeps.
fn rows(text: &str) -> Vec<usize> {
    let p = Expr::parse(text)
        .unwrap()
        .bind(&schema(), &Location::file("t.parquet"))
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let mask = p.evaluate(&batch()).unwrap();
    let kept = p.filter(&batch()).unwrap().num_rows();
    let out: Vec<usize> = (0..mask.len()).filter(|&i| mask.is_valid(i) && mask.value(i)).collect();
    assert_eq!(out.len(), kept);
    out
}

/// One run of accepted rows is found (then the filter slices the batch, no copy), across nulls in
/// the mask; several runs are not; and the filter's rows are arrow's `filter` either way.
#[test]
fn a_single_run_of_accepted_rows_is_a_slice() {
    let mask = |v: &[Option<bool>]| BooleanArray::from(v.to_vec());
    let (t, f, n) = (Some(true), Some(false), None);
    assert_eq!(super::bind::single_run(&mask(&[f, t, t, n, f])), Some(1..3));
    assert_eq!(super::bind::single_run(&mask(&[t, t, t])), Some(0..3));
    assert_eq!(super::bind::single_run(&mask(&[f, n, f])), Some(0..0));
    assert_eq!(super::bind::single_run(&mask(&[])), Some(0..0));
    assert_eq!(super::bind::single_run(&mask(&[t, n, t])), None);
    assert_eq!(super::bind::single_run(&mask(&[t, f, f, t])), None);
    for text in ["i > 0", "i >= -100", "i < -100", "f > 1.0 or s = 'a'", "i is null"] {
        let p = Expr::parse(text)
            .unwrap()
            .bind(&schema(), &Location::file("t.parquet"))
            .unwrap();
        let b = batch();
        let want = arrow::compute::filter_record_batch(&b, &p.evaluate(&b).unwrap()).unwrap();
        assert_eq!(p.filter(&b).unwrap(), want, "{text}");
    }
}

#[test]
fn null_semantics_are_sql() {
    // Null compares to unknown, and unknown rows are dropped, both ways round.
    assert_eq!(rows("i > 0"), vec![0, 2, 4]);
    assert_eq!(rows("not i > 0"), vec![3]);
    assert_eq!(rows("i != 3"), vec![0, 3, 4]);
    assert_eq!(rows("i in (1, 3)"), vec![0, 2]);
    assert_eq!(rows("i not in (1, 3)"), vec![3, 4]);
    assert_eq!(rows("not (i in (1, 3))"), vec![3, 4]);
    assert_eq!(rows("i is null"), vec![1]);
    assert_eq!(rows("i is not null"), vec![0, 2, 3, 4]);
    assert_eq!(rows("not i is null"), vec![0, 2, 3, 4]);
    // unknown or true is true; unknown and false is false.
    assert_eq!(rows("i > 0 or b"), vec![0, 2, 3, 4]);
    assert_eq!(rows("i > 0 or b = true"), vec![0, 2, 3, 4]);
    assert_eq!(rows("not (i > 0 and b = false)"), vec![0, 3]);
    assert_eq!(rows("i between -4 and 3"), vec![0, 2, 3]);
    assert_eq!(rows("i not between -4 and 3"), vec![4]);
}

#[test]
fn literals_take_the_columns_types() {
    assert_eq!(rows("u > 4000000000"), vec![1]);
    assert_eq!(rows("d between 0.05 and 0.07"), vec![0, 1, 2]);
    assert_eq!(rows("d = 0.060"), vec![1]);
    assert_eq!(rows("s = 'it''s'"), vec![3]);
    assert_eq!(rows("s < 'b'"), vec![0, 4]);
    assert_eq!(rows("day >= '1994-01-01'"), vec![0, 3]);
    assert_eq!(rows("ts >= '1970-01-01T00:00:01'"), vec![1, 4]);
    assert_eq!(rows("ts < '1970-01-01 00:00:00'"), vec![3]);
    assert_eq!(rows("b = false"), vec![1, 4]);
    assert_eq!(rows("k in ('x', 'z')"), vec![0, 3, 4]);
    assert_eq!(rows("k != 'x'"), vec![2, 4]);
}

#[test]
fn floats_compare_as_ieee() {
    // NaN equals nothing and orders with nothing; -0 equals 0 (pyarrow's semantics).
    assert_eq!(rows("f > 0"), vec![0, 4]);
    assert_eq!(rows("f < 100"), vec![0, 2, 4]);
    assert_eq!(rows("f = 0"), vec![2]);
    assert_eq!(rows("f != 2"), vec![0, 1, 2]);
    assert_eq!(rows("f >= -1e300"), vec![0, 2, 4]);
}

#[test]
fn typing_errors_name_the_column_and_the_file() {
    let cases = [
        ("missing = 1", "missing", "does not have"),
        ("i = 'one'", "i", "a quoted literal compares only"),
        ("i = 1.5", "i", "not a value of this column's type Int32"),
        ("i = 3000000000", "i", "Int32"),
        ("u < -1", "u", "UInt32"),
        ("s = 1", "s", "a number compares only with a numeric column"),
        ("d = 0.055", "d", "more than 2 digits after the point"),
        ("day = '1994-13-01'", "day", "Date32"),
        ("b = 1", "b", "a number compares only"),
        ("i = true", "i", "true and false compare only"),
        ("l is null", "l", "filters compare numbers"),
        ("f = 1e999", "f", "out of the column's range"),
    ];
    for (text, column, what) in cases {
        let e = Expr::parse(text)
            .unwrap()
            .bind(&schema(), &Location::file("t.parquet"))
            .expect_err(text);
        let m = e.to_string();
        assert!(matches!(e, crate::Error::InvalidRequest { .. }), "{text}: {m}");
        assert!(
            m.starts_with("t.parquet") && m.contains(&format!("column '{column}'")),
            "{text}: {m}"
        );
        assert!(m.contains(what), "{text}: {m}");
    }
}

#[test]
fn binding_pushes_not_to_the_leaves() {
    let p = Expr::parse("not (i < 1 or not (s = 'a' and b))")
        .unwrap()
        .bind(&schema(), &Location::file("t.parquet"))
        .unwrap();
    // not (A or not (B and C)) = not A and B and C: one flat and of three leaves.
    let Predicate::And(parts) = &p else { panic!("{p:?}") };
    assert_eq!(parts.len(), 3);
    let Predicate::Leaf(Leaf {
        test: Test::Cmp(op, _), ..
    }) = &parts[0]
    else {
        panic!("{p:?}")
    };
    assert_eq!(*op, CmpOp::GtEq);
    assert_eq!(p.columns(), vec!["b", "i", "s"]);
}

mod roundtrip {
    use proptest::prelude::*;

    use super::super::{CmpOp, Expr, Literal};

    fn column() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_][a-z0-9_.]{0,6}",
            Just("and".to_string()),
            Just("NULL".to_string()),
            Just("date".to_string()),
            Just("my \"odd\" col".to_string()),
            Just("1st".to_string()),
            Just(String::new()),
        ]
    }

    fn literal() -> impl Strategy<Value = Literal> {
        prop_oneof![
            any::<i64>().prop_map(|v| Literal::Number(v.to_string())),
            (any::<i32>(), 0u32..1000).prop_map(|(a, b)| Literal::Number(format!("{a}.{b:03}"))),
            any::<f64>()
                .prop_filter("finite", |v| v.is_finite())
                .prop_map(|v| Literal::Number(format!("{v:e}"))),
            ".{0,8}".prop_map(Literal::Str),
            any::<bool>().prop_map(Literal::Bool),
        ]
    }

    fn op() -> impl Strategy<Value = CmpOp> {
        prop_oneof![
            Just(CmpOp::Eq),
            Just(CmpOp::NotEq),
            Just(CmpOp::Lt),
            Just(CmpOp::LtEq),
            Just(CmpOp::Gt),
            Just(CmpOp::GtEq)
        ]
    }

    fn expr() -> impl Strategy<Value = Expr> {
        let leaf = prop_oneof![
            (column(), op(), literal()).prop_map(|(column, op, value)| Expr::Compare { column, op, value }),
            (column(), proptest::collection::vec(literal(), 1..4), any::<bool>()).prop_map(
                |(column, values, negated)| Expr::InList {
                    column,
                    values,
                    negated
                }
            ),
            (column(), any::<bool>()).prop_map(|(column, negated)| Expr::IsNull { column, negated }),
            (column(), literal(), literal()).prop_map(|(column, low, high)| Expr::Between { column, low, high }),
        ];
        leaf.prop_recursive(4, 16, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| a.and(b)),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| a.or(b)),
                inner.prop_map(Expr::not),
            ]
        })
    }

    proptest! {
        #[test]
        fn display_parses_back_to_the_same_expression(e in expr()) {
            let text = e.to_string();
            prop_assert_eq!(Expr::parse(&text).map_err(|err| err.to_string()), Ok(e), "{}", text);
        }
    }
}
