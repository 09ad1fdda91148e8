//! Row filters: an expression over columns and literals ([`Expr`]), parsed from the CLI's syntax
//! ([`Expr::parse`]) or built from pyarrow's DNF form ([`Expr::from_dnf`]); typed against a file's
//! Arrow schema ([`Expr::bind`] → [`Predicate`]); evaluated exactly over record batches
//! ([`Predicate::evaluate`], SQL null semantics: a comparison with null is unknown and unknown rows
//! are dropped); and used to prune before any data byte moves ([`prune()`]: row-group statistics, bloom
//! filters, the page index), giving a [`ScanSelection`] of surviving row groups, row ranges and page
//! byte ranges, with counters per column and reason.
//!
//! ```
//! use gpu_parquet::filter::Expr;
//! let e = Expr::parse("l_shipdate >= '1994-01-01' and l_discount between 0.05 and 0.07 and l_quantity < 24")?;
//! assert_eq!(e.columns(), vec!["l_discount", "l_quantity", "l_shipdate"]);
//! # Ok::<(), gpu_parquet::Error>(())
//! ```

mod bind;
mod hook;
mod lower;
mod parse;
pub mod prune;

pub use crate::decode::row_filter::FilterMode;
pub use crate::report::{ColumnPruningReport, PruningReport};
pub use bind::{Leaf, Predicate, Test};
pub use hook::MOSTLY_ACCEPTED;
pub(crate) use hook::{PlannedFilter, SharedFilter};
pub use lower::{NotLowered, lower};
pub use prune::{ChunkPages, RowGroupSelection, ScanSelection, prune};

use std::fmt;

use crate::error::{Error, Result};

/// How a filtered read reads its columns ([`crate::ReaderBuilder::with_filter_passes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterPasses {
    /// Two passes where they can save a read's time, else one, step by step: a step reads in one
    /// pass where its other columns' pages are in the page cache and few enough that reading them
    /// all costs less than the second pass's round trip (mask back to the host, a second fetch),
    /// whatever the filter accepts ([`ONE_PASS_HOT_PAYLOAD`]); else in two.
    #[default]
    Auto,
    /// The filter's columns first; then, per step, the other columns' pages holding an accepted
    /// row only (none of a row group without one), as arrow-rs's `RowFilter` reads. Where there is
    /// no other column (or, on the GPU, the filter runs on the host or a mask is asked) it reads in
    /// one pass.
    Two,
    /// Every column's pages of the rows pruning kept, in one pass; the filter after the decode.
    One,
}

/// The most bytes of a step's other columns (every page of the rows pruning kept) that
/// [`FilterPasses::Auto`] reads in one pass where they are in the page cache. A second pass saves at
/// most those bytes, which the staged path copies from the page cache at some 30 GB/s or more (2 ms
/// for this many); its round trip cost 1 to 4.4 ms a read hot on the H200 (lineitem SF10, run K:
/// Q6 13.7 against 9.3 ms, 49 MB of such pages; a bloom-filter lookup 9.2 against 5.6 ms, 22 MB).
/// From the disk the same bytes take ten times longer or more, and two passes read.
pub const ONE_PASS_HOT_PAYLOAD: u64 = 64 << 20;

impl std::str::FromStr for FilterPasses {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(FilterPasses::Auto),
            "2" | "two" => Ok(FilterPasses::Two),
            "1" | "one" => Ok(FilterPasses::One),
            other => Err(format!("expected auto, 1 or 2 passes, not '{other}'")),
        }
    }
}

/// A comparison operator: the GPU row filter's own, so that a filter lowers to it unchanged.
pub use crate::decode::row_filter::CmpOp;

impl CmpOp {
    /// The operator whose result is the SQL negation of this one's (`not (a < b)` is `a >= b`, both
    /// unknown where `a` is null).
    pub(crate) fn negate(self) -> Self {
        match self {
            CmpOp::Eq => CmpOp::NotEq,
            CmpOp::NotEq => CmpOp::Eq,
            CmpOp::Lt => CmpOp::GtEq,
            CmpOp::LtEq => CmpOp::Gt,
            CmpOp::Gt => CmpOp::LtEq,
            CmpOp::GtEq => CmpOp::Lt,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::NotEq => "!=",
            CmpOp::Lt => "<",
            CmpOp::LtEq => "<=",
            CmpOp::Gt => ">",
            CmpOp::GtEq => ">=",
        }
    }
}

/// A literal as written, typed only when bound to a column ([`Expr::bind`]): `0.05` becomes a
/// decimal for a decimal column and a double for a double column.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A number as written (`24`, `-3`, `0.05`, `1e-3`).
    Number(String),
    /// A quoted string: a string, or a date, timestamp or time for such a column.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Number(n) => f.write_str(n),
            Literal::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Literal::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A filter expression over named columns (top-level columns of the file's Arrow schema).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `column op literal`
    Compare {
        /// The column.
        column: String,
        /// The operator.
        op: CmpOp,
        /// The literal.
        value: Literal,
    },
    /// `column [not] in (v, ...)`
    InList {
        /// The column.
        column: String,
        /// The values (at least one).
        values: Vec<Literal>,
        /// `not in`
        negated: bool,
    },
    /// `column is [not] null`
    IsNull {
        /// The column.
        column: String,
        /// `is not null`
        negated: bool,
    },
    /// `column between low and high` (both ends included)
    Between {
        /// The column.
        column: String,
        /// Lower bound, included.
        low: Literal,
        /// Upper bound, included.
        high: Literal,
    },
    /// Both.
    And(Box<Expr>, Box<Expr>),
    /// Either.
    Or(Box<Expr>, Box<Expr>),
    /// Negation (SQL: `not unknown` is unknown).
    Not(Box<Expr>),
}

impl Expr {
    /// Parses the CLI syntax; see [`parse`](self) for the grammar. Errors name the position.
    pub fn parse(text: &str) -> Result<Expr> {
        parse::parse(text).map_err(|e| Error::Config {
            setting: format!("filter \"{text}\""),
            message: e.to_string(),
        })
    }

    /// `self and other`
    pub fn and(self, other: Expr) -> Expr {
        Expr::And(Box::new(self), Box::new(other))
    }

    /// `self or other`
    pub fn or(self, other: Expr) -> Expr {
        Expr::Or(Box::new(self), Box::new(other))
    }

    /// `not self`
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Expr {
        Expr::Not(Box::new(self))
    }

    /// pyarrow's disjunctive normal form: an OR of ANDs of `(column, op, value)`, op one of `=`,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `not in` (for `in` / `not in` the value is a list).
    /// A flat list of terms (`[(c, op, v), ...]`) is given as one conjunction.
    ///
    /// `not in` keeps pyarrow's meaning, under which a null value is "not in" the list (pyarrow
    /// evaluates it as `~isin`, and `isin(null)` is false): it is `(c not in list) or c is null`.
    pub fn from_dnf(disjuncts: &[Vec<DnfTerm>]) -> Result<Expr> {
        let setting = || "filters".to_string();
        let mut any: Option<Expr> = None;
        for (i, conj) in disjuncts.iter().enumerate() {
            if conj.is_empty() {
                return Err(Error::Config {
                    setting: setting(),
                    message: format!("conjunction {i} is empty"),
                });
            }
            let mut all: Option<Expr> = None;
            for term in conj {
                let e = term.to_expr()?;
                all = Some(match all {
                    None => e,
                    Some(a) => a.and(e),
                });
            }
            let all = all.expect("non-empty above");
            any = Some(match any {
                None => all,
                Some(a) => a.or(all),
            });
        }
        any.ok_or_else(|| Error::Config {
            setting: setting(),
            message: "the filter list is empty".into(),
        })
    }

    /// The columns named, sorted, once each.
    pub fn columns(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_columns(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_columns(&self, out: &mut Vec<String>) {
        match self {
            Expr::Compare { column, .. }
            | Expr::InList { column, .. }
            | Expr::IsNull { column, .. }
            | Expr::Between { column, .. } => out.push(column.clone()),
            Expr::And(a, b) | Expr::Or(a, b) => {
                a.collect_columns(out);
                b.collect_columns(out);
            }
            Expr::Not(a) => a.collect_columns(out),
        }
    }
}

/// One term of pyarrow's DNF form: `(column, op, value)`.
#[derive(Debug, Clone, PartialEq)]
pub struct DnfTerm {
    /// The column.
    pub column: String,
    /// The operator as pyarrow spells it.
    pub op: String,
    /// One literal, or several for `in` / `not in`.
    pub values: Vec<Literal>,
}

impl DnfTerm {
    fn to_expr(&self) -> Result<Expr> {
        let bad = |message: String| Error::Config {
            setting: format!("filters term ({}, '{}', ...)", self.column, self.op),
            message,
        };
        let column = self.column.clone();
        let op = match self.op.trim().to_ascii_lowercase().as_str() {
            "=" | "==" => CmpOp::Eq,
            "!=" => CmpOp::NotEq,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::LtEq,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::GtEq,
            "in" | "not in" => {
                if self.values.is_empty() {
                    return Err(bad("'in' needs a non-empty list of values".into()));
                }
                let list = Expr::InList {
                    column: column.clone(),
                    values: self.values.clone(),
                    negated: self.op.contains("not"),
                };
                return Ok(if self.op.contains("not") {
                    list.or(Expr::IsNull { column, negated: false })
                } else {
                    list
                });
            }
            other => {
                return Err(bad(format!(
                    "unknown operator '{other}' (expected =, ==, !=, <, <=, >, >=, in, not in)"
                )));
            }
        };
        match self.values.as_slice() {
            [v] => Ok(Expr::Compare {
                column,
                op,
                value: v.clone(),
            }),
            _ => Err(bad(format!("'{}' takes one value, not {}", self.op, self.values.len()))),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Compare { column, op, value } => write!(f, "{} {} {value}", parse::quote_column(column), op.symbol()),
            Expr::InList {
                column,
                values,
                negated,
            } => {
                let list: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                let not = if *negated { "not " } else { "" };
                write!(f, "{} {not}in ({})", parse::quote_column(column), list.join(", "))
            }
            Expr::IsNull { column, negated } => {
                let not = if *negated { "not " } else { "" };
                write!(f, "{} is {not}null", parse::quote_column(column))
            }
            Expr::Between { column, low, high } => {
                write!(f, "{} between {low} and {high}", parse::quote_column(column))
            }
            Expr::And(a, b) => write!(f, "({a} and {b})"),
            Expr::Or(a, b) => write!(f, "({a} or {b})"),
            Expr::Not(a) => write!(f, "not {a}"),
        }
    }
}

#[cfg(test)]
mod tests;
