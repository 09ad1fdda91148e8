//! A [`Predicate`] lowered to the GPU row filter's [`RowPredicate`] over a decoded batch's columns.
//!
//! The lowering is exact: every leaf the binder makes has a row-filter leaf of the same three-valued
//! result (floats compared as IEEE 754, [`FloatOrder::Ieee`]; `not in` as `not (in)`, which is
//! the same `and` of `!=` under IEEE too, unknown on nulls). Where a leaf cannot run on the GPU (its
//! column's decoded type has no row-filter leaf, or differs from the type the literals were typed
//! to), [`lower`] says why, so the caller filters on the host instead.

use std::fmt;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{self as dt, DataType, Schema};

use super::{Leaf, Predicate, Test};
use crate::decode::row_filter::{FloatOrder, RowPredicate, Scalar, leaf_support};

/// Why a predicate does not run on the GPU row filter: the column and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLowered {
    /// The column of the leaf that cannot run there.
    pub column: String,
    /// Why.
    pub reason: String,
}

impl fmt::Display for NotLowered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.reason)
    }
}

/// `predicate` over the columns of a batch of `schema` (by name: each leaf's column is the field of
/// that name; a dictionary-typed field compares its values).
pub fn lower(predicate: &Predicate, schema: &Schema) -> Result<RowPredicate, NotLowered> {
    let parts = |v: &[Predicate], and: bool| -> Result<RowPredicate, NotLowered> {
        let mut acc: Option<RowPredicate> = None;
        for p in v {
            let r = lower(p, schema)?;
            acc = Some(match acc {
                None => r,
                Some(a) if and => a.and(r),
                Some(a) => a.or(r),
            });
        }
        acc.ok_or_else(|| NotLowered {
            column: String::new(),
            reason: "an empty and / or (the binder makes none)".into(),
        })
    };
    match predicate {
        Predicate::Leaf(leaf) => lower_leaf(leaf, schema),
        Predicate::And(v) => parts(v, true),
        Predicate::Or(v) => parts(v, false),
    }
}

fn lower_leaf(leaf: &Leaf, schema: &Schema) -> Result<RowPredicate, NotLowered> {
    let why = |reason: String| NotLowered {
        column: leaf.column.clone(),
        reason,
    };
    let column = schema
        .index_of(&leaf.column)
        .map_err(|_| why("the decoded batch lacks this column".into()))?;
    let decoded = schema.field(column).data_type();
    let values_type = match decoded {
        DataType::Dictionary(_, v) => v.as_ref(),
        t => t,
    };
    // The nulls of any type are tested on the GPU (a dictionary's through its values' leaf).
    let null_test = matches!(leaf.test, Test::IsNull | Test::IsNotNull);
    if !null_test || matches!(decoded, DataType::Dictionary(..)) {
        leaf_support(decoded).map_err(why)?;
    }
    if !null_test && !same_comparison(values_type, &leaf.value_type) {
        return Err(why(format!(
            "decoded as {decoded}, its literals typed as {}",
            leaf.value_type
        )));
    }
    let scalars = |list: &[ArrayRef]| {
        list.iter()
            .map(|a| scalar_of(a).map_err(why))
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(match &leaf.test {
        Test::Cmp(op, literal) => RowPredicate::Compare {
            column,
            op: *op,
            value: scalar_of(literal).map_err(why)?,
            floats: FloatOrder::Ieee,
        },
        Test::In(list) => RowPredicate::InList {
            column,
            values: scalars(list)?,
            floats: FloatOrder::Ieee,
        },
        // SQL's `not in`: unknown on nulls, else no literal equal; IEEE's `!=` is the negation of `=`.
        Test::NotIn(list) => RowPredicate::InList {
            column,
            values: scalars(list)?,
            floats: FloatOrder::Ieee,
        }
        .not(),
        Test::IsNull => RowPredicate::IsNull(column),
        Test::IsNotNull => RowPredicate::IsNotNull(column),
    })
}

/// Whether values of `decoded` compare as values of `typed` do: the same type, or byte strings of
/// the same kind in another layout (offsets of either width, views).
fn same_comparison(decoded: &DataType, typed: &DataType) -> bool {
    use DataType as D;
    let strings = |t: &DataType| matches!(t, D::Utf8 | D::LargeUtf8 | D::Utf8View);
    let binaries = |t: &DataType| matches!(t, D::Binary | D::LargeBinary | D::BinaryView);
    decoded == typed || (strings(decoded) && strings(typed)) || (binaries(decoded) && binaries(typed))
}

/// The first value of a literal array (as the binder makes them: one valid element) as a
/// [`Scalar`] of its type's physical layout.
fn scalar_of(a: &ArrayRef) -> Result<Scalar, String> {
    use DataType as D;
    if a.is_empty() || a.is_null(0) {
        return Err("a literal that is null".into());
    }
    let bytes = |b: &[u8]| Scalar::Bytes(b.to_vec());
    Ok(match a.data_type() {
        D::Boolean => Scalar::Boolean(a.as_boolean().value(0)),
        D::Int8 => Scalar::Int8(a.as_primitive::<dt::Int8Type>().value(0)),
        D::Int16 => Scalar::Int16(a.as_primitive::<dt::Int16Type>().value(0)),
        D::Int32 => Scalar::Int32(a.as_primitive::<dt::Int32Type>().value(0)),
        D::Int64 => Scalar::Int64(a.as_primitive::<dt::Int64Type>().value(0)),
        D::UInt8 => Scalar::UInt8(a.as_primitive::<dt::UInt8Type>().value(0)),
        D::UInt16 => Scalar::UInt16(a.as_primitive::<dt::UInt16Type>().value(0)),
        D::UInt32 => Scalar::UInt32(a.as_primitive::<dt::UInt32Type>().value(0)),
        D::UInt64 => Scalar::UInt64(a.as_primitive::<dt::UInt64Type>().value(0)),
        D::Float16 => Scalar::Float16(a.as_primitive::<dt::Float16Type>().value(0)),
        D::Float32 => Scalar::Float32(a.as_primitive::<dt::Float32Type>().value(0)),
        D::Float64 => Scalar::Float64(a.as_primitive::<dt::Float64Type>().value(0)),
        D::Decimal32(..) => Scalar::Int32(a.as_primitive::<dt::Decimal32Type>().value(0)),
        D::Decimal64(..) => Scalar::Int64(a.as_primitive::<dt::Decimal64Type>().value(0)),
        D::Decimal128(..) => Scalar::Int128(a.as_primitive::<dt::Decimal128Type>().value(0)),
        D::Decimal256(..) => Scalar::Int256(a.as_primitive::<dt::Decimal256Type>().value(0)),
        // Dates, times, timestamps and durations: their integers (the width leaf_support gives).
        t @ (D::Date32 | D::Time32(_)) => Scalar::Int32(integer_of(a, t)? as i32),
        t @ (D::Date64 | D::Time64(_) | D::Timestamp(..) | D::Duration(_)) => Scalar::Int64(integer_of(a, t)?),
        D::Utf8 => bytes(a.as_string::<i32>().value(0).as_bytes()),
        D::LargeUtf8 => bytes(a.as_string::<i64>().value(0).as_bytes()),
        D::Utf8View => bytes(a.as_string_view().value(0).as_bytes()),
        D::Binary => bytes(a.as_binary::<i32>().value(0)),
        D::LargeBinary => bytes(a.as_binary::<i64>().value(0)),
        D::BinaryView => bytes(a.as_binary_view().value(0)),
        D::FixedSizeBinary(_) => bytes(a.as_fixed_size_binary().value(0)),
        t => return Err(format!("no GPU literal for a value of type {t}")),
    })
}

/// A temporal literal's integer (its physical value, as the column stores it).
fn integer_of(a: &ArrayRef, t: &DataType) -> Result<i64, String> {
    let physical = match t.primitive_width() {
        Some(4) => DataType::Int32,
        _ => DataType::Int64,
    };
    let data = a.to_data().into_builder().data_type(physical.clone()).build();
    let ints = data.map_err(|e| format!("a {t} literal: {e}"))?;
    Ok(match physical {
        DataType::Int32 => arrow::array::Int32Array::from(ints).value(0) as i64,
        _ => arrow::array::Int64Array::from(ints).value(0),
    })
}

#[cfg(test)]
#[path = "lower_tests.rs"]
mod tests;
