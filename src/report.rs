//! Per-column-chunk and per-column counters, built from a plan and a backend's [`IoLog`], and their
//! presentation as an aligned table or JSON.
//!
//! Attribution rules (stated in every report's JSON under `rules`):
//! - bytes: a task's bytes go to the column chunks they belong to, exactly (by overlap); bytes read only
//!   because of coalescing gaps or alignment are `overhead_bytes` of the whole read, not of a column;
//! - reads: a read operation is counted once for every column chunk its task carries bytes of, so a
//!   task shared by two column chunks shows in both (and twice in a column whose two chunks it
//!   carries), while the totals row counts it once; a task carrying only gap or alignment bytes counts
//!   in the totals row alone. The column rows then do not add up to the totals row, and the table says
//!   so under itself ([`ReadSharing`]);
//! - time: a task's interval is apportioned to the column chunks it carries by bytes (a chunk's share
//!   of the task's time is its overlap bytes / the task's bytes), so two columns read by one task get
//!   busy times in proportion to their bytes, not the whole interval each. A column's busy time is the
//!   measure of time weighted by the share of it in flight, capped at 1: where tasks of one column
//!   overlap in time they count once (as KvikIO's busy time); where a column owns whole tasks this is
//!   exactly the union of their intervals. Its throughput is bytes / busy time.

use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::config::Tuning;
use crate::io::{CufileStatsDelta, IoLog, IoPath};
use crate::plan::ReadPlan;

/// Serialises a duration as seconds (f64).
pub use crate::io::ser_secs;

/// Bytes and reads per path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathCounts {
    /// Bytes per path, indexed by [`IoPath::index`].
    #[serde(serialize_with = "ser_per_path")]
    pub bytes: [u64; 4],
    /// Read operations per path.
    #[serde(serialize_with = "ser_per_path")]
    pub reads: [u64; 4],
}

fn ser_per_path<S: Serializer>(v: &[u64; 4], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(4))?;
    for p in IoPath::ALL {
        m.serialize_entry(p.name(), &v[p.index()])?;
    }
    m.end()
}

impl PathCounts {
    /// Total bytes over all paths.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }
    /// Total reads over all paths.
    pub fn total_reads(&self) -> u64 {
        self.reads.iter().sum()
    }
    /// Adds `other`'s bytes and reads, path by path.
    pub(crate) fn add_all(&mut self, other: &PathCounts) {
        for p in IoPath::ALL {
            self.add(p, other.bytes[p.index()], other.reads[p.index()]);
        }
    }
    fn add(&mut self, path: IoPath, bytes: u64, reads: u64) {
        self.bytes[path.index()] += bytes;
        self.reads[path.index()] += reads;
    }
}

/// Counters of one column chunk.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkReport {
    /// Row group.
    pub row_group: usize,
    /// Leaf column index.
    pub column: usize,
    /// Dotted path.
    pub column_path: String,
    /// File byte range start.
    pub offset: u64,
    /// Chunk length.
    pub len: u64,
    /// Bytes and reads by path.
    pub counts: PathCounts,
    /// Busy time: its tasks' intervals, each apportioned by this chunk's share of the task's bytes.
    #[serde(serialize_with = "ser_secs")]
    pub busy: Duration,
}

/// Counters of one column, summed over the row groups read.
#[derive(Debug, Clone, Serialize)]
pub struct ColumnReport {
    /// Leaf column index.
    pub column: usize,
    /// Dotted path.
    pub column_path: String,
    /// Column chunks read (whole or page by page).
    pub chunks: usize,
    /// Bytes and reads by path.
    pub counts: PathCounts,
    /// Busy time: its tasks' intervals, each apportioned by this column's share of the task's bytes.
    #[serde(serialize_with = "ser_secs")]
    pub busy: Duration,
    /// Bytes / busy time, in GB/s (10^9 bytes per second).
    pub gbps: f64,
    /// Every distinct reason given for a path taken by this column's reads.
    pub reasons: Vec<String>,
}

/// The report of one fetch.
#[derive(Debug, Clone, Serialize)]
pub struct ReadReport {
    /// File read.
    pub file: String,
    /// Backend used.
    pub backend: String,
    /// Per column.
    pub columns: Vec<ColumnReport>,
    /// Per column chunk.
    pub chunks: Vec<ChunkReport>,
    /// Totals: every read counted once.
    pub total: PathCounts,
    /// Why the columns' reads do not add up to the totals' reads.
    pub read_sharing: ReadSharing,
    /// Bytes of the needed column chunks.
    pub useful_bytes: u64,
    /// Bytes read beyond them (coalescing gaps, alignment).
    pub overhead_bytes: u64,
    /// Wall time of the fetch.
    #[serde(serialize_with = "ser_secs")]
    pub wall: Duration,
    /// Useful bytes / wall time, GB/s.
    pub gbps: f64,
    /// Backend notes (fallbacks and their reasons).
    pub notes: Vec<String>,
    /// cuFile's own statistics across the fetch, where available.
    pub cufile_stats: Option<CufileStatsDelta>,
    /// Whether our path counters agree with cuFile's statistics (`None` when cuFile was not used).
    pub cufile_stats_check: Option<StatsCheck>,
    /// How bytes, reads and time are attributed.
    pub rules: &'static str,
    /// The reader's developer tuning ([`crate::config::Tuning`]); in the table only where it differs
    /// from the default.
    pub tuning: Tuning,
}

/// The attribution rules, as printed in reports.
pub(crate) const ATTRIBUTION_RULES: &str = "bytes by exact overlap of each read with each column chunk (gap and alignment bytes are overhead); \
a read counts once per column chunk it carries bytes of (the totals count it once; a read of gap bytes only counts in the totals alone); \
a read's time is apportioned to the column chunks it carries by their share of its bytes, and a column's busy time \
is that apportioned time with overlapping reads counted once";

/// How reads are shared between column chunks: the reason the column rows' reads do not add up to the
/// totals row's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadSharing {
    /// Tasks that carried bytes of more than one column chunk.
    pub shared_tasks: u64,
    /// Read operations of those tasks (each counted once).
    pub shared_reads: u64,
    /// Tasks that carried no column chunk's bytes (gap or alignment bytes only).
    pub overhead_only_tasks: u64,
    /// Read operations of those tasks.
    pub overhead_only_reads: u64,
    /// The columns' reads added up: the totals' reads, plus a shared task's reads once more for every
    /// chunk beyond its first, minus the overhead-only tasks' reads.
    pub column_reads_sum: u64,
}

impl ReadSharing {
    /// The footnote explaining the difference, or `None` when every task served exactly one chunk.
    pub fn footnote(&self, total_reads: u64) -> Option<String> {
        if self.shared_tasks == 0 && self.overhead_only_tasks == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if self.shared_tasks > 0 {
            parts.push(format!(
                "{} read task{} ({} read{}) served more than one column chunk; each column counts them once per chunk \
it carries, TOTAL counts each read once",
                self.shared_tasks,
                plural(self.shared_tasks),
                self.shared_reads,
                plural(self.shared_reads)
            ));
        }
        if self.overhead_only_tasks > 0 {
            parts.push(format!(
                "{} read task{} ({} read{}) carried only gap or alignment bytes; only TOTAL counts them",
                self.overhead_only_tasks,
                plural(self.overhead_only_tasks),
                self.overhead_only_reads,
                plural(self.overhead_only_reads)
            ));
        }
        Some(format!(
            "reads: {}; so the columns' reads add up to {}, TOTAL's to {total_reads}",
            parts.join("; "),
            self.column_reads_sum
        ))
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Our per-path counters checked against cuFile's own statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatsCheck {
    /// True when every comparison below holds.
    pub agree: bool,
    /// One line per comparison, e.g. "bytes through cuFile: ours 1000, cuFile 1000".
    pub details: Vec<String>,
}

impl StatsCheck {
    /// Compares bytes and reads we attributed to the cuFile paths with cuFile's statistics: the bytes
    /// must match exactly; reads we counted as `nvfs` need nvfs reads in cuFile's count and reads we
    /// counted as `cufile-compat` need POSIX reads there (cuFile may split one call into several
    /// reads, so read counts are compared as "at least one per call", not equal).
    pub fn new(total: &PathCounts, stats: &CufileStatsDelta) -> Self {
        let ours_bytes = total.bytes[IoPath::Nvfs.index()] + total.bytes[IoPath::CufileCompat.index()];
        let nvfs_calls = total.reads[IoPath::Nvfs.index()];
        let compat_calls = total.reads[IoPath::CufileCompat.index()];
        let checks = [
            (
                ours_bytes == stats.read_bytes,
                format!("bytes through cuFile: ours {ours_bytes}, cuFile {}", stats.read_bytes),
            ),
            (
                (nvfs_calls == 0) == (stats.nvfs_reads == 0) && stats.nvfs_reads >= nvfs_calls,
                format!("nvfs: our calls {nvfs_calls}, cuFile nvfs reads {}", stats.nvfs_reads),
            ),
            (
                (compat_calls == 0) == (stats.posix_reads == 0) && stats.posix_reads >= compat_calls,
                format!(
                    "compat: our calls {compat_calls}, cuFile POSIX reads {}",
                    stats.posix_reads
                ),
            ),
        ];
        Self {
            agree: checks.iter().all(|(ok, _)| *ok),
            details: checks.into_iter().map(|(_, d)| d).collect(),
        }
    }
}

/// One task's interval and the share of it attributed to a column chunk (its bytes / the task's bytes).
#[derive(Debug, Clone, Copy)]
struct Share {
    start: Duration,
    end: Duration,
    /// Overlap bytes.
    num: u64,
    /// Task bytes (not zero).
    den: u64,
}

/// Busy time of shares of intervals: the integral over time of the sum of the shares in flight, capped
/// at 1. With whole shares only, this is the length of the union of the intervals.
fn busy_time(shares: &[Share]) -> Duration {
    // (time, whole intervals starting (+1) or ending (-1), fractional weight starting or ending)
    let mut events: Vec<(Duration, i64, f64)> = Vec::with_capacity(2 * shares.len());
    for s in shares.iter().filter(|s| s.end > s.start && s.num > 0 && s.den > 0) {
        if s.num >= s.den {
            events.push((s.start, 1, 0.0));
            events.push((s.end, -1, 0.0));
        } else {
            let w = s.num as f64 / s.den as f64;
            events.push((s.start, 0, w));
            events.push((s.end, 0, -w));
        }
    }
    events.sort_by_key(|e| e.0);
    // Whole intervals are counted exactly; only fractional weights go through floating point.
    let (mut whole, mut frac) = (0i64, 0.0f64);
    let mut full_nanos: u128 = 0;
    let mut partial_nanos = 0.0f64;
    let mut prev = Duration::ZERO;
    for (t, dw, df) in events {
        let dt = t.saturating_sub(prev).as_nanos();
        if whole > 0 {
            full_nanos += dt;
        } else if frac > 0.0 {
            partial_nanos += dt as f64 * frac.min(1.0);
        }
        whole += dw;
        frac += df;
        if frac < 1e-12 {
            // Rounding left over once every fractional interval has ended.
            frac = frac.max(0.0);
        }
        prev = t;
    }
    let nanos = full_nanos.saturating_add(partial_nanos.round() as u128);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

fn gbps(bytes: u64, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if s > 0.0 { bytes as f64 / s / 1e9 } else { 0.0 }
}

impl ReadReport {
    /// Attributes `log` (from fetching `plan`) to columns and column chunks.
    pub fn build(file: &str, plan: &ReadPlan, log: &IoLog) -> Self {
        let n = plan.chunks.len();
        let mut counts = vec![PathCounts::default(); n];
        let mut intervals: Vec<Vec<Share>> = vec![Vec::new(); n];
        let mut sharing = ReadSharing::default();
        let mut reasons: Vec<Vec<String>> = vec![Vec::new(); n];
        let mut total = PathCounts::default();
        for rec in &log.tasks {
            total.add(rec.path, rec.bytes, rec.reads);
            let Some(task) = plan.tasks.get(rec.task) else {
                // A record of a task the plan does not have carries no column chunk's bytes.
                sharing.overhead_only_tasks += 1;
                sharing.overhead_only_reads += rec.reads;
                continue;
            };
            let mut served = 0u64;
            for ci in task.chunks.clone() {
                let Some(chunk) = plan.chunks.get(ci) else { continue };
                let ov = ReadPlan::overlap(task, chunk);
                if ov.is_empty() {
                    continue;
                }
                served += 1;
                // A failed or partial task moved at most rec.bytes: scale the overlap accordingly.
                let bytes = if rec.bytes >= task.len {
                    ov.end - ov.start
                } else {
                    (ov.end - ov.start).min(rec.bytes)
                };
                counts[ci].add(rec.path, bytes, rec.reads);
                intervals[ci].push(Share {
                    start: rec.start,
                    end: rec.end,
                    num: ov.end - ov.start,
                    den: task.len.max(1),
                });
                if !reasons[ci].iter().any(|r| **r == *rec.reason) {
                    reasons[ci].push(rec.reason.to_string());
                }
            }
            match served {
                0 => {
                    sharing.overhead_only_tasks += 1;
                    sharing.overhead_only_reads += rec.reads;
                }
                1 => {}
                _ => {
                    sharing.shared_tasks += 1;
                    sharing.shared_reads += rec.reads;
                }
            }
        }
        let chunks: Vec<ChunkReport> = plan
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| ChunkReport {
                row_group: c.row_group,
                column: c.column,
                column_path: c.column_path.clone(),
                offset: c.offset,
                len: c.len,
                counts: counts[i],
                busy: busy_time(&intervals[i]),
            })
            .collect();
        let columns: Vec<ColumnReport> = plan
            .columns
            .iter()
            .map(|&col| {
                let mine: Vec<usize> = (0..n).filter(|&i| plan.chunks[i].column == col).collect();
                let mut c = PathCounts::default();
                let mut iv = Vec::new();
                let mut rs: Vec<String> = Vec::new();
                for &i in &mine {
                    for p in IoPath::ALL {
                        c.add(p, counts[i].bytes[p.index()], counts[i].reads[p.index()]);
                    }
                    iv.extend_from_slice(&intervals[i]);
                    for r in &reasons[i] {
                        if !rs.contains(r) {
                            rs.push(r.clone());
                        }
                    }
                }
                let busy = busy_time(&iv);
                ColumnReport {
                    column: col,
                    column_path: plan
                        .chunks
                        .get(mine.first().copied().unwrap_or(usize::MAX))
                        .map(|c| c.column_path.clone())
                        .unwrap_or_default(),
                    // Pieces of a chunk read page by page count once (one chunk per row group).
                    chunks: {
                        let mut groups: Vec<usize> = mine.iter().map(|&i| plan.chunks[i].row_group).collect();
                        groups.sort_unstable();
                        groups.dedup();
                        groups.len()
                    },
                    gbps: gbps(c.total_bytes(), busy),
                    counts: c,
                    busy,
                    reasons: rs,
                }
            })
            .collect();
        sharing.column_reads_sum = columns.iter().map(|c| c.counts.total_reads()).sum();
        let useful = plan.useful_bytes();
        ReadReport {
            file: file.to_string(),
            backend: log.backend.clone(),
            columns,
            chunks,
            overhead_bytes: total.total_bytes().saturating_sub(useful),
            total,
            read_sharing: sharing,
            useful_bytes: useful,
            wall: log.wall,
            gbps: gbps(useful, log.wall),
            notes: log.notes.clone(),
            cufile_stats: log.cufile_stats,
            cufile_stats_check: log.cufile_stats.as_ref().map(|s| StatsCheck::new(&total, s)),
            rules: ATTRIBUTION_RULES,
            tuning: Tuning::default(),
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as an aligned text table: one row per column, then a totals row, then notes.
    pub fn to_table(&self) -> String {
        let paths: Vec<IoPath> = IoPath::ALL
            .into_iter()
            .filter(|p| self.total.bytes[p.index()] > 0 || self.total.reads[p.index()] > 0)
            .collect();
        let mut header = vec!["column".to_string(), "chunks".into()];
        for p in &paths {
            header.push(format!("{p} bytes"));
            header.push(format!("{p} reads"));
        }
        header.extend(["busy ms".into(), "GB/s".into()]);
        let mut rows = vec![header];
        let row = |name: String, chunks: String, c: &PathCounts, busy: Duration, gbps: f64| {
            let mut r = vec![name, chunks];
            for p in &paths {
                r.push(c.bytes[p.index()].to_string());
                r.push(c.reads[p.index()].to_string());
            }
            r.push(format!("{:.3}", busy.as_secs_f64() * 1e3));
            r.push(format!("{gbps:.2}"));
            r
        };
        for c in &self.columns {
            rows.push(row(
                c.column_path.clone(),
                c.chunks.to_string(),
                &c.counts,
                c.busy,
                c.gbps,
            ));
        }
        rows.push(row(
            "TOTAL (wall)".into(),
            self.chunks.len().to_string(),
            &self.total,
            self.wall,
            self.gbps,
        ));
        let mut out = aligned_table(&rows);
        if let Some(f) = self.read_sharing.footnote(self.total.total_reads()) {
            out.push_str(&f);
            out.push('\n');
        }
        if self.read_sharing.shared_tasks > 0 {
            out.push_str(
                "busy: a read task's time is split between the column chunks it served in proportion to their bytes\n",
            );
        }
        out.push_str(&format!(
            "backend {}: {} useful bytes, {} overhead bytes\n",
            self.backend, self.useful_bytes, self.overhead_bytes
        ));
        let mut seen: Vec<&str> = Vec::new();
        for c in &self.columns {
            for r in &c.reasons {
                if !seen.contains(&r.as_str()) {
                    seen.push(r);
                }
            }
        }
        for r in seen {
            out.push_str(&format!("path reason: {r}\n"));
        }
        if let Some(s) = &self.cufile_stats {
            out.push_str(&format!(
                "cuFile statistics: {} reads ({} nvfs, {} posix), {} bytes\n",
                s.total_reads, s.nvfs_reads, s.posix_reads, s.read_bytes
            ));
        }
        if let Some(c) = &self.cufile_stats_check {
            let verdict = if c.agree { "agree" } else { "DISAGREE" };
            out.push_str(&format!(
                "our counters and cuFile's statistics {verdict}: {}\n",
                c.details.join("; ")
            ));
        }
        let tuned = self.tuning.differences();
        if !tuned.is_empty() {
            out.push_str(&format!("tuning: {}\n", tuned.join(", ")));
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// Rows as an aligned text table: the first column left-aligned, the others right-aligned, a rule
/// under the header and above the last row.
pub(crate) fn aligned_table(rows: &[Vec<String>]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let widths: Vec<usize> = (0..first.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                if i == 0 {
                    format!("{cell:<w$}", w = widths[i])
                } else {
                    format!("{cell:>w$}", w = widths[i])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if ri == 0 || ri == rows.len() - 2 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    out
}

// ---- Filter pruning (issue 43): its own section, apart from the I/O path counters above. ----

/// What a filter pruned before any data byte moved ([`crate::filter::prune()`]), per reason. A row
/// group is counted under the first reason that removed it, in the order statistics, bloom filters,
/// dictionaries, page index; pages and bytes are those of the projection's column chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruningReport {
    /// Row groups considered.
    pub row_groups: u64,
    /// Row groups left to read.
    pub row_groups_selected: u64,
    /// Row groups ruled out by their column chunks' statistics (min, max, null count).
    pub row_groups_pruned_by_statistics: u64,
    /// Row groups ruled out by bloom filters (`=` and `in` tests), the statistics having kept them.
    pub row_groups_pruned_by_bloom_filter: u64,
    /// Row groups ruled out by dictionaries (`=` and `in` tests on chunks whose every data page is
    /// dictionary-encoded), statistics and bloom filters having kept them.
    pub row_groups_pruned_by_dictionary: u64,
    /// Row groups of which no page survives the page index.
    pub row_groups_pruned_by_page_index: u64,
    /// Of the row groups kept, those whose every row the statistics prove accepted: read without
    /// evaluating the filter.
    pub row_groups_all_accepted: u64,
    /// Rows of the row groups considered.
    pub rows: u64,
    /// Rows in the surviving row ranges (an upper bound of the rows the filter accepts).
    pub rows_selected: u64,
    /// Data pages (per the OffsetIndex) of the projection's chunks in the surviving row groups.
    pub pages: u64,
    /// Of those, pages holding no surviving row.
    pub pages_pruned: u64,
    /// Compressed bytes of the projection's column chunks over the row groups considered.
    pub bytes: u64,
    /// Of those, bytes in pruned row groups and pruned pages.
    pub bytes_avoided: u64,
    /// Per filter column, what its tests ruled out.
    pub columns: Vec<ColumnPruningReport>,
    /// What a host read fetches of the surviving row groups, page by page; `None` where the read
    /// fetches their chunks whole (the GPU decode).
    pub page_io: Option<PageIoReport>,
}

/// Page-level I/O of a filtered read: of the surviving row groups' chunks, the pages and bytes the
/// plan fetches (so the I/O report's bytes), per column of the projection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PageIoReport {
    /// Per leaf column of the projection, in schema order.
    pub columns: Vec<ColumnPageIo>,
    /// Chunks of row groups read page by page that were fetched whole, and why.
    pub whole_chunks: Vec<crate::plan::WholeChunk>,
}

/// One column's page-level I/O.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ColumnPageIo {
    /// Dotted column path.
    pub column: String,
    /// Its chunks in the surviving row groups.
    pub chunks: u64,
    /// Of those, chunks read page by page.
    pub chunks_paged: u64,
    /// Data pages of the chunks read page by page (per their OffsetIndex).
    pub pages: u64,
    /// Of those, pages fetched.
    pub pages_fetched: u64,
    /// Bytes of its chunks in the surviving row groups.
    pub chunk_bytes: u64,
    /// Bytes fetched (dictionary pages, surviving data pages, whole chunks).
    pub bytes_fetched: u64,
    /// `chunk_bytes - bytes_fetched`: what page-level I/O did not read.
    pub bytes_avoided: u64,
}

impl PageIoReport {
    /// What `plan` fetches, page by page where it can.
    pub fn of(plan: &ReadPlan) -> Self {
        let mut columns: Vec<ColumnPageIo> = Vec::with_capacity(plan.columns.len());
        for &col in &plan.columns {
            let mut c = ColumnPageIo::default();
            // A chunk's pieces, counted once per chunk by its file range.
            let mut seen: Vec<(usize, u64)> = Vec::new();
            for k in plan.chunks.iter().filter(|k| k.column == col) {
                c.column.clone_from(&k.column_path);
                c.bytes_fetched += k.len;
                let (start, len, paged) = match &k.pages {
                    Some(run) => {
                        c.pages_fetched += run.pages.len() as u64;
                        (run.chunk.start, run.chunk.end - run.chunk.start, Some(run.chunk_pages))
                    }
                    None => (k.offset, k.len, None),
                };
                if !seen.contains(&(k.row_group, start)) {
                    seen.push((k.row_group, start));
                    c.chunks += 1;
                    c.chunk_bytes += len;
                    if let Some(pages) = paged {
                        c.chunks_paged += 1;
                        c.pages += pages as u64;
                    }
                }
            }
            c.bytes_avoided = c.chunk_bytes.saturating_sub(c.bytes_fetched);
            columns.push(c);
        }
        Self {
            columns,
            whole_chunks: plan.whole_chunks.clone(),
        }
    }

    /// Bytes not read, all columns.
    pub fn bytes_avoided(&self) -> u64 {
        self.columns.iter().map(|c| c.bytes_avoided).sum()
    }
}

/// What one filter column's tests ruled out (a test may rule a row group or page out while another
/// branch of an `or` keeps it, so these need not add up to the totals).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ColumnPruningReport {
    /// The column.
    pub column: String,
    /// Row groups its statistics ruled out.
    pub row_groups_pruned_by_statistics: u64,
    /// Row groups its bloom filter ruled out.
    pub row_groups_pruned_by_bloom_filter: u64,
    /// Bloom filters read.
    pub bloom_filters_read: u64,
    /// Row groups its dictionary ruled out.
    pub row_groups_pruned_by_dictionary: u64,
    /// Dictionary pages read.
    pub dictionary_pages_read: u64,
    /// Pages its ColumnIndex ruled out.
    pub pages_pruned_by_page_index: u64,
    /// Column chunks with no ColumnIndex (none, or offsets only) in the row groups the page index
    /// was consulted for: no page pruning from this column there.
    pub chunks_without_column_index: u64,
}

impl PruningReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as text: a summary line, then one row per filter column.
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "pruning: {} of {} row groups kept (pruned: {} by statistics, {} by bloom filters, {} by dictionaries, {} by page index); {} of {} pages pruned; {} of {} rows and {} of {} bytes avoided\n",
            self.row_groups_selected,
            self.row_groups,
            self.row_groups_pruned_by_statistics,
            self.row_groups_pruned_by_bloom_filter,
            self.row_groups_pruned_by_dictionary,
            self.row_groups_pruned_by_page_index,
            self.pages_pruned,
            self.pages,
            self.rows - self.rows_selected.min(self.rows),
            self.rows,
            self.bytes_avoided,
            self.bytes,
        );
        if self.row_groups_all_accepted > 0 {
            out.push_str(&format!(
                "pruning: {} of the kept row groups accepted whole by their statistics (no filter evaluated)\n",
                self.row_groups_all_accepted
            ));
        }
        let mut rows = vec![vec![
            "filter column".to_string(),
            "row groups pruned (statistics)".into(),
            "(bloom)".into(),
            "bloom filters read".into(),
            "(dictionary)".into(),
            "dictionaries read".into(),
            "pages pruned (page index)".into(),
            "chunks without column index".into(),
        ]];
        for c in &self.columns {
            rows.push(vec![
                c.column.clone(),
                c.row_groups_pruned_by_statistics.to_string(),
                c.row_groups_pruned_by_bloom_filter.to_string(),
                c.bloom_filters_read.to_string(),
                c.row_groups_pruned_by_dictionary.to_string(),
                c.dictionary_pages_read.to_string(),
                c.pages_pruned_by_page_index.to_string(),
                c.chunks_without_column_index.to_string(),
            ]);
        }
        let sum = |f: fn(&ColumnPruningReport) -> u64| self.columns.iter().map(f).sum::<u64>().to_string();
        rows.push(vec![
            "TOTAL (per test)".into(),
            sum(|c| c.row_groups_pruned_by_statistics),
            sum(|c| c.row_groups_pruned_by_bloom_filter),
            sum(|c| c.bloom_filters_read),
            sum(|c| c.row_groups_pruned_by_dictionary),
            sum(|c| c.dictionary_pages_read),
            sum(|c| c.pages_pruned_by_page_index),
            sum(|c| c.chunks_without_column_index),
        ]);
        out.push_str(&aligned_table(&rows));
        match &self.page_io {
            Some(io) => {
                let sum = |f: fn(&ColumnPageIo) -> u64| io.columns.iter().map(f).sum::<u64>();
                out.push_str(&format!(
                    "page-level I/O: {} of {} pages fetched in {} of {} chunks read page by page; {} of {} bytes fetched, {} avoided\n",
                    sum(|c| c.pages_fetched),
                    sum(|c| c.pages),
                    sum(|c| c.chunks_paged),
                    sum(|c| c.chunks),
                    sum(|c| c.bytes_fetched),
                    sum(|c| c.chunk_bytes),
                    sum(|c| c.bytes_avoided),
                ));
                let mut rows = vec![vec![
                    "column".to_string(),
                    "pages fetched".into(),
                    "of".into(),
                    "bytes fetched".into(),
                    "bytes avoided".into(),
                ]];
                for c in &io.columns {
                    rows.push(vec![
                        c.column.clone(),
                        c.pages_fetched.to_string(),
                        c.pages.to_string(),
                        c.bytes_fetched.to_string(),
                        c.bytes_avoided.to_string(),
                    ]);
                }
                out.push_str(&aligned_table(&rows));
                for w in &io.whole_chunks {
                    out.push_str(&format!(
                        "read whole: row group {}, column {}: {}\n",
                        w.row_group, w.column_path, w.reason
                    ));
                }
            }
            None => out.push_str("page-level I/O: none (the surviving row groups' chunks are read whole)\n"),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(path: IoPath, bytes: u64, reads: u64) -> PathCounts {
        let mut c = PathCounts::default();
        c.add(path, bytes, reads);
        c
    }

    fn delta(nvfs: u64, posix: u64, bytes: u64) -> CufileStatsDelta {
        CufileStatsDelta {
            total_reads: nvfs + posix,
            nvfs_reads: nvfs,
            posix_reads: posix,
            read_bytes: bytes,
        }
    }

    #[test]
    fn compat_reads_agree_with_posix_statistics() {
        let c = StatsCheck::new(&counts(IoPath::CufileCompat, 4096, 2), &delta(0, 5, 4096));
        assert!(c.agree, "{:?}", c.details);
    }

    #[test]
    fn nvfs_claim_without_nvfs_reads_disagrees() {
        let c = StatsCheck::new(&counts(IoPath::Nvfs, 4096, 2), &delta(0, 2, 4096));
        assert!(!c.agree);
    }

    #[test]
    fn byte_mismatch_disagrees() {
        let c = StatsCheck::new(&counts(IoPath::CufileCompat, 4096, 1), &delta(0, 1, 4095));
        assert!(!c.agree);
        assert!(c.details[0].contains("4095"));
    }

    #[test]
    fn posix_reads_unaccounted_for_disagree() {
        // cuFile read through POSIX, but we attributed nothing to compat: someone mislabelled a path.
        let c = StatsCheck::new(&counts(IoPath::Staged, 4096, 1), &delta(0, 1, 0));
        assert!(!c.agree);
    }

    fn share(start_ms: u64, end_ms: u64, num: u64, den: u64) -> Share {
        Share {
            start: Duration::from_millis(start_ms),
            end: Duration::from_millis(end_ms),
            num,
            den,
        }
    }

    #[test]
    fn busy_time_counts_overlap_once() {
        let whole = |s, e| share(s, e, 1, 1);
        assert_eq!(
            busy_time(&[whole(0, 10), whole(5, 15), whole(20, 25)]),
            Duration::from_millis(20)
        );
        assert_eq!(busy_time(&[]), Duration::ZERO);
    }

    #[test]
    fn busy_time_apportions_shared_tasks_by_bytes() {
        // A quarter of a 100 ms task: 25 ms.
        assert_eq!(busy_time(&[share(0, 100, 1, 4)]), Duration::from_millis(25));
        // Two chunks of one column in the same task: their shares add up.
        assert_eq!(
            busy_time(&[share(0, 100, 1, 4), share(0, 100, 2, 4)]),
            Duration::from_millis(75)
        );
        // Overlapping shares are capped at the whole interval: busy time never exceeds wall time.
        assert_eq!(
            busy_time(&[share(0, 100, 3, 4), share(0, 100, 3, 4)]),
            Duration::from_millis(100)
        );
        // A whole task overlapping a shared one: 0..50 whole, 50..100 at a half.
        assert_eq!(
            busy_time(&[share(0, 50, 1, 1), share(20, 100, 1, 2)]),
            Duration::from_millis(75)
        );
        // Degenerate input does not panic and counts nothing.
        assert_eq!(
            busy_time(&[share(10, 5, 1, 1), share(0, 10, 0, 1), share(0, 10, 1, 0)]),
            Duration::ZERO
        );
    }

    #[test]
    fn footnote_only_when_reads_are_shared_or_overhead_only() {
        assert_eq!(ReadSharing::default().footnote(3), None);
        let s = ReadSharing {
            shared_tasks: 1,
            shared_reads: 1,
            overhead_only_tasks: 0,
            overhead_only_reads: 0,
            column_reads_sum: 2,
        };
        let f = s.footnote(1).unwrap_or_default();
        assert!(
            f.contains("1 read task (1 read) served more than one column chunk"),
            "{f}"
        );
        assert!(f.contains("add up to 2, TOTAL's to 1"), "{f}");
    }
}
