//! Selective-read rows of `bench` (issue 43): per named filter, the filtered read into device columns
//! in two passes (the filter's columns first, then the other columns' pages of the accepted rows) and
//! in one, the same columns read without the filter (what a filter must not be slower than when most
//! rows match), and the filtered read on the host through arrow-rs (two passes and one), each with the
//! bytes it fetched and the rows it kept. The GPU result is checked against the host's one-pass read,
//! value for value, before it is timed.

use std::path::Path;

use arrow::array::Array;

use super::{BenchOptions, BenchRow, best_of, drop_page_cache, gbps, reader_builder, warm_page_cache};
use crate::error::Result;
use crate::filter::{Expr, FilterPasses};
use crate::reader::{Reader, ReaderBuilder};
use crate::scan::Decode;

/// A filter of the selective rows, named for the table (`q6`, `point`...).
#[derive(Debug, Clone)]
pub struct NamedFilter {
    /// The rows' label.
    pub name: String,
    /// The filter.
    pub expr: Expr,
}

impl NamedFilter {
    /// `NAME:EXPR` (a name of letters, digits, `_` or `-`, then a colon) or a bare expression, named by
    /// its position (`f1`, `f2`...): the CLI's `--filter`.
    pub fn parse(text: &str, position: usize) -> Result<Self> {
        let named = text.split_once(':').filter(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
        let (name, expr) = match named {
            Some((name, expr)) => (name.to_string(), expr),
            None => (format!("f{position}"), text),
        };
        Ok(Self {
            name,
            expr: Expr::parse(expr)?,
        })
    }
}

/// Most rows the check compares value for value (beyond it, row counts and the first batch).
const CHECK_ALL_ROWS: usize = 20_000_000;

/// The selective rows of every filter of `opts`.
pub(super) fn selective_rows(file: &Path, opts: &BenchOptions, reps: usize, cold: bool, gpu: bool) -> Vec<BenchRow> {
    let mut rows = Vec::new();
    for f in &opts.filters {
        rows.extend(rows_of(file, opts, f, Timing { file, reps, cold }, gpu));
    }
    rows
}

/// How a row is timed: best of `reps` hot runs, and one cold run of `file` where asked.
#[derive(Clone, Copy)]
struct Timing<'a> {
    file: &'a Path,
    reps: usize,
    cold: bool,
}

impl Timing<'_> {
    /// Times `run` into `row` (the cold run only where the page cache can be dropped).
    fn time(&self, row: &mut BenchRow, mut run: impl FnMut() -> Result<()>) -> Result<()> {
        let best = best_of(self.reps, &mut run)?;
        row.hot_s = Some(best.as_secs_f64());
        row.hot_gbps = Some(gbps(row.bytes, best));
        if self.cold && drop_page_cache().is_ok() {
            let d = best_of(1, &mut run)?;
            row.cold_s = Some(d.as_secs_f64());
            row.cold_gbps = Some(gbps(row.bytes, d));
            warm_page_cache(self.file)?;
        }
        Ok(())
    }
}

fn with_note(mut row: BenchRow, note: String) -> BenchRow {
    row.note = Some(match row.note.take() {
        Some(n) => format!("{note}; {n}"),
        None => note,
    });
    row
}

fn rows_of(file: &Path, opts: &BenchOptions, f: &NamedFilter, timing: Timing<'_>, gpu: bool) -> Vec<BenchRow> {
    let label = |what: &str| format!("filter {}: {what}", f.name);
    let filtered = match reader_builder(file, opts).with_filter(f.expr.clone()).build() {
        Ok(r) => r,
        Err(e) => return vec![BenchRow::failed(label("plan"), 0, e.to_string())],
    };
    let pruning = filtered
        .pruning()
        .map(|p| {
            format!(
                "{} of {} row groups and {} of {} pages kept",
                p.row_groups_selected,
                p.row_groups,
                p.pages - p.pages_pruned,
                p.pages
            )
        })
        .unwrap_or_default();
    // The host read in one pass: the check's reference (its raw bytes are the file's, filtered
    // exactly after arrow-rs's decode), and rows of its own, two passes and one, where the other
    // paths are measured.
    let host_reader = |passes: FilterPasses| {
        reader_builder(file, opts)
            .with_filter(f.expr.clone())
            .with_filter_passes(passes)
            .with_decode(Decode::Host)
            .with_backend(crate::config::BackendKind::Host)
            .build()
    };
    let one_pass = host_reader(FilterPasses::One);
    let host = one_pass.as_ref().map_err(|e| e.to_string()).and_then(host_read);
    let mut rows = Vec::new();
    if opts.other_paths {
        for (passes, what) in [
            (FilterPasses::Two, "host batches (arrow-rs), two passes"),
            (FilterPasses::One, "host batches (arrow-rs), one pass"),
        ] {
            rows.push(match host_reader(passes) {
                Ok(reader) => host_row(&label(what), timing, &reader, &host, &pruning),
                Err(e) => BenchRow::failed(label(what), 0, e.to_string()),
            });
        }
    }
    rows.push(matching_pages_row(&label("pages holding matching rows"), &filtered));
    if !gpu {
        return rows;
    }
    // The default (two passes where they save time: cold here, one where hot), then each forced.
    for (passes, what) in [
        (FilterPasses::Auto, "device columns, passes auto (default)"),
        (FilterPasses::Two, "device columns, two passes"),
        (FilterPasses::One, "device columns, one pass"),
    ] {
        let name = label(what);
        match reader_builder(file, opts)
            .with_filter(f.expr.clone())
            .with_filter_passes(passes)
            .build()
        {
            Ok(reader) => rows.push(gpu_row(&name, timing, &reader, &host, &pruning)),
            Err(e) => rows.push(BenchRow::failed(name, 0, e.to_string())),
        }
    }
    // The same columns without the filter: the filtered read must not be slower where most rows match.
    let columns = filtered.plan().columns.clone();
    match reader_builder(file, opts)
        .with_projection(crate::plan::Projection::Leaves(columns))
        .build()
    {
        Ok(plain) => rows.push(gpu_row(
            &label("same columns unfiltered"),
            timing,
            &plain,
            &Err("".into()),
            "",
        )),
        Err(e) => rows.push(BenchRow::failed(label("same columns unfiltered"), 0, e.to_string())),
    }
    rows
}

/// The least a page-level read of `reader`'s projection can fetch: the compressed bytes of the pages
/// (by the OffsetIndex) that hold a row the filter accepts, with their chunks' dictionary pages. The
/// filter's columns are decoded on the host one surviving row group at a time to find those rows.
fn matching_pages_row(name: &str, reader: &Reader) -> BenchRow {
    match matching_page_bytes(reader) {
        Ok((bytes, pages, matched)) => {
            let mut row = BenchRow::blank(name, bytes);
            row.note = Some(format!(
                "{bytes} bytes: the {pages} pages that hold the {matched} accepted rows (no read timed)"
            ));
            row
        }
        Err(e) => BenchRow::failed(name, 0, e.to_string()),
    }
}

/// (bytes, pages, accepted rows) of [`matching_pages_row`].
fn matching_page_bytes(reader: &Reader) -> Result<(u64, u64, u64)> {
    let filter = reader
        .filter()
        .ok_or_else(|| crate::Error::device("bench", "no filter"))?;
    let source = reader.source();
    let meta = source.metadata();
    let index = meta.page_index().ok_or_else(|| crate::Error::InvalidRequest {
        location: source.location(),
        message: "the file has no page index: the pages holding matching rows are unknown".into(),
    })?;
    let (mut bytes, mut pages, mut matched) = (0u64, 0u64, 0u64);
    for &g in &reader.plan().row_groups {
        let table = ReaderBuilder::from_source(source.clone())
            .with_columns(filter.predicate.columns())
            .with_row_groups([g])
            .with_decode(Decode::Host)
            .with_backend(crate::config::BackendKind::Host)
            .build()?
            .read_batches()?
            .concat()?;
        let accepted = filter.predicate.evaluate(&table)?;
        let rows: Vec<u64> = (0..accepted.len())
            .filter(|&i| accepted.is_valid(i) && accepted.value(i))
            .map(|i| i as u64)
            .collect();
        matched += rows.len() as u64;
        if rows.is_empty() {
            continue;
        }
        let group = meta.row_group(g);
        let num_rows = group.num_rows().max(0) as u64;
        for &c in &reader.plan().columns {
            let Some(offsets) = index.offset_index(g, c) else {
                return Err(crate::Error::InvalidRequest {
                    location: source.location(),
                    message: format!("row group {g}, leaf column {c}: no OffsetIndex"),
                });
            };
            let locations = offsets.page_locations();
            let mut any = false;
            for (p, l) in locations.iter().enumerate() {
                let first = l.first_row_index.max(0) as u64;
                let end = locations
                    .get(p + 1)
                    .map_or(num_rows, |n| n.first_row_index.max(0) as u64);
                // `rows` is sorted: is one of them in [first, end)?
                let at = rows.partition_point(|&r| r < first);
                if rows.get(at).is_some_and(|&r| r < end) {
                    bytes += l.compressed_page_size.max(0) as u64;
                    pages += 1;
                    any = true;
                }
            }
            let chunk = group.column(c);
            let start = crate::metadata::chunk_start(chunk).max(0) as u64;
            let first_data = chunk.data_page_offset().max(0) as u64;
            if any && start < first_data {
                bytes += first_data - start;
            }
        }
    }
    Ok((bytes, pages, matched))
}

/// The filtered read on the host: its rows (the check's reference) and the bytes it fetched.
type HostRead = std::result::Result<(arrow::record_batch::RecordBatch, u64), String>;

fn host_read(reader: &Reader) -> HostRead {
    let chunks = reader.read().map_err(|e| e.to_string())?;
    let bytes = chunks.report().total.total_bytes();
    let table = chunks.decode().and_then(|t| t.concat()).map_err(|e| e.to_string())?;
    Ok((table, bytes))
}

fn host_row(name: &str, timing: Timing<'_>, reader: &Reader, host: &HostRead, pruning: &str) -> BenchRow {
    let first = match (host, reader.read_host()) {
        (Err(e), _) => return BenchRow::failed(name, 0, e.clone()),
        (_, Err(e)) => return BenchRow::failed(name, 0, e.to_string()),
        (Ok((want, _)), Ok(read)) => (want, read),
    };
    let (want, read) = first;
    let bytes = read.io.total.total_bytes();
    let mut note = format!("{} rows kept, {bytes} bytes read", read.table.num_rows());
    match read.table.concat() {
        Ok(got) if &got == want => {}
        Ok(_) => note = format!("WRONG VALUES: differs from one pass filtered exactly; {note}"),
        Err(e) => note = format!("{e}; {note}"),
    }
    if let Some(p) = &read.passes {
        note.push_str(&format!(
            "; two passes: {} bytes of the filter's columns, {} of the others' ({} in one pass)",
            p.filter, p.payload, p.payload_one_pass
        ));
    }
    note.push_str(&format!("; {pruning}"));
    drop(read);
    let mut row = BenchRow::blank(name, bytes);
    let res = timing.time(&mut row, || reader.read_host().map(drop));
    match res {
        Ok(()) => with_note(row, note),
        Err(e) => with_note(row, format!("{note}; {e}")),
    }
}

fn gpu_row(name: &str, timing: Timing<'_>, reader: &Reader, host: &HostRead, pruning: &str) -> BenchRow {
    let first = match reader.read_device() {
        Ok(r) => r,
        Err(e) => return BenchRow::failed(name, 0, e.to_string()),
    };
    let bytes = first.io.total.total_bytes();
    let kept = first.table.num_rows();
    let passes = first.decode.filter.as_ref().and_then(|f| f.passes);
    let steps = first.decode.filter.as_ref().map(|f| (f.steps_in_two_passes, f.steps));
    let check = match host {
        Ok((want, _)) => check_against(&first.table, want),
        Err(e) if e.is_empty() => Ok(String::new()),
        Err(e) => Err(format!("no host reference: {e}")),
    };
    drop(first);
    let mut row = BenchRow::blank(name, bytes);
    let res = timing.time(&mut row, || reader.read_device().map(drop));
    let mut note = format!("{kept} rows kept, {bytes} bytes read");
    if let Some((two, all)) = steps {
        note.push_str(&format!("; {two} of {all} steps in two passes"));
    }
    if let Some(p) = passes {
        note.push_str(&format!(
            "; two passes: {} bytes of the filter's columns, {} of the others' ({} in one pass)",
            p.filter, p.payload, p.payload_one_pass
        ));
    }
    if !pruning.is_empty() {
        note.push_str(&format!("; {pruning}"));
    }
    match check {
        Ok(c) if !c.is_empty() => note.push_str(&format!("; {c}")),
        Ok(_) => {}
        Err(e) => note = format!("WRONG VALUES: {e}; {note}"),
    }
    if let Err(e) = res {
        note.push_str(&format!("; {e}"));
    }
    with_note(row, note)
}

/// The GPU's filtered table against the host's: every value up to [`CHECK_ALL_ROWS`] rows, else the
/// row counts and the first batch.
fn check_against(
    got: &crate::decode::table::DeviceTable,
    want: &arrow::record_batch::RecordBatch,
) -> std::result::Result<String, String> {
    if got.num_rows() != want.num_rows() {
        return Err(format!(
            "{} rows on the GPU, {} on the host",
            got.num_rows(),
            want.num_rows()
        ));
    }
    let (got, how) = if want.num_rows() <= CHECK_ALL_ROWS {
        (got.to_host().map_err(|e| e.to_string())?, "every row")
    } else {
        match got.batches.first() {
            Some(b) => (b.to_host().map_err(|e| e.to_string())?, "the first batch"),
            None => return Ok("0 rows".into()),
        }
    };
    let want = want.slice(0, got.num_rows());
    if got.num_columns() != want.num_columns() {
        return Err(format!(
            "{} columns on the GPU, {} on the host",
            got.num_columns(),
            want.num_columns()
        ));
    }
    for i in 0..want.num_columns() {
        if got.column(i).to_data() != want.column(i).to_data() {
            return Err(format!(
                "column {} differs from arrow-rs",
                want.schema().field(i).name()
            ));
        }
    }
    Ok(format!("{how} checked against arrow-rs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_is_named_by_its_prefix_or_its_position() {
        let f = NamedFilter::parse("q6:id < 10 and s is not null", 1).unwrap();
        assert_eq!(f.name, "q6");
        assert_eq!(f.expr, Expr::parse("id < 10 and s is not null").unwrap());
        let f = NamedFilter::parse("ts = '2024-01-01 12:00:00'", 2).unwrap();
        assert_eq!(f.name, "f2");
        assert_eq!(f.expr, Expr::parse("ts = '2024-01-01 12:00:00'").unwrap());
        assert!(NamedFilter::parse("q6:id <", 1).is_err());
    }
}
