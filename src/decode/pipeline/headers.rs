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

/// Fills every chunk's pages. Where `host_headers` holds every chunk's, they are taken as the host
/// parsed them from the file (no pass, no wait); else one GPU pass into room for as many pages as
/// `hints` expect of each chunk; where a chunk holds more, a count pass, then a fill pass into exact
/// room. (Each pass walks a chunk's headers one after another, a warp's first lane per chunk:
/// 0.41-0.59 ms on a snappy benchmark step.) Returns whether the headers came from the host.
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
    let mut descs: Vec<ChunkDesc> = chunks
        .iter()
        .map(|ch| ChunkDesc {
            start: ch.start,
            len: ch.len,
            ..Default::default()
        })
        .collect();
    let from_host = host_headers.and_then(|h| {
        chunks
            .iter()
            .map(|ch| h.get(&(ch.row_group, gpu[ch.column].1.leaf)))
            .collect::<Option<Vec<&ChunkHeaders>>>()
    });
    if let Some(found) = from_host {
        for (i, h) in found.into_iter().enumerate() {
            let c = ChunkDesc {
                page_count: h.pages.len().min(u32::MAX as usize) as u32,
                error: h.error,
                error_at: h.error_at,
                ..descs[i]
            };
            check_chunk(&c, &chunks[i], gpu, source)?;
            chunks[i].infos = h.pages.clone();
            hints.record(gpu[chunks[i].column].1.leaf, c.page_count, descs[i].len);
        }
        return Ok(true);
    }
    if descs.is_empty() {
        return Ok(false);
    }
    let n = descs.len() as u32;
    let mut total = 0u64;
    for (i, ch) in chunks.iter().enumerate() {
        descs[i].first_page = total.min(u32::MAX as u64) as u32;
        descs[i].page_capacity = hints.expected_pages(gpu[ch.column].1.leaf, descs[i].len);
        total += descs[i].page_capacity as u64;
    }
    let mut one_pass = None;
    if total <= u32::MAX as u64 {
        let d = exec.upload(&descs)?;
        let p = exec.alloc(total as usize * std::mem::size_of::<PageInfo>())?;
        exec.launch(Kernel::PageHeaders { chunks: d, n, pages: p })?;
        let filled: Vec<ChunkDesc> = exec.read(d, descs.len())?;
        let overflow = filled
            .iter()
            .zip(&descs)
            .any(|(c, want)| c.error == ErrorCode::TooManyPages as u32 && c.page_count == want.page_capacity);
        if !overflow {
            let infos: Vec<PageInfo> = exec.read(p, total as usize)?;
            one_pass = Some((filled, infos));
        }
        exec.free(p);
        exec.free(d);
    }
    let (filled, infos) = match one_pass {
        Some(found) => found,
        None => count_then_fill(exec, &mut descs, chunks, gpu, source)?,
    };
    for (i, c) in filled.iter().enumerate() {
        check_chunk(c, &chunks[i], gpu, source)?;
        if c.page_count > descs[i].page_capacity {
            return Err(corrupt(
                source,
                gpu,
                &chunks[i],
                None,
                ErrorCode::TooManyPages.describe(),
            ));
        }
        let first = descs[i].first_page as usize;
        chunks[i].infos = infos[first..first + c.page_count as usize].to_vec();
        hints.record(gpu[chunks[i].column].1.leaf, c.page_count, descs[i].len);
    }
    Ok(false)
}

/// How many pages to expect per byte of each leaf column's chunks, learnt from the steps decoded so far
/// (a reader's steps cut the same columns), so that page headers are parsed in one pass.
#[derive(Debug, Default)]
pub struct PageHints(std::sync::Mutex<BTreeMap<usize, (u64, u64)>>);

impl PageHints {
    /// Room for the pages of a `len`-byte chunk of `leaf`: a quarter more than its column's pages per
    /// byte so far, plus 4; one page per 32 KiB plus 4 for a column not seen yet.
    fn expected_pages(&self, leaf: usize, len: u64) -> u32 {
        let seen = self.0.lock().ok().and_then(|m| m.get(&leaf).copied());
        let pages = match seen {
            Some((pages, bytes)) if bytes > 0 => (len as u128 * pages as u128 * 5 / (bytes as u128 * 4)) as u64,
            _ => len / (32 << 10),
        };
        pages.saturating_add(4).min(u32::MAX as u64) as u32
    }

    /// A `len`-byte chunk of `leaf` held `pages` pages.
    fn record(&self, leaf: usize, pages: u32, len: u64) {
        if let Ok(mut m) = self.0.lock() {
            let e = m.entry(leaf).or_default();
            e.0 = e.0.saturating_add(pages as u64);
            e.1 = e.1.saturating_add(len);
        }
    }
}

/// Page headers in two passes: the count pass, then the fill pass into exact room (`descs` get their
/// places). The chunks' results and every page, laid out as `descs` say.
fn count_then_fill<E: Executor>(
    exec: &mut E,
    descs: &mut [ChunkDesc],
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
    for (i, c) in counted.iter().enumerate() {
        check_chunk(c, &chunks[i], gpu, source)?;
        descs[i].first_page = total as u32;
        descs[i].page_capacity = c.page_count;
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
    for (i, c) in filled.iter().enumerate() {
        if c.error == 0 && c.page_count != descs[i].page_capacity {
            return Err(corrupt(
                source,
                gpu,
                &chunks[i],
                None,
                ErrorCode::TooManyPages.describe(),
            ));
        }
    }
    Ok((filled, infos))
}

/// A chunk's header-pass outcome: an error names the page by its header offset.
fn check_chunk(c: &ChunkDesc, ch: &ChunkPages, gpu: &[(usize, GpuLeaf)], source: &ParquetSource) -> Result<()> {
    if c.error == 0 {
        return Ok(());
    }
    let what = ErrorCode::from_u32(c.error)
        .map(ErrorCode::describe)
        .unwrap_or("an unknown header error");
    Err(corrupt(
        source,
        gpu,
        ch,
        Some(c.page_count as usize),
        &format!("{what} (page header at chunk offset {})", c.error_at),
    ))
}
