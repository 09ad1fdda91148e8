//! The GPU decode pipeline for one step (a group of row groups), written once over an [`Executor`]:
//! page headers → validation and decompression plan (host) → decompression (nvCOMP batches by codec,
//! or host) → levels → dictionaries → values → string offsets and characters → bitmaps → conversions,
//! with the kernels' error flags read once per step. Nested columns (structs, lists, large lists, maps,
//! fixed-size lists) decode leaf by leaf over their level entries, then their Arrow structure is built
//! from the levels (repetition levels → slot scans → list offsets, validities, leaves packed to their
//! slots). Columns the kernels do not decode (list views, Arrow types needing more than a per-value
//! conversion, deprecated level encodings) are decoded by arrow-rs from the same fetched bytes and
//! uploaded, each with its reason.
//!
//! [`decode_step`] runs the phases one after another, as libcudf splits preprocess / decode /
//! chunking, each in its own file under `pipeline/`: `headers` (page headers), `checks` (host checks
//! and fallbacks), `decompress`, `descriptors` (columns' outputs, pages, dictionaries, repetition level
//! jobs), `launch` (the kernels in order) and `assemble` (bitmaps, layouts, nested structure,
//! host-routed columns, schema order). This file holds the routes (which column decodes where, as
//! what) and the nested columns' structure, which the phases share.

mod assemble;
mod checks;
mod cut;
mod decompress;
mod descriptors;
mod headers;
mod launch;

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, IntervalUnit, SchemaRef, TimeUnit};
use parquet::arrow::ProjectionMask;
use parquet::basic::{Compression, Type as PhysicalType};
use serde::Serialize;

use self::launch::{step_error, view_data_buffers, view_segment};
use crate::decode::exec::{Conversion, Executor, Kernel};
use crate::decode::host_headers::HostHeaders;
use crate::decode::host_kernels::nested::{LEVELS_FIRST_ZERO, LEVELS_V1_PREFIX, LevelJob};
use crate::decode::layout::{ColumnDesc, ErrorCode, PageDesc, PageInfo, physical, view_flags};
use crate::decode::table::{BITMAP_PADDING, DeviceArray, DeviceBatch};
use crate::error::{Error, Location, Result};
use crate::metadata::ParquetSource;
use crate::plan::{ChunkRange, ReadPlan};

pub use headers::PageHints;

/// How one top-level column is decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// By the GPU kernels.
    Gpu(GpuLeaf),
    /// A nested column by the GPU kernels: its leaves decoded as flat columns, its structure built
    /// from their definition levels.
    GpuNested(GpuNested),
    /// By arrow-rs on the host, uploaded; the reason.
    Host(String),
}

/// A flat leaf the kernels decode.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuLeaf {
    /// Leaf column index in the file schema.
    pub leaf: usize,
    /// Parquet physical type (the `physical` constants).
    pub physical: u32,
    /// Bytes per plain value (see [`PageDesc::type_len`]).
    pub type_len: u32,
    /// Maximum definition level (0 or 1 for a flat column).
    pub max_def: u32,
    /// Maximum repetition level (0 outside lists): a page's values are level entries, not rows.
    pub max_rep: u32,
    /// The Arrow type of the output (arrow-rs's).
    pub data_type: DataType,
    /// Conversion from the physical values to `data_type`'s layout.
    pub conversion: Option<Conversion>,
    /// The layout a BYTE_ARRAY column's strings end in.
    pub strings: StringOutput,
    /// What this leaf's output is of its column: the column itself, or a dictionary-typed column's keys
    /// or values.
    pub role: LeafRole,
}

/// A leaf's part of its column's output.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum LeafRole {
    /// The column's values.
    #[default]
    Column,
    /// A dictionary-typed column's keys (`data_type` is the key type): each row's dictionary index plus
    /// its chunk's first entry among the step's dictionaries, gathered from an identity dictionary; the
    /// values are decoded by the leaf given here, over the dictionary pages alone.
    DictionaryKeys(Box<GpuLeaf>),
    /// A dictionary-typed column's values: its chunks' dictionary pages, one after another, decoded as
    /// plain pages.
    DictionaryValues,
}

/// A nested column the kernels decode: structs (nullable or not), lists and maps, nested in one
/// another, over leaves the kernels decode as flat columns (over level entries where they repeat).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuNested {
    /// The leaves, in the column's leaf order; each is decoded like a flat column over the rows.
    pub leaves: Vec<GpuLeaf>,
    /// The Arrow structure over them.
    pub shape: NestedShape,
}

/// One level of a [`GpuNested`] column's Arrow structure.
#[derive(Debug, Clone, PartialEq)]
pub enum NestedShape {
    /// The array of leaf `i` of [`GpuNested::leaves`].
    Leaf(usize),
    /// A struct of `children` (its fields, in order).
    Struct {
        /// The Arrow type (arrow-rs's).
        data_type: DataType,
        /// A nullable struct's definition level: a row's struct is present where the row's level
        /// reaches it (arrow-rs's `struct_def_level`). `None` for a required struct (no validity).
        def_level: Option<u32>,
        /// The fields.
        children: Vec<NestedShape>,
    },
    /// A list (`List`, `LargeList`, or `Map`, a list of key-value structs) of `child`.
    List {
        /// The Arrow type (arrow-rs's).
        data_type: DataType,
        /// Whether a list can be null (its validity: the level reaches `item_def - 1`).
        nullable: bool,
        /// The list's repetition level: an entry whose level is below it starts a list.
        rep_level: u32,
        /// The level from which an entry is an item of the list (arrow-rs's list `def_level`).
        item_def: u32,
        /// The items.
        child: Box<NestedShape>,
    },
}

impl NestedShape {
    /// Whether some struct of this shape has a validity to build.
    fn has_nullable_struct(&self) -> bool {
        match self {
            NestedShape::Leaf(_) => false,
            NestedShape::Struct {
                def_level, children, ..
            } => def_level.is_some() || children.iter().any(NestedShape::has_nullable_struct),
            NestedShape::List { child, .. } => child.has_nullable_struct(),
        }
    }

    /// Whether the shape holds a list (so its leaves repeat).
    fn has_list(&self) -> bool {
        match self {
            NestedShape::Leaf(_) => false,
            NestedShape::Struct { children, .. } => children.iter().any(NestedShape::has_list),
            NestedShape::List { .. } => true,
        }
    }

    /// The first leaf under this node (its levels describe every ancestor's slots).
    fn first_leaf(&self) -> Option<usize> {
        match self {
            NestedShape::Leaf(i) => Some(*i),
            NestedShape::Struct { children, .. } => children.first().and_then(NestedShape::first_leaf),
            NestedShape::List { child, .. } => child.first_leaf(),
        }
    }

    /// Each leaf's slot space (the items of its innermost list; the rows, `(0, 0)`, outside lists),
    /// by leaf index, below a node in `space`.
    fn leaf_spaces(&self, space: (u32, u32), out: &mut BTreeMap<usize, (u32, u32)>) {
        match self {
            NestedShape::Leaf(i) => {
                out.insert(*i, space);
            }
            NestedShape::Struct { children, .. } => children.iter().for_each(|c| c.leaf_spaces(space, out)),
            NestedShape::List {
                rep_level,
                item_def,
                child,
                ..
            } => child.leaf_spaces((*rep_level, *item_def), out),
        }
    }
}

/// The Arrow layout the kernels' strings (offsets and characters) end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StringOutput {
    /// `Utf8` / `Binary`: the offsets and characters as they are.
    #[default]
    Offsets32,
    /// `LargeUtf8` / `LargeBinary`: 64-bit offsets, as the kernels write them for these columns (so
    /// a step's characters may pass 2 GiB).
    Offsets64,
    /// `Utf8View` / `BinaryView`: 16-byte views into the characters (none when every string is inline).
    Views,
    /// `Decimal128` (16) / `Decimal256` (32) from big-endian byte strings.
    Decimal(u32),
}

/// One top-level column of the projection and its route.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRoute {
    /// Field name.
    pub name: String,
    /// Its selected leaves.
    pub leaves: Vec<usize>,
    /// How it is decoded.
    pub route: Route,
}

/// The Arrow schema arrow-rs gives for `leaves` of `source`, and each top-level field's route.
pub(crate) fn route_columns(source: &ParquetSource, leaves: &[usize]) -> Result<(SchemaRef, Vec<ColumnRoute>)> {
    let location = source.location();
    let descr = source.metadata().file_metadata().schema_descr_ptr();
    let kv = source.metadata().file_metadata().key_value_metadata();
    let mask = || ProjectionMask::leaves(&descr, leaves.iter().copied());
    let schema = parquet::arrow::parquet_to_arrow_schema_by_columns(&descr, mask(), kv)
        .map_err(|e| Error::parquet(location.clone(), e))?;
    let natural = parquet::arrow::parquet_to_arrow_schema_by_columns(&descr, mask(), None)
        .map_err(|e| Error::parquet(location.clone(), e))?;
    let mut by_root: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &c in leaves {
        by_root.entry(descr.get_column_root_idx(c)).or_default().push(c);
    }
    if by_root.len() != schema.fields().len() {
        return Err(Error::parquet(
            location,
            format!(
                "{} top-level columns selected, arrow-rs's schema has {}",
                by_root.len(),
                schema.fields().len()
            ),
        ));
    }
    // arrow-rs's record batches carry the fields only, not the file's key-value metadata.
    let schema = arrow::datatypes::Schema::new(schema.fields().clone());
    let mut routes = Vec::with_capacity(by_root.len());
    for ((_, leaves), (field, natural_field)) in by_root.into_iter().zip(schema.fields().iter().zip(natural.fields())) {
        let route = route_one(&descr, &leaves, field.data_type(), natural_field.data_type());
        routes.push(ColumnRoute {
            name: field.name().clone(),
            leaves,
            route,
        });
    }
    Ok((Arc::new(schema), routes))
}

fn route_one(
    descr: &parquet::schema::types::SchemaDescriptor,
    leaves: &[usize],
    data_type: &DataType,
    natural: &DataType,
) -> Route {
    if let DataType::Dictionary(key, value) = data_type {
        return route_dictionary(descr, leaves, data_type, key, value, natural);
    }
    if matches!(
        data_type,
        DataType::Struct(_)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::Map(..)
            | DataType::FixedSizeList(..)
    ) {
        return match route_nested(descr, leaves, data_type, natural) {
            Ok(nested) => Route::GpuNested(nested),
            Err(why) => Route::Host(why),
        };
    }
    if matches!(data_type, DataType::ListView(_) | DataType::LargeListView(_)) {
        return Route::Host(UNSUPPORTED_LIST.into());
    }
    let [leaf] = leaves else {
        return Route::Host("a nested column (several leaves): decoded on the host".into());
    };
    let col = descr.column(*leaf);
    if col.path().parts().len() != 1 {
        return Route::Host("a nested column (struct): decoded on the host".into());
    }
    if col.max_rep_level() > 0 {
        return Route::Host("a repeated column (repetition levels): decoded on the host".into());
    }
    if col.max_def_level() > 1 {
        return Route::Host("nested definition levels: decoded on the host".into());
    }
    match route_leaf(*leaf, &col, data_type, natural) {
        Ok(leaf) => Route::Gpu(leaf),
        Err(why) => Route::Host(why),
    }
}

/// Why a nested column the kernels do not decode goes to the host.
const UNSUPPORTED_LIST: &str = "a list layout the kernels do not build (list views, odd schemas): decoded on the host";

/// A nested column's leaves and structure (structs, lists, maps), walked along the Parquet schema from
/// the column's root with the Arrow type arrow-rs gives (`data_type`, and `natural` without the file's
/// Arrow schema); `Err(why)` where the kernels cannot decode it.
fn route_nested(
    descr: &parquet::schema::types::SchemaDescriptor,
    leaves: &[usize],
    data_type: &DataType,
    natural: &DataType,
) -> std::result::Result<GpuNested, String> {
    let first = *leaves.first().ok_or("a nested column without leaves")?;
    let root = descr.get_column_root(first);
    let mut nested = GpuNested {
        leaves: Vec::new(),
        shape: NestedShape::Leaf(0),
    };
    let mut path = Vec::new();
    nested.shape = walk_nested(
        descr,
        leaves,
        root,
        (data_type, natural),
        (0, 0),
        false,
        &mut path,
        &mut nested.leaves,
    )?;
    if nested.leaves.len() != leaves.len() {
        return Err(format!(
            "{} of the column's {} leaves found in its Arrow type: decoded on the host",
            nested.leaves.len(),
            leaves.len()
        ));
    }
    Ok(nested)
}

/// One node of [`route_nested`]'s walk, after arrow-rs's schema conversion (`complex.rs`): the
/// (definition, repetition) levels above `node`, `path` the names down to its parent; `element` says
/// `node` is a repeated field standing for a list's element (its levels counted by the list).
#[allow(clippy::too_many_arguments)]
fn walk_nested(
    descr: &parquet::schema::types::SchemaDescriptor,
    leaves: &[usize],
    node: &parquet::schema::types::Type,
    (data_type, natural): (&DataType, &DataType),
    (def, rep): (u32, u32),
    element: bool,
    path: &mut Vec<String>,
    out: &mut Vec<GpuLeaf>,
) -> std::result::Result<NestedShape, String> {
    use parquet::basic::Repetition;
    let repetition_of = |t: &parquet::schema::types::Type| {
        let info = t.get_basic_info();
        if info.has_repetition() {
            info.repetition()
        } else {
            Repetition::REQUIRED
        }
    };
    let repetition = repetition_of(node);
    if repetition == Repetition::REPEATED && !element {
        // A repeated field outside a LIST: a required list of required items (arrow-rs's `into_list`).
        let (DataType::List(f), DataType::List(nf)) = (data_type, natural) else {
            return Err(UNSUPPORTED_LIST.into());
        };
        let child = walk_nested(
            descr,
            leaves,
            node,
            (f.data_type(), nf.data_type()),
            (def + 1, rep + 1),
            true,
            path,
            out,
        )?;
        return Ok(NestedShape::List {
            data_type: data_type.clone(),
            nullable: false,
            rep_level: rep + 1,
            item_def: def + 1,
            child: Box::new(child),
        });
    }
    let optional = repetition == Repetition::OPTIONAL;
    let def = def + u32::from(optional);
    path.push(node.name().to_string());
    let shape = if node.is_group() {
        match (data_type, natural) {
            (DataType::Struct(fields), DataType::Struct(natural_fields)) => {
                if fields.len() != natural_fields.len() {
                    return Err("the file's Arrow schema reshapes a struct: decoded on the host".into());
                }
                let mut children = Vec::with_capacity(fields.len());
                for (f, nf) in fields.iter().zip(natural_fields.iter()) {
                    let child = node.get_fields().iter().find(|c| c.name() == f.name()).ok_or_else(|| {
                        format!(
                            "struct field '{}' not in the Parquet schema: decoded on the host",
                            f.name()
                        )
                    })?;
                    children.push(walk_nested(
                        descr,
                        leaves,
                        child,
                        (f.data_type(), nf.data_type()),
                        (def, rep),
                        false,
                        path,
                        out,
                    )?);
                }
                NestedShape::Struct {
                    data_type: data_type.clone(),
                    def_level: optional.then_some(def),
                    children,
                }
            }
            (
                DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) | DataType::FixedSizeList(f, _),
                DataType::List(nf) | DataType::LargeList(nf) | DataType::Map(nf, _),
            ) if !element => {
                // A LIST or MAP group: one repeated child, the element itself (two-level lists, a
                // map's key-value group) or holding it (three-level lists), as arrow-rs decides.
                let [repeated] = node.get_fields() else {
                    return Err(UNSUPPORTED_LIST.into());
                };
                if repetition_of(repeated) != Repetition::REPEATED {
                    return Err(UNSUPPORTED_LIST.into());
                }
                // arrow-rs refuses a map read in part (its keys or values alone): so does the host route.
                if matches!(data_type, DataType::Map(..))
                    && (repeated.get_fields().len() != 2
                        || !matches!(f.data_type(), DataType::Struct(entries) if entries.len() == 2))
                {
                    return Err("a map projected in part: decoded on the host".into());
                }
                let is_list = |t: &parquet::schema::types::Type| {
                    t.is_group()
                        && (t.get_basic_info().logical_type_ref() == Some(&parquet::basic::LogicalType::List)
                            || t.get_basic_info().converted_type() == parquet::basic::ConvertedType::LIST)
                };
                let single_repeated_child = |t: &parquet::schema::types::Type| {
                    t.is_group() && matches!(t.get_fields(), [c] if repetition_of(c) == Repetition::REPEATED)
                };
                let two_level = matches!(data_type, DataType::Map(..))
                    || repeated.is_primitive()
                    || repeated.get_fields().len() != 1
                    || (!is_list(repeated)
                        && !single_repeated_child(repeated)
                        && (repeated.name() == "array" || repeated.name() == format!("{}_tuple", node.name())));
                let levels = (def + 1, rep + 1);
                let types = (f.data_type(), nf.data_type());
                let child = if two_level {
                    walk_nested(descr, leaves, repeated, types, levels, true, path, out)?
                } else {
                    path.push(repeated.name().to_string());
                    let item = walk_nested(
                        descr,
                        leaves,
                        &repeated.get_fields()[0],
                        types,
                        levels,
                        false,
                        path,
                        out,
                    )?;
                    path.pop();
                    item
                };
                if let DataType::FixedSizeList(_, size) = data_type {
                    // Null and empty lists become `size` null items (arrow-rs's padding): the kernels
                    // pad fixed-width items only.
                    let fixed_width = matches!(&child, NestedShape::Leaf(i)
                        if out[*i].data_type != DataType::Boolean && out[*i].data_type.primitive_width().is_some());
                    if !fixed_width || *size < 1 {
                        return Err(format!(
                            "a fixed-size list of {} (the kernels pad fixed-width items only): decoded on the host",
                            f.data_type()
                        ));
                    }
                }
                NestedShape::List {
                    data_type: data_type.clone(),
                    nullable: optional,
                    rep_level: rep + 1,
                    item_def: def + 1,
                    child: Box::new(child),
                }
            }
            _ => return Err(UNSUPPORTED_LIST.into()),
        }
    } else {
        let leaf = leaves
            .iter()
            .copied()
            .find(|&l| descr.column(l).path().parts() == path.as_slice())
            .ok_or_else(|| format!("leaf {} not selected: decoded on the host", path.join(".")))?;
        let col = descr.column(leaf);
        // Levels a byte can hold (gp_levels decodes widths up to 8).
        if col.max_rep_level() as u32 != rep || col.max_def_level() as u32 != def || def > 255 {
            return Err(UNSUPPORTED_LIST.into());
        }
        out.push(route_leaf(leaf, &col, data_type, natural)?);
        NestedShape::Leaf(out.len() - 1)
    };
    path.pop();
    Ok(shape)
}

/// A leaf column with no repetition (flat, or in structs): how the kernels decode it into
/// `data_type`, or why they cannot.
fn route_leaf(
    leaf: usize,
    col: &parquet::schema::types::ColumnDescriptor,
    data_type: &DataType,
    natural: &DataType,
) -> std::result::Result<GpuLeaf, String> {
    // The file's Arrow schema may ask for another layout of the same values (arrow-rs's `apply_hint`):
    // those below the kernels produce; any other goes to the host.
    let same_bits = data_type == natural
        || matches!((data_type, natural), (DataType::Timestamp(a, _), DataType::Timestamp(b, _)) if a == b)
        || matches!(
            (natural, data_type),
            (DataType::Utf8, DataType::LargeUtf8 | DataType::Utf8View)
                | (
                    DataType::Binary,
                    DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Utf8View
                        | DataType::LargeBinary
                        | DataType::BinaryView
                )
                | (
                    DataType::Decimal128(..),
                    DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal256(..)
                )
                // Units and types the Parquet logical types cannot name (arrow-rs's `apply_hint`).
                | (DataType::Int32 | DataType::Int64, DataType::Timestamp(..))
                | (DataType::Int32, DataType::Time32(_))
                | (DataType::Int64, DataType::Time64(_) | DataType::Duration(_) | DataType::Date64)
                | (DataType::Date32, DataType::Date64)
                | (DataType::Timestamp(TimeUnit::Nanosecond, None), DataType::Timestamp(..))
                | (DataType::Interval(_), DataType::Interval(_))
        );
    if !same_bits {
        return Err(format!(
            "the file's Arrow schema asks for {data_type} where the Parquet type gives {natural}: decoded on the host"
        ));
    }
    let pt = col.physical_type();
    let (physical, type_len) = match pt {
        PhysicalType::BOOLEAN => (physical::BOOLEAN, 1),
        PhysicalType::INT32 => (physical::INT32, 4),
        PhysicalType::INT64 => (physical::INT64, 8),
        PhysicalType::INT96 => (physical::INT96, 12),
        PhysicalType::FLOAT => (physical::FLOAT, 4),
        PhysicalType::DOUBLE => (physical::DOUBLE, 8),
        PhysicalType::BYTE_ARRAY => (physical::BYTE_ARRAY, 0),
        PhysicalType::FIXED_LEN_BYTE_ARRAY => (physical::FIXED_LEN_BYTE_ARRAY, col.type_length().max(0) as u32),
    };
    use DataType as D;
    let strings = match data_type {
        D::LargeUtf8 | D::LargeBinary => StringOutput::Offsets64,
        D::Utf8View | D::BinaryView => StringOutput::Views,
        D::Decimal128(..) if pt == PhysicalType::BYTE_ARRAY => StringOutput::Decimal(16),
        D::Decimal256(..) if pt == PhysicalType::BYTE_ARRAY => StringOutput::Decimal(32),
        _ => StringOutput::Offsets32,
    };
    let conversion = match (pt, data_type) {
        (PhysicalType::BOOLEAN, D::Boolean) => None,
        // Arrow's Null (Parquet's UNKNOWN logical type): the levels alone count its slots.
        (PhysicalType::INT32 | PhysicalType::INT64 | PhysicalType::FLOAT | PhysicalType::DOUBLE, D::Null) => None,
        (PhysicalType::INT32, D::Int32 | D::UInt32 | D::Date32 | D::Time32(_)) => None,
        (PhysicalType::INT32, D::Timestamp(..)) => Some(Conversion::I32ToI64),
        (PhysicalType::INT32, D::Date64) => Some(Conversion::DaysToMillis),
        (PhysicalType::INT32, D::Int8 | D::UInt8) => Some(Conversion::I32ToI8),
        (PhysicalType::INT32, D::Int16 | D::UInt16) => Some(Conversion::I32ToI16),
        (PhysicalType::INT32, D::Decimal32(..)) => None,
        (PhysicalType::INT32, D::Decimal64(..)) => Some(Conversion::I32ToI64),
        (PhysicalType::INT32, D::Decimal128(..)) => Some(Conversion::I32ToI128),
        (PhysicalType::INT32, D::Decimal256(..)) => Some(Conversion::I32ToI256),
        (PhysicalType::INT64, D::Int64 | D::UInt64 | D::Timestamp(..) | D::Time64(_) | D::Date64 | D::Duration(_)) => {
            None
        }
        (PhysicalType::INT64, D::Decimal64(..)) => None,
        (PhysicalType::INT64, D::Decimal128(..)) => Some(Conversion::I64ToI128),
        (PhysicalType::INT64, D::Decimal256(..)) => Some(Conversion::I64ToI256),
        (PhysicalType::INT96, D::Timestamp(unit, _)) => Some(match unit {
            TimeUnit::Second => Conversion::Int96ToSeconds,
            TimeUnit::Millisecond => Conversion::Int96ToMillis,
            TimeUnit::Microsecond => Conversion::Int96ToMicros,
            TimeUnit::Nanosecond => Conversion::Int96ToNanos,
        }),
        (PhysicalType::FLOAT, D::Float32) | (PhysicalType::DOUBLE, D::Float64) => None,
        (
            PhysicalType::BYTE_ARRAY,
            D::Utf8
            | D::Binary
            | D::LargeUtf8
            | D::LargeBinary
            | D::Utf8View
            | D::BinaryView
            | D::Decimal128(..)
            | D::Decimal256(..),
        ) => None,
        // Big-endian decimals of at most the destination's width (arrow-rs refuses wider ones).
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Decimal32(..)) if (1..=4).contains(&type_len) => {
            Some(Conversion::BigEndianToI32)
        }
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Decimal64(..)) if (1..=8).contains(&type_len) => {
            Some(Conversion::BigEndianToI64)
        }
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Decimal128(..)) if (1..=16).contains(&type_len) => {
            Some(Conversion::BigEndianToI128)
        }
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Decimal256(..)) if (1..=32).contains(&type_len) => {
            Some(Conversion::BigEndianToI256)
        }
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::FixedSizeBinary(n)) if *n as u32 == type_len && type_len > 0 => None,
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Float16) if type_len == 2 => None,
        // arrow-rs reads no MonthDayNano interval from Parquet (an error there, the host route here).
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Interval(IntervalUnit::YearMonth)) if type_len == 12 => {
            Some(Conversion::IntervalToYearMonth)
        }
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Interval(IntervalUnit::DayTime)) if type_len == 12 => {
            Some(Conversion::IntervalToDayTime)
        }
        _ => {
            return Err(format!("{data_type} from Parquet {pt}: decoded on the host"));
        }
    };
    Ok(GpuLeaf {
        leaf,
        physical,
        type_len,
        max_def: col.max_def_level() as u32,
        max_rep: col.max_rep_level() as u32,
        data_type: data_type.clone(),
        conversion,
        strings,
        role: LeafRole::Column,
    })
}

/// A column the file's Arrow schema asks to keep dictionary-encoded (`Dictionary(key, value)`, as
/// pandas categoricals are written): keys and values both on the GPU where the values are a type the
/// kernels decode and the key type is an integer.
fn route_dictionary(
    descr: &parquet::schema::types::SchemaDescriptor,
    leaves: &[usize],
    data_type: &DataType,
    key: &DataType,
    value: &DataType,
    natural: &DataType,
) -> Route {
    use DataType as D;
    let conversion = match key {
        D::Int8 | D::UInt8 => Some(Conversion::I32ToI8),
        D::Int16 | D::UInt16 => Some(Conversion::I32ToI16),
        D::Int32 | D::UInt32 => None,
        D::Int64 | D::UInt64 => Some(Conversion::I32ToI64),
        _ => {
            return Route::Host(format!(
                "{data_type}: a dictionary of non-integer keys, decoded on the host"
            ));
        }
    };
    let values = match route_one(descr, leaves, value, natural) {
        Route::Gpu(v) if v.physical != physical::BOOLEAN && v.role == LeafRole::Column => v,
        Route::Gpu(_) | Route::GpuNested(_) => return Route::Host(format!("{data_type}: decoded on the host")),
        Route::Host(why) => return Route::Host(format!("{data_type}, its values: {why}")),
    };
    Route::Gpu(GpuLeaf {
        leaf: values.leaf,
        physical: physical::INT32,
        type_len: 4,
        max_def: values.max_def,
        max_rep: values.max_rep,
        data_type: key.clone(),
        conversion,
        strings: StringOutput::Offsets32,
        role: LeafRole::DictionaryKeys(Box::new(GpuLeaf {
            role: LeafRole::DictionaryValues,
            max_def: 0,
            max_rep: 0,
            ..values
        })),
    })
}

/// The most dictionary entries a key type holds (an identity dictionary of `i32`s gives the keys).
fn key_capacity(key: &DataType) -> u64 {
    match key {
        DataType::Int8 => i8::MAX as u64,
        DataType::UInt8 => u8::MAX as u64,
        DataType::Int16 => i16::MAX as u64,
        DataType::UInt16 => u16::MAX as u64,
        _ => i32::MAX as u64,
    }
}

/// Per-column figures of one step, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ColumnStepStats {
    /// Field name.
    pub name: String,
    /// Pages (dictionary pages included).
    pub pages: usize,
    /// Codec(s) of the column's chunks.
    pub codec: String,
    /// Page bytes as stored (bodies, headers excluded).
    pub compressed_bytes: u64,
    /// Page bytes after decompression.
    pub uncompressed_bytes: u64,
    /// Where decompression ran ("gpu (nvCOMP)"; for Snappy "gpu (gp_unsnap)", or the decoders that took
    /// bodies joined, such as "gpu (gp_snappy_literals + gp_wsnap + nvCOMP)"; "host (`<why>`)"; "none"
    /// for uncompressed chunks).
    pub decompressed_on: String,
    /// Where decoding ran ("gpu", or "host (`<why>`)").
    pub decoded_on: String,
}

/// Timings and figures of one step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepStats {
    /// Per top-level column.
    pub columns: Vec<ColumnStepStats>,
    /// Whether the page headers came parsed from the host ([`HostHeaders`]), not from the GPU.
    pub headers_on_host: bool,
    /// Time in page-header parsing and planning.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub headers_time: Duration,
    /// Time in decompression.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub decompress_time: Duration,
    /// The most device memory one decompression batch held beside the step's own buffers (nvCOMP's
    /// aligned copies of its inputs and its temporary memory), counted in the step's peak.
    pub decompress_scratch_bytes: u64,
    /// Time in the decode kernels (and host decode of host-routed columns).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub decode_time: Duration,
}

impl StepStats {
    /// A step's figures with those of its second pass (a two-pass read's other columns, decoded
    /// after the filter's): their columns after these, their times added.
    pub(crate) fn add_pass(&mut self, other: StepStats) {
        self.columns.extend(other.columns);
        self.headers_time += other.headers_time;
        self.decompress_time += other.decompress_time;
        self.decompress_scratch_bytes = self.decompress_scratch_bytes.max(other.decompress_scratch_bytes);
        self.decode_time += other.decode_time;
    }
}

/// Where a page came from, for errors.
#[derive(Debug, Clone)]
struct PageOrigin {
    column: usize,
    row_group: usize,
    /// Index within its chunk (dictionary page included).
    page: usize,
}

/// One GPU column chunk after header parsing.
#[derive(Debug)]
struct ChunkPages {
    /// Index into the step's GPU columns.
    column: usize,
    row_group: usize,
    /// Rows its data pages hold: its row group's, or those of the pages fetched of a chunk read
    /// page by page.
    rows: u64,
    /// Which rows of its row group those are (0 = the row group's first), in order.
    held: Vec<Range<u64>>,
    codec: Compression,
    /// Address of the chunk's first fetched byte.
    start: u64,
    /// What was fetched of it: the whole chunk, or its pieces in file order (a page-level read), each
    /// at its offset from `start` (pieces lie in the fetched buffer in file order).
    pieces: Vec<(u64, ChunkRange)>,
    /// Its pages, every piece's in order, offsets from `start`.
    infos: Vec<PageInfo>,
}

/// Decodes row groups `row_groups` of the projection `routes` (from [`route_columns`]) out of the
/// chunks that `plan` laid out at `chunk_base` in `exec`'s memory. `host_threads` is for the columns
/// decoded by arrow-rs; `hints` say how many pages to expect per chunk byte, and learn from the step.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_step<E: crate::decode::row_filter::FilterExecutor>(
    exec: &mut E,
    source: &ParquetSource,
    schema: &SchemaRef,
    routes: &[ColumnRoute],
    plan: &ReadPlan,
    row_groups: &[usize],
    chunk_base: u64,
    host_threads: usize,
    hints: &PageHints,
    host_headers: Option<&HostHeaders>,
) -> Result<(DeviceBatch<E::Buffer>, StepStats)> {
    let input = StepInput::new(source, schema, routes, plan, row_groups, chunk_base)?;
    let mut stats = StepStats::default();
    let started = Instant::now();
    let mut step = gpu_columns(&input)?;
    let columns_time = started.elapsed();
    stats.headers_on_host = headers::read_page_headers(exec, &input, &mut step, hints, host_headers)?;
    let pages_time = started.elapsed();
    let checked = checks::check_columns(&input, &mut step)?;
    stats.headers_time = started.elapsed();
    if crate::trace::enabled() {
        // Where a step's first phase goes (`GPU_PARQUET_TRACE_FETCH`).
        use crate::trace::ms;
        eprintln!(
            "trace step's headers: columns {:.2} ms, pages {:.2} ms ({}), checks {:.2} ms",
            ms(columns_time),
            ms(pages_time - columns_time),
            if stats.headers_on_host { "host" } else { "GPU" },
            ms(stats.headers_time - pages_time)
        );
    }

    let t_dec = Instant::now();
    let decompressed = decompress::decompress_bodies(exec, &input, &step, &checked.keep)?;
    if decompress::chunks_read_no_more(&input, &step, &decompressed) {
        exec.release_chunks(chunk_base);
    }
    stats.decompress_time = t_dec.elapsed();
    stats.decompress_scratch_bytes = exec.decompressor_scratch();

    let t_decode = Instant::now();
    let mut descriptors = descriptors::describe(exec, &input, &step, &checked, &decompressed.bodies)?;
    let described = t_decode.elapsed();
    let levels = launch::run_kernels(exec, &input, &step, &mut descriptors, &decompressed)?;
    let kernels = t_decode.elapsed();
    let mut arrays = assemble::gpu_arrays(exec, &input, &step, descriptors, levels)?;
    let assembled = t_decode.elapsed();
    cut::gpu_to_rows(exec, &input, &step, &mut arrays)?;
    assemble::host_arrays(exec, &input, &step, host_threads, &mut arrays)?;
    stats.decode_time = t_decode.elapsed();
    if crate::trace::enabled() {
        // Where a step's last phase goes: the page kernels (with their read-backs) or the layouts.
        use crate::trace::ms;
        eprintln!(
            "trace step's kernels: descriptors {:.2} ms, page kernels {:.2} ms, arrays {:.2} ms, \
             rows and host columns {:.2} ms",
            ms(described),
            ms(kernels - described),
            ms(assembled - kernels),
            ms(stats.decode_time - assembled)
        );
    }

    let columns = assemble::columns_in_order(&input, &step, &decompressed.on, arrays, &mut stats)?;
    Ok((
        DeviceBatch {
            schema: schema.clone(),
            num_rows: input.num_rows as usize,
            columns,
            row_groups: row_groups.to_vec(),
            location: input.location,
        },
        stats,
    ))
}

/// What every phase of a step reads: the file, the projection, the plan, and where its chunks are.
struct StepInput<'a> {
    source: &'a ParquetSource,
    schema: &'a SchemaRef,
    routes: &'a [ColumnRoute],
    plan: &'a ReadPlan,
    row_groups: &'a [usize],
    /// Address of the plan's first byte in the executor's memory.
    chunk_base: u64,
    location: Location,
    /// What the plan fetches of each chunk `(row group, leaf)`: the whole chunk, or its pieces in
    /// file order.
    chunk_of: BTreeMap<(usize, usize), Vec<&'a ChunkRange>>,
    /// Rows of each of `row_groups`.
    rows_of: Vec<u64>,
    /// Of each of `row_groups`, the rows the step yields where the plan reads it page by page
    /// ([`ReadPlan::rows`]); `None`: all its rows.
    kept_of: Vec<Option<&'a [Range<u64>]>>,
    /// Rows of the row groups (what a column of whole chunks decodes to).
    full_rows: u64,
    /// Rows the step yields.
    num_rows: u64,
}

impl<'a> StepInput<'a> {
    fn new(
        source: &'a ParquetSource,
        schema: &'a SchemaRef,
        routes: &'a [ColumnRoute],
        plan: &'a ReadPlan,
        row_groups: &'a [usize],
        chunk_base: u64,
    ) -> Result<Self> {
        let location = source.location();
        let meta = source.metadata();
        let mut chunk_of: BTreeMap<(usize, usize), Vec<&ChunkRange>> = BTreeMap::new();
        let mut in_order: Vec<&ChunkRange> = plan.chunks.iter().collect();
        in_order.sort_by_key(|c| c.offset);
        for c in in_order {
            chunk_of.entry((c.row_group, c.column)).or_default().push(c);
        }
        let mut rows_of = Vec::with_capacity(row_groups.len());
        let mut kept_of = Vec::with_capacity(row_groups.len());
        let mut num_rows = 0u64;
        for &g in row_groups {
            let at = Location {
                row_group: Some(g),
                ..location.clone()
            };
            let n = meta.row_group(g).num_rows();
            let n =
                u64::try_from(n).map_err(|_| Error::invalid_metadata(at.clone(), format!("negative row count {n}")))?;
            let kept = plan.rows.get(&g).map(Vec::as_slice);
            if let Some(k) = kept {
                let ordered = k.iter().zip(k.iter().skip(1)).all(|(a, b)| a.end < b.start);
                if !ordered || k.iter().any(|r| r.start >= r.end || r.end > n) {
                    return Err(Error::InvalidRequest {
                        location: at,
                        message: format!(
                            "the plan's rows ({k:?}) are not sorted, disjoint, non-empty ranges within the row group's {n}"
                        ),
                    });
                }
            }
            num_rows += kept.map_or(n, |k| k.iter().map(|r| r.end - r.start).sum());
            rows_of.push(n);
            kept_of.push(kept);
        }
        let full_rows: u64 = rows_of.iter().sum();
        Ok(Self {
            source,
            schema,
            routes,
            plan,
            row_groups,
            chunk_base,
            location,
            chunk_of,
            rows_of,
            kept_of,
            full_rows,
            num_rows,
        })
    }

    /// Whether some row group of the step yields fewer rows than it holds, so that every column is
    /// cut to the plan's rows after its decode.
    fn is_cut(&self) -> bool {
        self.kept_of.iter().any(Option::is_some)
    }
}

/// The step's GPU columns and their chunks, filled in phase by phase.
struct StepColumns {
    /// GPU columns (leaves), in route order, each with its route's index.
    gpu: Vec<(usize, GpuLeaf)>,
    /// Routes that fell back to the host, and why.
    fallback: BTreeMap<usize, String>,
    /// The GPU columns' chunks, column by column, row group by row group; their pages once parsed.
    chunks: Vec<ChunkPages>,
}

/// The step's GPU columns, in route order, and their chunks, row group by row group.
fn gpu_columns(input: &StepInput<'_>) -> Result<StepColumns> {
    let source = input.source;
    let meta = source.metadata();
    let mut gpu: Vec<(usize, GpuLeaf)> = input
        .routes
        .iter()
        .enumerate()
        .flat_map(|(i, r)| match &r.route {
            // A dictionary-typed column's keys, then its values (adjacent: pages stay sorted by column).
            Route::Gpu(l) => match &l.role {
                LeafRole::DictionaryKeys(values) => vec![(i, l.clone()), (i, values.as_ref().clone())],
                _ => vec![(i, l.clone())],
            },
            Route::GpuNested(n) => n.leaves.iter().map(|l| (i, l.clone())).collect(),
            Route::Host(_) => Vec::new(),
        })
        .collect();
    let mut fallback: BTreeMap<usize, String> = BTreeMap::new();
    if input.full_rows > u32::MAX as u64 && !gpu.is_empty() {
        for (i, _) in gpu.drain(..) {
            fallback.insert(i, "more than 2^32 rows in one step: decoded on the host".into());
        }
    }
    if input.is_cut() {
        // Columns the GPU cannot cut to the plan's rows after their decode go to arrow-rs, which
        // reads them with the rows selected.
        for (i, r) in input.routes.iter().enumerate() {
            if let Some(why) = cut::cannot_cut(input, i, r) {
                fallback.insert(i, why);
            }
        }
        gpu.retain(|(i, _)| !fallback.contains_key(i));
    }

    let mut chunks: Vec<ChunkPages> = Vec::new();
    for (gi, (_, leaf)) in gpu.iter().enumerate() {
        for (slot, &g) in input.row_groups.iter().enumerate() {
            // Made only for an error: a step has a thousand chunks, each a column path to join.
            let at = || Location::chunk(&input.location.file, source.column_path(leaf.leaf), g);
            let pieces = input
                .chunk_of
                .get(&(g, leaf.leaf))
                .filter(|p| !p.is_empty())
                .ok_or_else(|| Error::InvalidRequest {
                    location: at(),
                    message: "the plan does not fetch this column chunk".into(),
                })?;
            let first = pieces[0];
            let held = held_rows(pieces, input.rows_of[slot]).map_err(|message| Error::InvalidRequest {
                location: at(),
                message,
            })?;
            let whole = held.len() == 1 && held[0] == (0..input.rows_of[slot]);
            if input.kept_of[slot].is_none() && !whole {
                return Err(Error::InvalidRequest {
                    location: at(),
                    message: "the plan reads this chunk page by page but gives no rows of its row group".into(),
                });
            }
            let mut placed = Vec::with_capacity(pieces.len());
            for &p in pieces {
                // Pieces lie in the fetched buffer in file order (the plan lays spans out so).
                let off = p
                    .dest_offset
                    .checked_sub(first.dest_offset)
                    .ok_or_else(|| Error::InvalidRequest {
                        location: at(),
                        message: "the plan lays this chunk's pieces out of file order".into(),
                    })?;
                placed.push((off, p.clone()));
            }
            chunks.push(ChunkPages {
                column: gi,
                row_group: g,
                rows: held.iter().map(|r| r.end - r.start).sum(),
                held,
                codec: meta.row_group(g).column(leaf.leaf).compression(),
                start: input.chunk_base + first.dest_offset,
                pieces: placed,
                infos: Vec::new(),
            });
        }
    }
    Ok(StepColumns { gpu, fallback, chunks })
}

/// The rows of its row group (of `num_rows`) that a chunk fetched as `pieces` holds, in order: all of
/// them for a whole chunk, else its pieces' pages' rows. `Err` where the pieces are not one chunk's,
/// in order, or mix a whole chunk with pieces.
fn held_rows(pieces: &[&ChunkRange], num_rows: u64) -> std::result::Result<Vec<Range<u64>>, String> {
    if let [one] = pieces
        && one.pages.is_none()
    {
        return Ok(std::iter::once(0..num_rows).collect());
    }
    let mut held: Vec<Range<u64>> = Vec::new();
    for p in pieces {
        let run = p
            .pages
            .as_ref()
            .ok_or("the plan fetches this column chunk whole and in pieces")?;
        if run.pages.is_empty() {
            continue;
        }
        match held.last_mut() {
            Some(last) if last.end == run.rows.start => last.end = run.rows.end,
            Some(last) if last.end > run.rows.start => {
                return Err(format!(
                    "the plan's pieces of this chunk hold rows {:?} after {last:?}",
                    run.rows
                ));
            }
            _ => held.push(run.rows.clone()),
        }
    }
    if held.last().is_some_and(|r| r.end > num_rows) {
        return Err(format!(
            "the plan's pieces of this chunk hold rows past the row group's {num_rows}"
        ));
    }
    Ok(held)
}

/// A Null-typed leaf's array: no buffers, no validity (arrow-rs's NullArray) over its slots; the values
/// decoded and the validity packed are dropped.
fn null_array<E: Executor>(exec: &mut E, c: &ColumnDesc, validity: u64) -> DeviceArray<E::Buffer> {
    if validity != 0 {
        exec.free(validity);
    }
    exec.free(c.out_values);
    DeviceArray {
        data_type: DataType::Null,
        len: c.num_rows as usize,
        null_count: 0,
        validity: None,
        buffers: Vec::new(),
        children: Vec::new(),
    }
}

/// The level arrays (a byte an entry) of a step's nested GPU columns.
#[derive(Debug, Default)]
struct NestedLevels {
    /// Struct-only columns (by route): one leaf's definition levels, for their structs' validities
    /// (every leaf of a struct holds the same levels at the struct's depth, as arrow-rs reads them from
    /// its first child).
    by_route: BTreeMap<usize, u64>,
    /// Columns with lists: every leaf's definition levels, by GPU column.
    def: BTreeMap<usize, u64>,
    /// Every repeated leaf's repetition levels, by GPU column.
    rep: BTreeMap<usize, u64>,
    /// Level entries of each leaf of the columns with lists, by GPU column.
    entries: BTreeMap<usize, u64>,
}

/// Where the nested GPU columns' definition levels are kept, a byte a level entry (`gp_levels` writes
/// them at each column's `out_def`, set here before the descriptors go up): every leaf under a list
/// (for its offsets and validity), and one leaf of each column of nullable structs without lists.
fn keep_nested_levels<E: Executor>(
    exec: &mut E,
    routes: &[ColumnRoute],
    gpu: &[(usize, GpuLeaf)],
    kept: &[usize],
    cols: &mut [ColumnDesc],
) -> Result<NestedLevels> {
    let mut levels = NestedLevels::default();
    for (k, &gi) in kept.iter().enumerate() {
        let route = gpu[gi].0;
        let Route::GpuNested(nested) = &routes[route].route else {
            continue;
        };
        let entries = cols[k].num_rows as usize;
        if nested.shape.has_list() {
            levels.entries.insert(gi, entries as u64);
            if gpu[gi].1.max_def > 0 {
                // Zeroed: a page in error leaves its entries unwritten (the step fails on its error).
                cols[k].out_def = exec.alloc(entries.max(1))?;
                levels.def.insert(gi, cols[k].out_def);
            }
            continue;
        }
        if levels.by_route.contains_key(&route) || !nested.shape.has_nullable_struct() {
            continue;
        }
        cols[k].out_def = exec.alloc(entries.max(1))?;
        levels.by_route.insert(route, cols[k].out_def);
    }
    Ok(levels)
}

/// The repetition levels of data page `p` of a column whose maximum is `max_rep`, to decode to `out`:
/// v2 pages' stream starts the body (`levels`); v1 pages' starts after a 4-byte length (`data`, the
/// whole body after decompression). A chunk's first data page must start a row.
fn rep_level_job(
    p: &PageInfo,
    (data, data_len, levels): (u64, u64, u64),
    out: u64,
    max_rep: u32,
    first_of_chunk: bool,
) -> LevelJob {
    let (src, src_len, mut flags) = if p.page_type == 3 {
        (levels, p.rep_levels_byte_length.max(0) as u64, 0)
    } else {
        (data, data_len, LEVELS_V1_PREFIX)
    };
    if first_of_chunk {
        flags |= LEVELS_FIRST_ZERO;
    }
    LevelJob {
        src,
        src_len,
        out,
        count: p.num_values.max(0) as u32,
        max_level: max_rep,
        bit_width: 32 - max_rep.leading_zeros(),
        flags,
        ..Default::default()
    }
}

/// Decodes the repetition levels of the repeated GPU columns' pages (`jobs`, each with its page's
/// index); a bad stream is the page's error.
fn decode_rep_levels<E: Executor>(
    exec: &mut E,
    jobs: &[(LevelJob, usize)],
    origins: &[PageOrigin],
    source: &ParquetSource,
    gpu: &[(usize, GpuLeaf)],
) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let list: Vec<LevelJob> = jobs.iter().map(|j| j.0).collect();
    let addr = exec.upload(&list)?;
    exec.launch(Kernel::RepLevels {
        jobs: addr,
        n: list.len() as u32,
    })?;
    let back: Vec<LevelJob> = exec.read(addr, list.len())?;
    exec.free(addr);
    if let Some((i, j)) = back.iter().enumerate().find(|(_, j)| j.error != 0) {
        let what = if j.error == ErrorCode::BadLevel as u32 {
            "a repetition level above the column's maximum, or a chunk not starting a row".to_string()
        } else {
            ErrorCode::from_u32(j.error)
                .map(ErrorCode::describe)
                .unwrap_or("an unknown decoder error")
                .to_string()
        };
        let message = format!("{what} (repetition levels, detail {})", j.error_detail);
        return Err(page_error(source, gpu, &origins[jobs[i].1], message));
    }
    Ok(())
}

/// The arrays of the GPU columns, by route index, into `arrays`: a flat column's leaf as it is; a
/// nested column's structs around its leaves, each nullable struct's validity packed from its
/// column's definition levels (`struct_levels`, freed here) where they reach the struct's level.
#[allow(clippy::too_many_arguments)]
fn assemble_columns<E: Executor>(
    exec: &mut E,
    routes: &[ColumnRoute],
    gpu: &[(usize, GpuLeaf)],
    mut leaf_arrays: BTreeMap<usize, DeviceArray<E::Buffer>>,
    levels: &NestedLevels,
    num_rows: u64,
    location: &Location,
    arrays: &mut BTreeMap<usize, DeviceArray<E::Buffer>>,
) -> Result<()> {
    let struct_levels = &levels.by_route;
    // Every nullable struct's validity first, their null counts then read once.
    let mut validities: Vec<u64> = Vec::new();
    let mut jobs: Vec<(u64, u32)> = Vec::new(); // levels, threshold; in the shapes' pre-order
    let mut job_routes: Vec<usize> = Vec::new();
    for (&route, &levels) in struct_levels {
        if let Route::GpuNested(nested) = &routes[route].route {
            collect_struct_levels(&nested.shape, levels, &mut jobs);
            job_routes.resize(jobs.len(), route);
        }
    }
    let counts_addr = if jobs.is_empty() {
        0
    } else {
        exec.alloc(jobs.len() * 8)?
    };
    let words = ((num_rows.div_ceil(32) * 4) as usize).next_multiple_of(BITMAP_PADDING);
    if !jobs.is_empty() {
        let marks = exec.alloc_uninit((num_rows as usize).max(1))?;
        for (j, &(levels, threshold)) in jobs.iter().enumerate() {
            exec.launch(Kernel::LevelsAtLeast {
                levels,
                n: num_rows,
                threshold,
                out: marks,
            })?;
            let w = exec.alloc(words)?;
            exec.launch(Kernel::PackBits {
                bytes: marks,
                n: num_rows,
                words: w,
                count: counts_addr + 8 * j as u64,
            })?;
            validities.push(w);
        }
        exec.free(marks);
    }
    let counts: Vec<u64> = if jobs.is_empty() {
        Vec::new()
    } else {
        exec.read(counts_addr, jobs.len())?
    };
    if counts_addr != 0 {
        exec.free(counts_addr);
    }
    for &addr in struct_levels.values() {
        exec.free(addr);
    }
    let mut by_route: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for ((route, w), count) in job_routes.into_iter().zip(validities).zip(counts) {
        by_route.entry(route).or_default().push((w, count));
    }
    for (route, r) in routes.iter().enumerate() {
        let gis: Vec<usize> = (0..gpu.len()).filter(|&g| gpu[g].0 == route).collect();
        let mut leaves = Vec::with_capacity(gis.len());
        for g in &gis {
            match leaf_arrays.remove(g) {
                Some(a) => leaves.push(Some(a)),
                None => break, // fell back to the host
            }
        }
        let mut mine = by_route.remove(&route).unwrap_or_default().into_iter();
        if leaves.len() != gis.len() || gis.is_empty() {
            for (w, _) in mine {
                exec.free(w);
            }
            continue;
        }
        let array = match &r.route {
            // A dictionary-typed column: its keys, with its values as the dictionary (Arrow keeps them
            // as the array's child).
            Route::Gpu(keys_leaf) if matches!(keys_leaf.role, LeafRole::DictionaryKeys(_)) => {
                let values = leaves.pop().flatten();
                leaves.pop().flatten().map(|mut keys| {
                    if let Some(values) = values {
                        keys.data_type =
                            DataType::Dictionary(Box::new(keys.data_type.clone()), Box::new(values.data_type.clone()));
                        keys.children = vec![values];
                    }
                    keys
                })
            }
            Route::Gpu(_) => leaves.pop().flatten(),
            Route::GpuNested(nested) if nested.shape.has_list() => Some(
                build_list_column(exec, &nested.shape, &mut leaves, &gis, levels, num_rows).map_err(|e| {
                    // Named by the column (the levels of no single page are at fault).
                    let message = match e {
                        Error::Parquet { source, .. } => source.to_string(),
                        other => return other,
                    };
                    Error::CorruptPage {
                        location: Location {
                            column: Some(r.name.clone()),
                            ..location.clone()
                        },
                        page: None,
                        message,
                    }
                })?,
            ),
            Route::GpuNested(nested) => Some(build_nested(exec, &nested.shape, &mut leaves, &mut mine, num_rows)?),
            Route::Host(_) => None,
        };
        if let Some(a) = array {
            arrays.insert(route, a);
        }
    }
    Ok(())
}

/// The (levels, threshold) of each nullable struct of `shape`, in pre-order.
fn collect_struct_levels(shape: &NestedShape, levels: u64, jobs: &mut Vec<(u64, u32)>) {
    if let NestedShape::Struct {
        def_level, children, ..
    } = shape
    {
        if let Some(d) = def_level {
            jobs.push((levels, *d));
        }
        for c in children {
            collect_struct_levels(c, levels, jobs);
        }
    }
}

/// The array of `shape` over its leaves' arrays (each taken once); a nullable struct takes the next
/// (validity, set bits) of `validities`, in the order [`collect_struct_levels`] made them.
fn build_nested<E: Executor>(
    exec: &mut E,
    shape: &NestedShape,
    leaves: &mut [Option<DeviceArray<E::Buffer>>],
    validities: &mut impl Iterator<Item = (u64, u64)>,
    num_rows: u64,
) -> Result<DeviceArray<E::Buffer>> {
    let internal = |what: &str| Error::parquet(Location::default(), format!("nested column assembly: {what}"));
    match shape {
        NestedShape::Leaf(i) => leaves
            .get_mut(*i)
            .and_then(Option::take)
            .ok_or_else(|| internal("a leaf taken twice")),
        NestedShape::Struct {
            data_type,
            def_level,
            children,
        } => {
            let (mut validity, mut null_count) = (None, 0);
            if def_level.is_some() {
                let (w, present) = validities
                    .next()
                    .ok_or_else(|| internal("a struct without its levels"))?;
                null_count = (num_rows - present.min(num_rows)) as usize;
                if null_count > 0 {
                    validity = Some(exec.take(w)?);
                } else {
                    exec.free(w);
                }
            }
            let mut arrays = Vec::with_capacity(children.len());
            for c in children {
                arrays.push(build_nested(exec, c, leaves, validities, num_rows)?);
            }
            Ok(DeviceArray {
                data_type: data_type.clone(),
                len: num_rows as usize,
                null_count,
                validity,
                buffers: Vec::new(),
                children: arrays,
            })
        }
        NestedShape::List { .. } => Err(internal("a list outside build_list_column")),
    }
}

/// Packs each repeated leaf's values (fixed-width values or string offsets, and validity bytes) from
/// its level entries to its slots (the items of its innermost list): the columns' descriptors then
/// describe the packed arrays (`num_rows` their slots).
fn compact_repeated_leaves<E: Executor>(
    exec: &mut E,
    routes: &[ColumnRoute],
    gpu: &[(usize, GpuLeaf)],
    kept: &[usize],
    cols: &mut [ColumnDesc],
    levels: &NestedLevels,
) -> Result<()> {
    for (k, &gi) in kept.iter().enumerate() {
        let (route, leaf) = &gpu[gi];
        let Route::GpuNested(nested) = &routes[*route].route else {
            continue;
        };
        let Some(&rep) = levels.rep.get(&gi) else {
            continue;
        };
        let index = (0..gi).filter(|&g| gpu[g].0 == *route).count();
        let mut spaces = BTreeMap::new();
        nested.shape.leaf_spaces((0, 0), &mut spaces);
        let space = spaces.get(&index).copied().unwrap_or((0, 0));
        let def = levels.def.get(&gi).copied().unwrap_or(0);
        let c = &mut cols[k];
        let n = c.num_rows;
        let pos = exec.alloc_uninit((n as usize + 1) * 4)?;
        exec.launch(Kernel::SlotScan {
            def,
            rep,
            n,
            space,
            pos,
        })?;
        let slots = exec.read::<u32>(pos + 4 * n, 1)?.first().copied().unwrap_or(0) as u64;
        let pack = |exec: &mut E, src: u64, width: u32, with_end: bool| -> Result<u64> {
            let count = slots as usize + usize::from(with_end);
            let dst = exec.alloc((count * width as usize).max(1))?;
            exec.launch(Kernel::Compact {
                def,
                rep,
                n,
                space,
                pos,
                src,
                width,
                with_end,
                dst,
            })?;
            exec.free(src);
            Ok(dst)
        };
        if leaf.physical == physical::BYTE_ARRAY {
            c.out_offsets = pack(exec, c.out_offsets, if c.out_width == 8 { 8 } else { 4 }, true)?;
        } else {
            c.out_values = pack(exec, c.out_values, c.out_width.max(1), false)?;
        }
        if c.out_valid != 0 {
            c.out_valid = pack(exec, c.out_valid, 1, false)?;
        }
        c.num_rows = slots;
        exec.free(pos);
    }
    Ok(())
}

/// Slot scans of a list column's leaves, by (leaf, space): the positions and the slot count.
type Scans = BTreeMap<(usize, (u32, u32)), (u64, u64)>;

/// The slot positions of `space` over leaf `leaf`'s entries (scanned once).
fn scan_of<E: Executor>(
    exec: &mut E,
    scans: &mut Scans,
    lv: &[(u64, u64, u64)],
    leaf: usize,
    space: (u32, u32),
) -> Result<(u64, u64)> {
    if let Some(&found) = scans.get(&(leaf, space)) {
        return Ok(found);
    }
    let (def, rep, n) = lv[leaf];
    let pos = exec.alloc_uninit((n as usize + 1) * 4)?;
    exec.launch(Kernel::SlotScan {
        def,
        rep,
        n,
        space,
        pos,
    })?;
    let slots = exec.read::<u32>(pos + 4 * n, 1)?.first().copied().unwrap_or(0) as u64;
    scans.insert((leaf, space), (pos, slots));
    Ok((pos, slots))
}

/// A validity over `slots` slots of `space` where leaf `leaf`'s definition level reaches
/// `threshold`: the bitmap (None without nulls) and the null count.
fn slot_validity<E: Executor>(
    exec: &mut E,
    lv: &[(u64, u64, u64)],
    leaf: usize,
    (space, pos, slots): ((u32, u32), u64, u64),
    threshold: u32,
) -> Result<(Option<E::Buffer>, usize)> {
    let (def, rep, n) = lv[leaf];
    let marks = exec.alloc((slots as usize).max(1))?;
    exec.launch(Kernel::SlotFlags {
        def,
        rep,
        n,
        space,
        pos,
        threshold,
        out: marks,
    })?;
    let words = ((slots.div_ceil(32) * 4) as usize).next_multiple_of(BITMAP_PADDING);
    let w = exec.alloc(words)?;
    let count = exec.alloc(8)?;
    exec.launch(Kernel::PackBits {
        bytes: marks,
        n: slots,
        words: w,
        count,
    })?;
    let present = exec.read::<u64>(count, 1)?.first().copied().unwrap_or(0);
    exec.free(count);
    exec.free(marks);
    let nulls = (slots - present.min(slots)) as usize;
    if nulls == 0 {
        exec.free(w);
        return Ok((None, 0));
    }
    Ok((Some(exec.take(w)?), nulls))
}

/// The array of a column holding lists: each node's arrays over the slots of its space, from its
/// first leaf's levels (arrow-rs's readers take a node's levels from its first child too); the
/// leaves' arrays come packed to their slots ([`compact_repeated_leaves`]). Frees the levels.
fn build_list_column<E: Executor>(
    exec: &mut E,
    shape: &NestedShape,
    leaves: &mut [Option<DeviceArray<E::Buffer>>],
    gis: &[usize],
    levels: &NestedLevels,
    num_rows: u64,
) -> Result<DeviceArray<E::Buffer>> {
    // (definition levels, repetition levels, entries) of each leaf; 0: levels all 0.
    let lv: Vec<(u64, u64, u64)> = gis
        .iter()
        .map(|g| {
            let get = |m: &BTreeMap<usize, u64>| m.get(g).copied().unwrap_or(0);
            (get(&levels.def), get(&levels.rep), get(&levels.entries))
        })
        .collect();
    let mut scans = Scans::new();
    let result = (|| {
        // Every leaf's levels hold the step's rows (arrow-rs reads each leaf record by record, and
        // refuses children of different lengths).
        for leaf in 0..lv.len() {
            let (_, rows) = scan_of(exec, &mut scans, &lv, leaf, (0, 0))?;
            if rows != num_rows {
                return Err(Error::parquet(
                    Location::default(),
                    format!("the repetition levels hold {rows} rows where the row groups hold {num_rows}"),
                ));
            }
        }
        build_list_node(exec, shape, (0, 0), leaves, &lv, &mut scans)
    })();
    for (pos, _) in scans.into_values() {
        exec.free(pos);
    }
    for &g in gis {
        for map in [&levels.def, &levels.rep] {
            if let Some(&a) = map.get(&g) {
                exec.free(a);
            }
        }
    }
    result
}

/// A struct's fields, or a list's items, hold as many slots as their parent says: leaves whose levels
/// disagree (a corrupt file) would otherwise make arrays of mismatched lengths.
fn same_lengths<B: crate::decode::exec::OwnedBuffer>(children: &[DeviceArray<B>], slots: u64) -> Result<()> {
    match children.iter().find(|c| c.len as u64 != slots) {
        None => Ok(()),
        Some(c) => Err(Error::parquet(
            Location::default(),
            format!(
                "the leaves' levels disagree: {} slots where their parent's levels give {slots}",
                c.len
            ),
        )),
    }
}

/// One node of [`build_list_column`] over the slots of `space`.
fn build_list_node<E: Executor>(
    exec: &mut E,
    shape: &NestedShape,
    space: (u32, u32),
    leaves: &mut [Option<DeviceArray<E::Buffer>>],
    lv: &[(u64, u64, u64)],
    scans: &mut Scans,
) -> Result<DeviceArray<E::Buffer>> {
    let internal = |what: &str| Error::parquet(Location::default(), format!("nested column assembly: {what}"));
    let first = shape.first_leaf().ok_or_else(|| internal("a node without leaves"))?;
    match shape {
        NestedShape::Leaf(i) => leaves
            .get_mut(*i)
            .and_then(Option::take)
            .ok_or_else(|| internal("a leaf taken twice")),
        NestedShape::Struct {
            data_type,
            def_level,
            children,
        } => {
            let (pos, slots) = scan_of(exec, scans, lv, first, space)?;
            let (validity, null_count) = match def_level {
                Some(d) => slot_validity(exec, lv, first, (space, pos, slots), *d)?,
                None => (None, 0),
            };
            let mut arrays = Vec::with_capacity(children.len());
            for c in children {
                arrays.push(build_list_node(exec, c, space, leaves, lv, scans)?);
            }
            same_lengths(&arrays, slots)?;
            Ok(DeviceArray {
                data_type: data_type.clone(),
                len: slots as usize,
                null_count,
                validity,
                buffers: Vec::new(),
                children: arrays,
            })
        }
        NestedShape::List {
            data_type,
            nullable,
            rep_level,
            item_def,
            child,
        } => {
            let (pos, slots) = scan_of(exec, scans, lv, first, space)?;
            let items = (*rep_level, *item_def);
            let (item_pos, item_slots) = scan_of(exec, scans, lv, first, items)?;
            let wide = matches!(data_type, DataType::LargeList(_));
            if !wide && item_slots > i32::MAX as u64 {
                return Err(Error::parquet(
                    Location::default(),
                    format!("{item_slots} list items overflow 32-bit offsets"),
                ));
            }
            let width = if wide { 8 } else { 4 };
            let offsets = exec.alloc((slots as usize + 1) * width)?;
            let (def, rep, n) = lv[first];
            exec.launch(Kernel::ListOffsets {
                def,
                rep,
                n,
                parent: space,
                parent_pos: pos,
                child_pos: item_pos,
                wide,
                offsets,
            })?;
            let (validity, null_count) = if *nullable {
                slot_validity(exec, lv, first, (space, pos, slots), item_def.saturating_sub(1))?
            } else {
                (None, 0)
            };
            let items_array = build_list_node(exec, child, items, leaves, lv, scans)?;
            same_lengths(std::slice::from_ref(&items_array), item_slots)?;
            if let DataType::FixedSizeList(_, size) = data_type {
                let list = (offsets, slots, *size as u32);
                let result = fixed_size_list(exec, list, items_array);
                exec.free(offsets);
                return Ok(DeviceArray {
                    data_type: data_type.clone(),
                    len: slots as usize,
                    null_count,
                    validity,
                    buffers: Vec::new(),
                    children: vec![result?],
                });
            }
            Ok(DeviceArray {
                data_type: data_type.clone(),
                len: slots as usize,
                null_count,
                validity,
                buffers: vec![exec.take(offsets)?],
                children: vec![items_array],
            })
        }
    }
}

/// The items of a fixed-size list (`FixedSizeList`) from its lists' 32-bit offsets (`list`: offsets,
/// lists, size) and its items' array (fixed-width values): the items as they are where every list holds
/// `size`; lists of no item (null or empty) padded with `size` null items, as arrow-rs pads them. A
/// list of another count is refused, as arrow-rs refuses it.
fn fixed_size_list<E: Executor>(
    exec: &mut E,
    (offsets, slots, size): (u64, u64, u32),
    items: DeviceArray<E::Buffer>,
) -> Result<DeviceArray<E::Buffer>> {
    let result = exec.alloc(16)?;
    exec.write(result, &[u64::MAX, 0])?;
    exec.launch(Kernel::FixedSizeCheck {
        offsets,
        slots,
        size,
        result,
    })?;
    let found: Vec<u64> = exec.read(result, 2)?;
    exec.free(result);
    if found[0] != u64::MAX {
        return Err(Error::parquet(
            Location::default(),
            format!(
                "Encountered misaligned row: list {} of the step holds neither {size} items nor none",
                found[0]
            ),
        ));
    }
    if found[1] == 0 {
        return Ok(items);
    }
    let width = items
        .data_type
        .primitive_width()
        .ok_or_else(|| Error::parquet(Location::default(), "fixed-size list items of no fixed width"))?;
    let n = slots * u64::from(size);
    let src_len = items.len as u64;
    let data_type = items.data_type.clone();
    let (mut values, mut validity) = (0, 0);
    if src_len > 0 {
        let DeviceArray {
            buffers, validity: v, ..
        } = items;
        let buffer = buffers
            .into_iter()
            .next()
            .ok_or_else(|| Error::parquet(Location::default(), "fixed-size list items without values"))?;
        values = exec.adopt(buffer)?;
        if let Some(v) = v {
            validity = exec.adopt(v)?;
        }
    }
    let dst = exec.alloc_uninit((n as usize * width).max(1))?;
    let valid = exec.alloc_uninit((n as usize).max(1))?;
    exec.launch(Kernel::FixedSizePad {
        offsets,
        slots,
        size,
        src: (values, validity, src_len),
        width: width as u32,
        dst,
        dst_valid: valid,
    })?;
    for at in [values, validity] {
        if at != 0 {
            exec.free(at);
        }
    }
    let words = ((n.div_ceil(32) * 4) as usize).next_multiple_of(BITMAP_PADDING);
    let bitmap = exec.alloc(words)?;
    let count = exec.alloc(8)?;
    exec.launch(Kernel::PackBits {
        bytes: valid,
        n,
        words: bitmap,
        count,
    })?;
    let set = exec.read::<u64>(count, 1)?.first().copied().unwrap_or(0);
    exec.free(count);
    exec.free(valid);
    Ok(DeviceArray {
        data_type,
        len: n as usize,
        null_count: (n - set.min(n)) as usize,
        validity: Some(exec.take(bitmap)?),
        buffers: vec![exec.take(dst)?],
        children: Vec::new(),
    })
}

/// An error found while planning a GPU chunk's pages.
fn corrupt(
    source: &ParquetSource,
    gpu: &[(usize, GpuLeaf)],
    ch: &ChunkPages,
    page: Option<usize>,
    message: &str,
) -> Error {
    Error::CorruptPage {
        location: Location::chunk(
            &source.location().file,
            source.column_path(gpu[ch.column].1.leaf),
            ch.row_group,
        ),
        page,
        message: message.to_string(),
    }
}

fn kernel_error(source: &ParquetSource, gpu: &[(usize, GpuLeaf)], o: &PageOrigin, code: u32, detail: u32) -> Error {
    let what = ErrorCode::from_u32(code)
        .map(ErrorCode::describe)
        .unwrap_or("an unknown decoder error");
    page_error(source, gpu, o, format!("{what} (decoder code {code}, detail {detail})"))
}

/// A corrupt page, named by file, column, row group and page.
fn page_error(source: &ParquetSource, gpu: &[(usize, GpuLeaf)], o: &PageOrigin, message: String) -> Error {
    Error::CorruptPage {
        location: Location::chunk(
            &source.location().file,
            source.column_path(gpu[o.column].1.leaf),
            o.row_group,
        ),
        page: Some(o.page),
        message,
    }
}

/// Checks the string columns (Arrow `Utf8`, as arrow-rs refuses a string that is not UTF-8) on the
/// device, one launch per column and one read for all; a failure names the page of the first bad row.
fn check_utf8<E: Executor>(
    exec: &mut E,
    cols: &[ColumnDesc],
    kept: &[usize],
    pages: &[PageDesc],
    origins: &[PageOrigin],
    source: &ParquetSource,
    gpu: &[(usize, GpuLeaf)],
) -> Result<()> {
    // Checked on the kernels' offsets, before they are reshaped into the Arrow type's layout; views
    // written by gp_copy_strings were checked row by row there (`view_flags::CHECK_UTF8`).
    let strings: Vec<usize> = (0..cols.len())
        .filter(|&k| {
            matches!(
                gpu[kept[k]].1.data_type,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) && cols[k].view_flags & view_flags::CHECK_UTF8 == 0
        })
        .collect();
    if strings.is_empty() {
        return Ok(());
    }
    let results = exec.alloc(strings.len() * 8)?;
    exec.write(results, &vec![u64::MAX; strings.len()])?;
    for (i, &k) in strings.iter().enumerate() {
        let c = &cols[k];
        exec.launch(Kernel::ValidateUtf8 {
            chars: c.out_values,
            n: c.chars_capacity,
            offsets: c.out_offsets,
            offset_width: if c.out_width == 8 { 8 } else { 4 },
            rows: c.num_rows,
            result: results + 8 * i as u64,
        })?;
    }
    let bad: Vec<u64> = exec.read(results, strings.len())?;
    exec.free(results);
    let Some((i, &at)) = bad.iter().enumerate().find(|(_, b)| **b != u64::MAX) else {
        return Ok(());
    };
    let k = strings[i];
    let c = &cols[k];
    // The row holding byte `at`: the last row whose string starts at or before it and is not empty.
    let offsets: Vec<i64> = if c.out_width == 8 {
        exec.read(c.out_offsets, c.num_rows as usize + 1)?
    } else {
        let narrow: Vec<i32> = exec.read(c.out_offsets, c.num_rows as usize + 1)?;
        narrow.into_iter().map(i64::from).collect()
    };
    let row = offsets[1..].partition_point(|&o| o <= at as i64) as u32;
    let message =
        format!("a string that is not valid UTF-8 (byte {at} of the step's characters, row {row} of the step)");
    Err(row_error(source, gpu, kept, pages, origins, k, row as u64, message))
}

/// An error found at `row` of the step's column `k` (an index into the step's columns), named by the
/// page holding that row where one does, else by the column.
#[allow(clippy::too_many_arguments)]
fn row_error(
    source: &ParquetSource,
    gpu: &[(usize, GpuLeaf)],
    kept: &[usize],
    pages: &[PageDesc],
    origins: &[PageOrigin],
    k: usize,
    row: u64,
    message: String,
) -> Error {
    let page = pages.iter().position(|p| {
        p.column == k as u32 && (p.row_start as u64) <= row && row - (p.row_start as u64) < p.num_values as u64
    });
    match page {
        Some(pi) => page_error(source, gpu, &origins[pi], message),
        None => Error::CorruptPage {
            location: Location {
                column: Some(source.column_path(gpu[kept[k]].1.leaf)),
                ..source.location()
            },
            page: None,
            message,
        },
    }
}

/// Bytes per offset of a BYTE_ARRAY leaf's strings in the kernels (its `ColumnDesc::out_width`): 8 for
/// `LargeUtf8` / `LargeBinary`, whose offsets are written 64-bit from the start (so their characters may
/// pass 2 GiB in one step, and no widening pass is needed), else 4.
pub(super) fn offset_width(leaf: &GpuLeaf) -> u32 {
    if leaf.strings == StringOutput::Offsets64 { 8 } else { 4 }
}

/// A BYTE_ARRAY column's last offset (its characters), as wide as the column's offsets.
pub(super) fn last_offset<E: Executor>(exec: &mut E, c: &ColumnDesc) -> Result<u64> {
    let last = if c.out_width == 8 {
        exec.read::<i64>(c.out_offsets + c.num_rows * 8, 1)?
            .first()
            .copied()
            .unwrap_or(0)
    } else {
        exec.read::<i32>(c.out_offsets + c.num_rows * 4, 1)?
            .first()
            .copied()
            .unwrap_or(0)
            .into()
    };
    Ok(last.max(0) as u64)
}

/// The buffers of each BYTE_ARRAY column (by its index in `cols`) in its Arrow type's layout, from the
/// kernels' offsets and characters: as they are (32- or 64-bit offsets), views, or decimals. The
/// results the host needs (the longest view, a decimal too long) are read once for all columns.
#[allow(clippy::too_many_arguments)]
fn reshape_strings<E: Executor>(
    exec: &mut E,
    cols: &mut [ColumnDesc],
    kept: &[usize],
    pages: &[PageDesc],
    origins: &[PageOrigin],
    source: &ParquetSource,
    gpu: &[(usize, GpuLeaf)],
) -> Result<BTreeMap<usize, Vec<E::Buffer>>> {
    let strings: Vec<usize> = (0..cols.len())
        .filter(|&k| cols[k].physical == physical::BYTE_ARRAY)
        .collect();
    let mut out = BTreeMap::new();
    if strings.is_empty() {
        return Ok(out);
    }
    for &k in &strings {
        // A step of no rows has no pages, so the characters were never allocated.
        if cols[k].out_values == 0 {
            cols[k].out_values = exec.alloc(1)?;
        }
    }
    // One u64 a column: the longest view (as u32) or the first decimal too long.
    let results = exec.alloc(strings.len() * 8)?;
    let initial: Vec<u64> = strings
        .iter()
        .map(|&k| match gpu[kept[k]].1.strings {
            StringOutput::Decimal(_) => u64::MAX,
            _ => 0,
        })
        .collect();
    exec.write(results, &initial)?;
    let mut made: Vec<(usize, StringOutput, u64)> = Vec::new(); // column, layout, first new buffer
    for (i, &k) in strings.iter().enumerate() {
        let c = &cols[k];
        let n = c.num_rows;
        let layout = gpu[kept[k]].1.strings;
        let result = results + 8 * i as u64;
        let dst = match layout {
            // Offsets already in the type's width (see `offset_width`).
            StringOutput::Offsets32 | StringOutput::Offsets64 => continue,
            // Written by gp_copy_strings (`decompress::views_in_copy`): only its longest length to fetch.
            StringOutput::Views if c.out_views != 0 => {
                exec.launch(Kernel::CopyBytes {
                    src: c.view_longest,
                    dst: result,
                    n: 4,
                })?;
                exec.free(c.view_longest);
                c.out_views
            }
            StringOutput::Views => {
                let dst = exec.alloc_uninit((n as usize * 16).max(16))?;
                exec.launch(Kernel::StringsToViews {
                    offsets: c.out_offsets,
                    segment: view_segment(exec, c),
                    chars: c.out_values,
                    chars_len: c.chars_capacity,
                    n,
                    views: dst,
                    max_len: result,
                })?;
                dst
            }
            StringOutput::Decimal(width) => {
                let dst = exec.alloc_uninit((n as usize * width as usize).max(1))?;
                exec.launch(Kernel::StringsToDecimal {
                    offsets: c.out_offsets,
                    chars: c.out_values,
                    chars_len: c.chars_capacity,
                    n,
                    width,
                    dst,
                    too_long: result,
                })?;
                dst
            }
        };
        made.push((i, layout, dst));
    }
    let found: Vec<u64> = if made.is_empty() {
        Vec::new()
    } else {
        exec.read(results, strings.len())?
    };
    exec.free(results);
    for (i, layout, dst) in made {
        let k = strings[i];
        let c = cols[k];
        let buffers = match layout {
            StringOutput::Offsets32 | StringOutput::Offsets64 => continue,
            StringOutput::Views => {
                exec.free(c.out_offsets);
                let mut buffers = vec![exec.take(dst)?];
                if found[i] as u32 <= 12 {
                    // Every string inline: no data buffer, as arrow-rs's own views of short strings.
                    exec.free(c.out_values);
                    if c.view_pages != 0 {
                        exec.free(c.view_pages);
                    }
                    out.insert(k, buffers);
                    continue;
                }
                // Every long string points into the column's pages: no characters were copied.
                let pages_only = c.view_pages != 0 && c.chars_capacity == 0;
                let segment = view_segment(exec, &c);
                if !pages_only && segment != 0 && found[i] > segment {
                    let message = format!(
                        "a string of {} bytes among more than {} bytes of strings in one step: views of so \
                         many strings take strings of at most {segment} bytes",
                        found[i],
                        exec.string_offset_limit()
                    );
                    return Err(step_error(source, gpu, kept[k], message));
                }
                // The column's own pages are buffer 1 (gp_copy_strings' views name it), the copied
                // characters after them.
                if c.view_pages != 0 {
                    buffers.push(exec.take(c.view_pages)?);
                }
                if pages_only {
                    exec.free(c.out_values);
                } else if segment != 0 {
                    buffers.extend(view_data_buffers(exec, &c)?);
                } else {
                    buffers.push(exec.take(c.out_values)?);
                }
                buffers
            }
            StringOutput::Decimal(width) => {
                if found[i] != u64::MAX {
                    let row = found[i];
                    let message = format!("a decimal of more than {width} bytes (row {row} of the step)");
                    return Err(row_error(source, gpu, kept, pages, origins, k, row, message));
                }
                exec.free(c.out_offsets);
                exec.free(c.out_values);
                vec![exec.take(dst)?]
            }
        };
        out.insert(k, buffers);
    }
    Ok(out)
}
