//! Phase 1 of a step: every GPU chunk's page headers, as the host parsed them ahead of the decoders or
//! parsed on the GPU (`page_headers.cu`), each chunk's outcome checked.

use std::collections::BTreeMap;

use super::{ChunkPages, GpuLeaf, StepColumns, StepInput, corrupt};
use crate::decode::exec::{Executor, Kernel};
use crate::decode::host_headers::HostHeaders;
use crate::decode::host_kernels::page_headers::ChunkHeaders;
use crate::decode::layout::{ChunkDesc, ErrorCode, PageInfo};
use crate::error::{Error, Result};
use crate::metadata::ParquetSource;
use crate::plan::PageSpan;

/// Fills every chunk's pages. Where `host_headers` holds every piece's, they are taken as the host
/// parsed them from the file (no pass, no wait); else one GPU pass into room for as many pages as
/// `hints` expect of each piece; where a piece holds more, a count pass, then a fill pass into exact
/// room. (Each pass walks a piece's headers one after another, a warp's first lane per piece:
/// 0.41-0.59 ms on a snappy benchmark step.) A chunk read whole is one piece; a chunk read page by
/// page has its pieces' pages one after another, each piece checked against the OffsetIndex that
/// planned it. Returns whether the headers came from the host.
pub(super) fn read_page_headers<E: Executor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &mut StepColumns,
    hints: &PageHints,
    host_headers: Option<&HostHeaders>,
) -> Result<bool> {
    let source = input.source;
    let gpu = &step.gpu;
    let chunks = &mut step.chunks;
    // Every piece of every chunk, in order: (chunk, piece).
    let pieces: Vec<(usize, usize)> = chunks
        .iter()
        .enumerate()
        .flat_map(|(i, ch)| (0..ch.pieces.len()).map(move |k| (i, k)))
        .collect();
    let mut descs: Vec<ChunkDesc> = pieces
        .iter()
        .map(|&(i, k)| {
            let (at, piece) = &chunks[i].pieces[k];
            ChunkDesc {
                start: chunks[i].start + at,
                len: piece.len,
                ..Default::default()
            }
        })
        .collect();
    let from_host = host_headers.and_then(|h| {
        pieces
            .iter()
            .map(|&(i, k)| {
                h.get(&(
                    chunks[i].row_group,
                    chunks[i].pieces[k].1.column,
                    chunks[i].pieces[k].1.offset,
                ))
            })
            .collect::<Option<Vec<&ChunkHeaders>>>()
    });
    let on_host = from_host.is_some();
    let found: Vec<(ChunkDesc, Vec<PageInfo>)> = if let Some(found) = from_host {
        found
            .into_iter()
            .zip(&descs)
            .map(|(h, d)| {
                let c = ChunkDesc {
                    page_count: h.pages.len().min(u32::MAX as usize) as u32,
                    error: h.error,
                    error_at: h.error_at,
                    ..*d
                };
                (c, h.pages.clone())
            })
            .collect()
    } else if descs.is_empty() {
        Vec::new()
    } else {
        gpu_pass(exec, &mut descs, &pieces, chunks, gpu, source, hints)?
    };
    let mut before = 0; // pages of the chunk's earlier pieces
    // Pages and bytes of each leaf's pieces, for the hints: recorded once for the step, not under the
    // hints' lock a piece at a time while the other held steps' threads take it for theirs.
    let mut learnt = LeafPages::new();
    for (j, (c, infos)) in found.into_iter().enumerate() {
        let (i, k) = pieces[j];
        if k == 0 {
            before = 0;
        }
        let ch = &chunks[i];
        check_chunk(&c, ch, k, before, gpu, source)?;
        let (at, piece) = &ch.pieces[k];
        let data: Vec<PageSpan> = infos
            .iter()
            .filter(|p| matches!(p.page_type, 0 | 3))
            .map(|p| PageSpan {
                start: p.header_offset,
                end: p.data_offset.saturating_add(p.compressed_size.max(0) as u64),
                num_values: p.num_values as i64,
            })
            .collect();
        if let Err(why) = piece.check_pages(source.metadata(), &data) {
            return Err(corrupt(
                source,
                gpu,
                ch,
                None,
                &format!("the OffsetIndex does not match the chunk's pages: {why}"),
            ));
        }
        add_pages(&mut learnt, gpu[ch.column].1.leaf, c.page_count as u64, descs[j].len);
        before += infos.len();
        let at = *at;
        chunks[i].infos.extend(infos.into_iter().map(|mut p| {
            p.header_offset += at;
            p.data_offset += at;
            p
        }));
    }
    hints.record(learnt);
    Ok(on_host)
}

/// The GPU's header pass over the pieces `descs` (of `chunks`, as `pieces` says): each piece's
/// outcome and pages, offsets from the piece's first byte.
fn gpu_pass<E: Executor>(
    exec: &mut E,
    descs: &mut [ChunkDesc],
    pieces: &[(usize, usize)],
    chunks: &[ChunkPages],
    gpu: &[(usize, GpuLeaf)],
    source: &ParquetSource,
    hints: &PageHints,
) -> Result<Vec<(ChunkDesc, Vec<PageInfo>)>> {
    let n = descs.len() as u32;
    let mut total = 0u64;
    let seen = hints.snapshot();
    for (j, &(i, k)) in pieces.iter().enumerate() {
        descs[j].first_page = total.min(u32::MAX as u64) as u32;
        let hinted = PageHints::expected_pages(&seen, gpu[chunks[i].column].1.leaf, descs[j].len);
        // Pages of real chunks take 64 bytes or more: an index claiming more pages than that (a
        // crafted one) gets no room beyond it, and its chunk takes the count and fill passes.
        let most = u32::try_from(descs[j].len / 64 + 4).unwrap_or(u32::MAX);
        let indexed = indexed_pages(source, &chunks[i].pieces[k].1).map_or(0, |p| p.saturating_add(1).min(most));
        descs[j].page_capacity = hinted.max(indexed);
        total += descs[j].page_capacity as u64;
    }
    let mut one_pass = None;
    if total <= u32::MAX as u64 {
        let began = std::time::Instant::now();
        let d = exec.upload(descs)?;
        let p = exec.alloc(total as usize * std::mem::size_of::<PageInfo>())?;
        exec.launch(Kernel::PageHeaders { chunks: d, n, pages: p })?;
        let launched = began.elapsed();
        let filled: Vec<ChunkDesc> = exec.read(d, descs.len())?;
        let first_read = began.elapsed();
        let overflow = filled
            .iter()
            .zip(descs.iter())
            .any(|(c, want)| c.error == ErrorCode::TooManyPages as u32 && c.page_count == want.page_capacity);
        if !overflow {
            let infos: Vec<PageInfo> = exec.read(p, total as usize)?;
            one_pass = Some((filled, infos));
        }
        exec.free(p);
        exec.free(d);
        if crate::trace::enabled() {
            use crate::trace::ms;
            eprintln!(
                "trace header pass: {n} pieces, {total} pages' room: queued in {:.2} ms, first read back at {:.2} ms, \
                 pages read back and freed at {:.2} ms",
                ms(launched),
                ms(first_read),
                ms(began.elapsed())
            );
        }
    }
    let (filled, infos) = match one_pass {
        Some(found) => found,
        None => count_then_fill(exec, descs, pieces, chunks, gpu, source)?,
    };
    let mut out = Vec::with_capacity(filled.len());
    for (j, c) in filled.into_iter().enumerate() {
        let (i, k) = pieces[j];
        if c.error == 0 && c.page_count > descs[j].page_capacity {
            return Err(corrupt(
                source,
                gpu,
                &chunks[i],
                None,
                &format!("{} (piece {k})", ErrorCode::TooManyPages.describe()),
            ));
        }
        let first = descs[j].first_page as usize;
        let count = c.page_count.min(descs[j].page_capacity) as usize;
        let pages = infos.get(first..first + count).unwrap_or_default().to_vec();
        out.push((c, pages));
    }
    Ok(out)
}

/// The data pages of a piece as its chunk's OffsetIndex lists them, where the file has one: room for
/// those and a dictionary page makes one header pass enough where the hints, learnt per byte, fall
/// short. TPC-H lineitem's chunks of 1- to 6-bit indices (17 to 84 KiB at SF1: six data pages of
/// 20,000 rows and a dictionary) got room for 4 to 6 pages from one page per 32 KiB, so a step
/// decoded before any other had finished (every held step of a decode alone) walked its headers
/// three times: a pass, a count pass and a fill pass. The kernel still counts what it finds: an
/// index that undercounts takes the two passes, one that overcounts only leaves room unused.
fn indexed_pages(source: &ParquetSource, piece: &crate::plan::ChunkRange) -> Option<u32> {
    let data = match &piece.pages {
        Some(run) => run.pages.len(),
        None => source
            .metadata()
            .page_index()?
            .offset_index(piece.row_group, piece.column)?
            .page_locations()
            .len(),
    };
    u32::try_from(data).ok()
}

/// How many pages to expect per byte of each leaf column's chunks, learnt from the steps decoded so far
/// (a reader's steps cut the same columns), so that page headers are parsed in one pass.
#[derive(Debug, Default)]
pub struct PageHints(std::sync::Mutex<LeafPages>);

/// Pages and bytes seen of each leaf column's chunks, by leaf.
type LeafPages = BTreeMap<usize, (u64, u64)>;

/// Counts `pages` in `bytes` more for `leaf`.
fn add_pages(seen: &mut LeafPages, leaf: usize, pages: u64, bytes: u64) {
    let e = seen.entry(leaf).or_default();
    e.0 = e.0.saturating_add(pages);
    e.1 = e.1.saturating_add(bytes);
}

impl PageHints {
    /// Each leaf's pages and bytes seen so far.
    fn snapshot(&self) -> LeafPages {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Room for the pages of a `len`-byte chunk of `leaf`, given what was `seen` ([`Self::snapshot`]): a
    /// quarter more than its column's pages per byte so far, plus 4; one page per 32 KiB plus 4 for a
    /// column not seen yet.
    fn expected_pages(seen: &LeafPages, leaf: usize, len: u64) -> u32 {
        let pages = match seen.get(&leaf).copied() {
            Some((pages, bytes)) if bytes > 0 => (len as u128 * pages as u128 * 5 / (bytes as u128 * 4)) as u64,
            _ => len / (32 << 10),
        };
        pages.saturating_add(4).min(u32::MAX as u64) as u32
    }

    /// A step's chunks of each leaf held these pages in these bytes: `(leaf, (pages, bytes))`.
    fn record(&self, learnt: LeafPages) {
        if let Ok(mut m) = self.0.lock() {
            for (leaf, (pages, bytes)) in learnt {
                add_pages(&mut m, leaf, pages, bytes);
            }
        }
    }
}

/// Page headers in two passes: the count pass, then the fill pass into exact room (`descs` get their
/// places). The pieces' results and every page, laid out as `descs` say.
fn count_then_fill<E: Executor>(
    exec: &mut E,
    descs: &mut [ChunkDesc],
    pieces: &[(usize, usize)],
    chunks: &[ChunkPages],
    gpu: &[(usize, GpuLeaf)],
    source: &ParquetSource,
) -> Result<(Vec<ChunkDesc>, Vec<PageInfo>)> {
    let n = descs.len() as u32;
    for d in descs.iter_mut() {
        d.first_page = 0;
        d.page_capacity = 0;
    }
    let d = exec.upload(descs)?;
    exec.launch(Kernel::PageHeaders { chunks: d, n, pages: 0 })?;
    let counted: Vec<ChunkDesc> = exec.read(d, descs.len())?;
    let mut total = 0u64;
    for (j, c) in counted.iter().enumerate() {
        let (i, k) = pieces[j];
        check_chunk(c, &chunks[i], k, 0, gpu, source)?;
        descs[j].first_page = total as u32;
        descs[j].page_capacity = c.page_count;
        total += c.page_count as u64;
    }
    if total > u32::MAX as u64 {
        return Err(Error::invalid_metadata(
            source.location(),
            format!("{total} pages in one step"),
        ));
    }
    exec.write(d, descs)?;
    let p = exec.alloc(total as usize * std::mem::size_of::<PageInfo>())?;
    exec.launch(Kernel::PageHeaders { chunks: d, n, pages: p })?;
    let filled: Vec<ChunkDesc> = exec.read(d, descs.len())?;
    let infos: Vec<PageInfo> = exec.read(p, total as usize)?;
    exec.free(p);
    exec.free(d);
    for (j, c) in filled.iter().enumerate() {
        if c.error == 0 && c.page_count != descs[j].page_capacity {
            return Err(corrupt(
                source,
                gpu,
                &chunks[pieces[j].0],
                None,
                ErrorCode::TooManyPages.describe(),
            ));
        }
    }
    Ok((filled, infos))
}

/// A piece's header-pass outcome (piece `k` of `ch`, after `before` pages of its earlier pieces): an
/// error names the page by its index among the chunk's fetched pages and its header's offset in the
/// chunk.
fn check_chunk(
    c: &ChunkDesc,
    ch: &ChunkPages,
    k: usize,
    before: usize,
    gpu: &[(usize, GpuLeaf)],
    source: &ParquetSource,
) -> Result<()> {
    if c.error == 0 {
        return Ok(());
    }
    let what = ErrorCode::from_u32(c.error)
        .map(ErrorCode::describe)
        .unwrap_or("an unknown header error");
    // The piece's offset in its chunk, in the file.
    let piece = &ch.pieces[k].1;
    let skipped = piece
        .pages
        .as_ref()
        .map_or(0, |r| piece.offset.saturating_sub(r.chunk.start));
    Err(corrupt(
        source,
        gpu,
        ch,
        Some(before + c.page_count as usize),
        &format!("{what} (page header at chunk offset {})", skipped + c.error_at),
    ))
}
