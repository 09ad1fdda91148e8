//! An [`Expr`] typed against a schema ([`Predicate`]) and evaluated over record batches.
//!
//! Binding pushes every `not` down to the leaves (`not (a < 1)` is `a >= 1`; `not (p and q)` is
//! `not p or not q`; `not (a in l)` is `a not in l`), which keeps SQL's three-valued logic (each pair
//! is unknown for the same rows) and leaves a tree of and / or over leaves only, which pruning needs:
//! "could some row match" does not negate.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Scalar, StringArray};
use arrow::compute::kernels::{boolean, cmp};
use arrow::compute::{CastOptions, cast, cast_with_options, filter_record_batch};
use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;

use super::{CmpOp, Expr, Literal};
use crate::error::{Error, Location, Result};

/// What a leaf tests of its column's value.
#[derive(Debug, Clone)]
pub enum Test {
    /// `column op value` (value: a one-element array of the column's value type).
    Cmp(CmpOp, ArrayRef),
    /// `column in (values)`: one-element arrays.
    In(Vec<ArrayRef>),
    /// `column not in (values)`: unknown where the column is null (SQL).
    NotIn(Vec<ArrayRef>),
    /// `column is null`
    IsNull,
    /// `column is not null`
    IsNotNull,
}

/// A test on one column.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The column's name (a top-level field of the schema).
    pub column: String,
    /// The column's value type (the dictionary's value type for a dictionary-typed column): the
    /// type of the literals.
    pub value_type: DataType,
    /// The test.
    pub test: Test,
}

/// A filter typed against a schema, with `not` pushed down to the leaves.
#[derive(Debug, Clone)]
pub enum Predicate {
    /// One test.
    Leaf(Leaf),
    /// All of them.
    And(Vec<Predicate>),
    /// Any of them.
    Or(Vec<Predicate>),
}

impl Expr {
    /// Types the literals against `schema` (a file's Arrow schema): a missing column, a column of a
    /// type filters do not support, or a literal that is not a value of the column's type is an
    /// [`Error::InvalidRequest`] naming the column and `location`'s file.
    pub fn bind(&self, schema: &Schema, location: &Location) -> Result<Predicate> {
        bind(self, false, schema, location)
    }
}

fn bind(e: &Expr, negate: bool, schema: &Schema, location: &Location) -> Result<Predicate> {
    let leaf = |column: &str, test: &dyn Fn(&DataType) -> Result<Test>| -> Result<Predicate> {
        let value_type = column_type(schema, column, location)?;
        Ok(Predicate::Leaf(Leaf {
            column: column.to_string(),
            test: test(&value_type)?,
            value_type,
        }))
    };
    let typed = |column: &str, t: &DataType, l: &Literal| literal_array(l, t, column, location);
    Ok(match e {
        Expr::Compare { column, op, value } => leaf(column, &|t| {
            let op = if negate { op.negate() } else { *op };
            Ok(Test::Cmp(op, typed(column, t, value)?))
        })?,
        Expr::InList {
            column,
            values,
            negated,
        } => leaf(column, &|t| {
            let values = values.iter().map(|v| typed(column, t, v)).collect::<Result<Vec<_>>>()?;
            Ok(if *negated != negate {
                Test::NotIn(values)
            } else {
                Test::In(values)
            })
        })?,
        Expr::IsNull { column, negated } => leaf(column, &|_| {
            Ok(if *negated != negate {
                Test::IsNotNull
            } else {
                Test::IsNull
            })
        })?,
        Expr::Between { column, low, high } => {
            let (lo_op, hi_op) = (CmpOp::GtEq, CmpOp::LtEq);
            let lo = leaf(column, &|t| Ok(Test::Cmp(lo_op, typed(column, t, low)?)))?;
            let hi = leaf(column, &|t| Ok(Test::Cmp(hi_op, typed(column, t, high)?)))?;
            if negate {
                // not (low <= c and c <= high): c < low or c > high.
                Predicate::Or(vec![negate_leaf(lo), negate_leaf(hi)])
            } else {
                Predicate::And(vec![lo, hi])
            }
        }
        Expr::And(a, b) | Expr::Or(a, b) => {
            let parts = vec![bind(a, negate, schema, location)?, bind(b, negate, schema, location)?];
            // De Morgan: a negated `and` is an `or` of the negations.
            if matches!(e, Expr::And(..)) != negate {
                Predicate::And(flatten(parts, true))
            } else {
                Predicate::Or(flatten(parts, false))
            }
        }
        Expr::Not(a) => bind(a, !negate, schema, location)?,
    })
}

fn negate_leaf(p: Predicate) -> Predicate {
    match p {
        Predicate::Leaf(Leaf {
            column,
            value_type,
            test: Test::Cmp(op, v),
        }) => Predicate::Leaf(Leaf {
            column,
            value_type,
            test: Test::Cmp(op.negate(), v),
        }),
        other => unreachable!("only comparisons are negated here: {other:?}"),
    }
}

/// Nested ands (ors) into one list.
fn flatten(parts: Vec<Predicate>, and: bool) -> Vec<Predicate> {
    let mut out = Vec::new();
    for p in parts {
        match p {
            Predicate::And(v) if and => out.extend(v),
            Predicate::Or(v) if !and => out.extend(v),
            other => out.push(other),
        }
    }
    out
}

/// The value type of a filterable column, or an error naming it.
fn column_type(schema: &Schema, column: &str, location: &Location) -> Result<DataType> {
    let here = || Location {
        column: Some(column.to_string()),
        ..location.clone()
    };
    let Ok(field) = schema.field_with_name(column) else {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        return Err(Error::InvalidRequest {
            location: here(),
            message: format!(
                "the filter names a column the file does not have (its top-level columns: {})",
                names.join(", ")
            ),
        });
    };
    let value_type = match field.data_type() {
        DataType::Dictionary(_, v) => v.as_ref().clone(),
        t => t.clone(),
    };
    if !filterable(&value_type) {
        return Err(Error::InvalidRequest {
            location: here(),
            message: format!(
                "filters compare numbers, strings, binaries, booleans, decimals, dates, times and timestamps; this column is {value_type}"
            ),
        });
    }
    Ok(value_type)
}

fn filterable(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Boolean
            | Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float32
            | Float64
            | Decimal32(..)
            | Decimal64(..)
            | Decimal128(..)
            | Decimal256(..)
            | Utf8
            | LargeUtf8
            | Utf8View
            | Binary
            | LargeBinary
            | BinaryView
            | FixedSizeBinary(_)
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(..)
    )
}

/// `literal` as a one-element array of `t`, or an error saying why it is not a value of that type.
fn literal_array(literal: &Literal, t: &DataType, column: &str, location: &Location) -> Result<ArrayRef> {
    use DataType::*;
    let wrong = |why: String| Error::InvalidRequest {
        location: Location {
            column: Some(column.to_string()),
            ..location.clone()
        },
        message: format!("the filter's literal {literal} is not a value of this column's type {t}: {why}"),
    };
    let is_numeric = t.is_numeric() && !matches!(t, Date32 | Date64);
    let is_text = matches!(
        t,
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | FixedSizeBinary(_)
    );
    let is_temporal = t.is_temporal();
    let text = match (literal, t) {
        (Literal::Bool(b), Boolean) => return Ok(Arc::new(BooleanArray::from(vec![*b]))),
        (Literal::Number(n), _) if is_numeric => {
            if let Decimal32(_, s) | Decimal64(_, s) | Decimal128(_, s) | Decimal256(_, s) = t {
                // A cast would round 0.055 to a decimal(15, 2); say so instead of matching other rows.
                let fraction = n
                    .split(['e', 'E'])
                    .next()
                    .and_then(|m| m.split_once('.'))
                    .map_or("", |(_, f)| f.trim_end_matches('0'));
                if n.contains(['e', 'E']) {
                    return Err(wrong("write a decimal without an exponent".into()));
                }
                if fraction.len() > (*s).max(0) as usize {
                    return Err(wrong(format!("it has more than {s} digits after the point")));
                }
            }
            n.clone()
        }
        (Literal::Str(s), _) if is_text || is_temporal => s.clone(),
        (Literal::Number(_), _) => return Err(wrong("a number compares only with a numeric column".into())),
        (Literal::Str(_), _) => {
            return Err(wrong(
                "a quoted literal compares only with a string, binary, date, time or timestamp column".into(),
            ));
        }
        (Literal::Bool(_), _) => return Err(wrong("true and false compare only with a boolean column".into())),
    };
    let strings: ArrayRef = Arc::new(StringArray::from(vec![text.as_str()]));
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let out = match t {
        FixedSizeBinary(width) => {
            if text.len() != *width as usize {
                return Err(wrong(format!(
                    "it is {} bytes long, the column's values {width}",
                    text.len()
                )));
            }
            let binary = cast(&strings, &Binary).map_err(|e| wrong(e.to_string()))?;
            cast_with_options(&binary, t, &options)
        }
        _ => cast_with_options(&strings, t, &options),
    }
    .map_err(|e| wrong(e.to_string()))?;
    if out.null_count() > 0 {
        return Err(wrong("it does not convert".into()));
    }
    // An integer literal out of the column's range would be an error from the cast above; a float's
    // literal that rounds to infinity is one too.
    if let Float32 | Float64 = t {
        let back = cast(&out, &Float64).map_err(|e| wrong(e.to_string()))?;
        let v = back
            .as_any()
            .downcast_ref::<arrow::array::Float64Array>()
            .map(|a| a.value(0));
        if v.is_some_and(|v| v.is_infinite()) && !text.to_ascii_lowercase().contains("inf") {
            return Err(wrong("it is out of the column's range".into()));
        }
    }
    Ok(out)
}

impl Predicate {
    /// The columns tested, sorted, once each.
    pub fn columns(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_leaf(&mut |l| out.push(l.column.clone()));
        out.sort();
        out.dedup();
        out
    }

    /// Calls `f` on every leaf, left to right.
    pub(crate) fn for_each_leaf(&self, f: &mut dyn FnMut(&Leaf)) {
        match self {
            Predicate::Leaf(l) => f(l),
            Predicate::And(v) | Predicate::Or(v) => v.iter().for_each(|p| p.for_each_leaf(f)),
        }
    }

    /// The leaves, left to right.
    pub(crate) fn leaves(&self) -> Vec<&Leaf> {
        match self {
            Predicate::Leaf(l) => vec![l],
            Predicate::And(v) | Predicate::Or(v) => v.iter().flat_map(|p| p.leaves()).collect(),
        }
    }

    /// The three-valued result per row of `batch` (which holds every column the predicate tests):
    /// true, false, or null for unknown.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let arrow_err = |e: arrow::error::ArrowError| Error::parquet(Location::default(), e);
        match self {
            Predicate::Leaf(leaf) => leaf.evaluate(batch),
            Predicate::And(parts) | Predicate::Or(parts) => {
                let mut acc: Option<BooleanArray> = None;
                for p in parts {
                    let r = p.evaluate(batch)?;
                    acc = Some(match acc {
                        None => r,
                        Some(a) if matches!(self, Predicate::And(_)) => {
                            boolean::and_kleene(&a, &r).map_err(arrow_err)?
                        }
                        Some(a) => boolean::or_kleene(&a, &r).map_err(arrow_err)?,
                    });
                }
                // An empty and is true, an empty or false; binding never makes either.
                Ok(
                    acc.unwrap_or_else(|| {
                        BooleanArray::from(vec![matches!(self, Predicate::And(_)); batch.num_rows()])
                    }),
                )
            }
        }
    }

    /// The rows of `batch` for which the predicate is true (unknown rows are dropped, as SQL's
    /// `where` and pyarrow's `filters=` drop them).
    pub fn filter(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mask = self.evaluate(batch)?;
        // One run of accepted rows (every row, none, or a sorted column's range) is a slice of the
        // batch: no copy.
        if let Some(run) = single_run(&mask) {
            return Ok(batch.slice(run.start, run.end - run.start));
        }
        filter_record_batch(batch, &mask).map_err(|e| Error::parquet(Location::default(), e))
    }
}

/// The rows `mask` accepts (true, not null) when they are one run (empty: `0..0`); `None` when
/// they are several.
pub(super) fn single_run(mask: &BooleanArray) -> Option<std::ops::Range<usize>> {
    let accepted = match mask.nulls() {
        Some(nulls) => mask.values() & nulls.inner(),
        None => mask.values().clone(),
    };
    let mut runs = accepted.set_slices();
    match (runs.next(), runs.next()) {
        (None, _) => Some(0..0),
        (Some((start, end)), None) => Some(start..end),
        _ => None,
    }
}

impl Leaf {
    /// The column's values in the literals' type (a dictionary-typed column's values unpacked).
    fn values(&self, batch: &RecordBatch) -> Result<ArrayRef> {
        let array = batch
            .column_by_name(&self.column)
            .ok_or_else(|| Error::InvalidRequest {
                location: Location {
                    column: Some(self.column.clone()),
                    ..Location::default()
                },
                message: "the batch to filter lacks this column".into(),
            })?;
        if array.data_type() == &self.value_type {
            return Ok(array.clone());
        }
        cast(array, &self.value_type).map_err(|e| Error::parquet(Location::default(), e))
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let arrow_err = |e: arrow::error::ArrowError| Error::parquet(Location::default(), e);
        let values = self.values(batch)?;
        let compare = |op: CmpOp, literal: &ArrayRef| compare(&values, op, literal);
        match &self.test {
            Test::Cmp(op, literal) => compare(*op, literal),
            Test::In(list) | Test::NotIn(list) => {
                let (op, and) = match self.test {
                    Test::In(_) => (CmpOp::Eq, false),
                    _ => (CmpOp::NotEq, true),
                };
                let mut acc: Option<BooleanArray> = None;
                for literal in list {
                    let r = compare(op, literal)?;
                    acc = Some(match acc {
                        None => r,
                        Some(a) if and => boolean::and_kleene(&a, &r).map_err(arrow_err)?,
                        Some(a) => boolean::or_kleene(&a, &r).map_err(arrow_err)?,
                    });
                }
                Ok(acc.expect("a list has at least one value"))
            }
            Test::IsNull => boolean::is_null(&values).map_err(arrow_err),
            Test::IsNotNull => boolean::is_not_null(&values).map_err(arrow_err),
        }
    }
}

/// `values op literal` per row, null where the value is null. Floats compare as IEEE 754 and
/// pyarrow do (NaN is unequal to everything and neither less nor greater; -0 equals 0), not by
/// arrow-rs's total order; every other type by arrow's comparison kernels.
pub(crate) fn compare(values: &ArrayRef, op: CmpOp, literal: &ArrayRef) -> Result<BooleanArray> {
    use arrow::array::{AsArray, Float64Array};
    let arrow_err = |e: arrow::error::ArrowError| Error::parquet(Location::default(), e);
    if let DataType::Float32 | DataType::Float64 = values.data_type() {
        let as_f64 = |a: &ArrayRef| -> Result<Float64Array> {
            Ok(cast(a, &DataType::Float64).map_err(arrow_err)?.as_primitive().clone())
        };
        let (values, literal) = (as_f64(values)?, as_f64(literal)?);
        let v = literal.value(0);
        let test: fn(f64, f64) -> bool = match op {
            CmpOp::Eq => |a, b| a == b,
            CmpOp::NotEq => |a, b| a != b,
            CmpOp::Lt => |a, b| a < b,
            CmpOp::LtEq => |a, b| a <= b,
            CmpOp::Gt => |a, b| a > b,
            CmpOp::GtEq => |a, b| a >= b,
        };
        return Ok(values.iter().map(|x| x.map(|x| test(x, v))).collect());
    }
    let scalar = Scalar::new(literal.clone());
    match op {
        CmpOp::Eq => cmp::eq(values, &scalar),
        CmpOp::NotEq => cmp::neq(values, &scalar),
        CmpOp::Lt => cmp::lt(values, &scalar),
        CmpOp::LtEq => cmp::lt_eq(values, &scalar),
        CmpOp::Gt => cmp::gt(values, &scalar),
        CmpOp::GtEq => cmp::gt_eq(values, &scalar),
    }
    .map_err(arrow_err)
}
