//! One file through every I/O path this machine has, hot and cold, with the per-column path counters
//! side by side: the host path, our staged path (pread into pinned buffers, then copies), the staged
//! path with O_DIRECT, and cuFile (nvidia-fs where it is loaded, else cuFile's own POSIX compat mode,
//! or the reason cuFile refused). Each read's bytes are checked against the file (`verify`), and
//! cuFile's reads are checked against cuFile's own statistics.
//!
//! Usage: `cargo run --release --example compare_paths -- FILE [--reps N] [--no-cold] [--columns a,b]`
//! (cold runs drop the page cache, which needs root; without it they are left out, saying why).

use std::time::{Duration, Instant};

use gpu_parquet::io::IoPath;
use gpu_parquet::report::{PathCounts, ReadReport};
use gpu_parquet::{BackendKind, CompatMode, IoPolicy, Reader, Settings};

struct Path {
    label: &'static str,
    backend: BackendKind,
    policy: IoPolicy,
}

/// What one path did: best hot time, the cold time, the last report, or why it could not run.
struct Outcome {
    label: &'static str,
    result: Result<Measured, String>,
}

struct Measured {
    hot: Duration,
    cold: Option<Duration>,
    report: ReadReport,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let file = args
        .iter()
        .enumerate()
        // The one argument that is neither a flag nor a flag's value.
        .find(|(i, a)| !a.starts_with("--") && (*i == 0 || !matches!(args[i - 1].as_str(), "--reps" | "--columns")))
        .map(|(_, a)| a.clone())
        .ok_or("usage: compare_paths FILE [--reps N] [--no-cold] [--columns a,b]")?;
    let reps: usize = value("--reps").map_or(Ok(3), |r| r.parse())?;
    let columns: Option<Vec<String>> = value("--columns").map(|c| c.split(',').map(str::to_string).collect());
    let want_cold = !args.iter().any(|a| a == "--no-cold");

    let settings = Settings::from_env(&[])?;
    let base = settings.policy.clone();
    let paths = [
        Path {
            label: "host",
            backend: BackendKind::Host,
            policy: base.clone(),
        },
        Path {
            label: "staged",
            backend: BackendKind::Staged,
            policy: IoPolicy {
                compat_mode: CompatMode::On,
                ..base.clone()
            },
        },
        Path {
            label: "staged O_DIRECT",
            backend: BackendKind::Staged,
            policy: IoPolicy {
                compat_mode: CompatMode::On,
                direct_io: true,
                ..base.clone()
            },
        },
        Path {
            label: "cuFile",
            backend: BackendKind::Cufile,
            policy: IoPolicy {
                compat_mode: CompatMode::Off,
                ..base.clone()
            },
        },
    ];

    let mut cold_note = None;
    let mut outcomes = Vec::new();
    for p in &paths {
        let result = measure(&file, &settings, p, columns.as_deref(), reps, want_cold, &mut cold_note)
            .map_err(|e| e.to_string());
        outcomes.push(Outcome { label: p.label, result });
    }

    println!(
        "{file}: best of {reps} hot reads per path{}",
        match &cold_note {
            Some(n) => format!("; cold left out: {n}"),
            None if want_cold => ", and one cold read (page cache dropped before it)".to_string(),
            None => String::new(),
        }
    );
    println!();
    println!(
        "{:<16} {:>9} {:>9} {:>9} {:>9}  where the bytes went (backend)",
        "path", "hot ms", "hot GB/s", "cold ms", "cold GB/s"
    );
    for o in &outcomes {
        match &o.result {
            Ok(m) => {
                let bytes = m.report.total.total_bytes();
                let (cold_ms, cold_gbps) = m.cold.map_or(("-".into(), "-".into()), |c| {
                    (format!("{:.1}", ms(c)), format!("{:.2}", gbps(bytes, c)))
                });
                println!(
                    "{:<16} {:>9.1} {:>9.2} {:>9} {:>9}  {} ({})",
                    o.label,
                    ms(m.hot),
                    gbps(bytes, m.hot),
                    cold_ms,
                    cold_gbps,
                    split(&m.report.total),
                    m.report.backend
                );
            }
            Err(e) => println!("{:<16} unavailable: {e}", o.label),
        }
    }

    // Per column: the path counters of each path's last read, side by side.
    let ran: Vec<(&str, &ReadReport)> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok().map(|m| (o.label, &m.report)))
        .collect();
    if let Some((_, first)) = ran.first() {
        println!();
        print!("{:<14}", "column");
        for (label, _) in &ran {
            print!(" | {label:<30}");
        }
        println!();
        for (i, c) in first.columns.iter().enumerate() {
            print!("{:<14}", c.column_path);
            for (_, r) in &ran {
                let cell = r.columns.get(i).map_or("-".to_string(), |c| split(&c.counts));
                print!(" | {cell:<30}");
            }
            println!();
        }
    }

    // cuFile's claim against its own statistics, and why a path was taken.
    for (label, r) in &ran {
        if let Some(check) = &r.cufile_stats_check {
            println!();
            println!(
                "{label}: our counts {} cuFile's statistics",
                if check.agree { "agree with" } else { "DISAGREE with" }
            );
            for d in &check.details {
                println!("  {d}");
            }
        }
        let reasons: std::collections::BTreeSet<&String> = r.columns.iter().flat_map(|c| &c.reasons).collect();
        for why in reasons {
            println!("{label}: {why}");
        }
        if let Some(f) = r.read_sharing.footnote(r.total.total_reads()) {
            println!("{label}: {f}");
        }
        for n in &r.notes {
            println!("{label}: note: {n}");
        }
    }
    Ok(())
}

/// Best of `reps` hot reads, then one cold read when the page cache can be dropped.
fn measure(
    file: &str,
    settings: &Settings,
    p: &Path,
    columns: Option<&[String]>,
    reps: usize,
    want_cold: bool,
    cold_note: &mut Option<String>,
) -> gpu_parquet::Result<Measured> {
    let mut b = Reader::builder(file)
        .with_settings(settings)
        .with_backend(p.backend)
        .with_policy(p.policy.clone());
    if let Some(c) = columns {
        b = b.with_columns(c.iter().cloned());
    }
    let reader = b.build()?;
    // The first read warms the page cache and checks the bytes against the file.
    let first = reader.read()?;
    first.verify()?;
    drop(first);
    let mut hot = Duration::MAX;
    let mut report = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let chunks = reader.read()?;
        hot = hot.min(t.elapsed());
        report = Some(chunks.report().clone());
    }
    let mut cold = None;
    if want_cold && cold_note.is_none() {
        match gpu_parquet::bench::drop_page_cache() {
            Ok(()) => {
                let t = Instant::now();
                let chunks = reader.read()?;
                cold = Some(t.elapsed());
                report = Some(chunks.report().clone());
            }
            Err(e) => *cold_note = Some(e),
        }
    }
    Ok(Measured {
        hot,
        cold,
        report: report.expect("at least one read ran"),
    })
}

/// "123.4 MB staged, 30 reads" per path that moved bytes (a read shared by columns counts for each).
fn split(c: &PathCounts) -> String {
    let parts: Vec<String> = IoPath::ALL
        .iter()
        .filter(|p| c.bytes[p.index()] > 0 || c.reads[p.index()] > 0)
        .map(|p| {
            format!(
                "{} {}, {} reads",
                size(c.bytes[p.index()]),
                p.name(),
                c.reads[p.index()]
            )
        })
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join("; ")
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} kB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64().max(1e-12) / 1e9
}
