//! Phase 3 of a step: every compressed page body gets a place in one output buffer and is decompressed,
//! batched by codec (nvCOMP, our Snappy kernels or the host, as the executor decides); uncompressed
//! bodies are used where they were fetched.

use std::collections::BTreeMap;

use parquet::basic::Compression;

use super::checks::dictionary_encoded;
use super::{LeafRole, Route, StepColumns, StepInput, StringOutput, corrupt};
use crate::decode::exec::{Decompress, DecompressedOn, Executor};
use crate::decode::layout::{encoding, physical};
use crate::error::Result;

/// One page body to decompress: its chunk, its page, and where from and to.
type DecompressJob = (usize, usize, Decompress);

/// Where a page's body and levels are after decompression (all zero for a page not decoded).
pub(super) struct Body {
    pub(super) data: u64,
    pub(super) data_len: u64,
    pub(super) levels: u64,
    pub(super) levels_len: u64,
}

/// The step's page bodies after decompression.
pub(super) struct Decompressed {
    /// Per chunk, per page.
    pub(super) bodies: Vec<Vec<Body>>,
    /// The buffer holding the decompressed bodies of the BYTE_ARRAY columns (0 when none), freed after
    /// the decode kernels.
    pub(super) base: u64,
    /// The buffer holding the other columns' decompressed bodies (0 when none), freed once the fixed-
    /// width kernels have read them, before the strings' characters and views are allocated.
    pub(super) fixed: u64,
    /// Where each GPU column's bodies were decompressed ("gpu (nvCOMP)", "host (`<why>`)", ...).
    pub(super) on: BTreeMap<usize, Vec<String>>,
    /// Per GPU column whose views may point into its pages ([`views_in_copy`]): the buffer holding
    /// its decompressed data pages, and its dictionary pages where [`dictionary_pays_its_keep`]
    /// (address, bytes), apart from `base`, so that it can become the column's data buffer instead of
    /// a copy of its strings.
    pub(super) own: BTreeMap<usize, (u64, u64)>,
}

/// Whether `gp_copy_strings` writes a GPU column's views as it copies its characters, and those views
/// may point into its decompressed data pages (as arrow-rs's views of a plain page point into the
/// page): a view column (not a repeated leaf, whose rows are compacted before their layout is made;
/// not a dictionary-typed column's part) with no DELTA_BYTE_ARRAY page in the step (those values are
/// rebuilt from prefixes by a kernel of their own). Otherwise `gp_strings_to_views` builds its views
/// from its copied characters afterwards.
pub(super) fn views_in_copy(step: &StepColumns, column: usize) -> bool {
    let leaf = &step.gpu[column].1;
    leaf.strings == StringOutput::Views
        && leaf.max_rep == 0
        && leaf.role == LeafRole::Column
        && !step
            .chunks
            .iter()
            .filter(|ch| ch.column == column)
            .flat_map(|ch| &ch.infos)
            .any(|p| matches!(p.page_type, 0 | 3) && p.encoding as u32 == encoding::DELTA_BYTE_ARRAY)
}

/// Whether a view column's chunk (its pages' headers, `infos`) keeps its decompressed dictionary page
/// in its own buffer, so that the views of its dictionary-encoded rows point into it (as arrow-rs's
/// do) instead of each row's string being copied: when the rows are estimated to hold at least twice
/// the page's bytes (entries of average length, each row's copied). A dictionary each of whose
/// entries a row or so uses (TPC-H's `l_comment`: 1 MB a row group, about as many rows as entries)
/// would cost more kept whole than its rows' copies; one of a few entries (`l_shipinstruct`: four,
/// two of them longer than a view holds, for 113,743 rows) costs almost nothing.
pub(super) fn dictionary_pays_its_keep(infos: &[crate::decode::layout::PageInfo]) -> bool {
    let Some(dict) = infos.iter().find(|p| p.page_type == 2) else {
        return false;
    };
    let (entries, bytes) = (dict.num_values.max(0) as u64, dict.uncompressed_size.max(0) as u64);
    if entries == 0 {
        return false;
    }
    let rows: u64 = infos
        .iter()
        .filter(|p| dictionary_encoded(p))
        .map(|p| p.num_values.max(0) as u64)
        .sum();
    // Each entry's bytes beyond its 4-byte length.
    let mean_len = bytes.saturating_sub(4 * entries) / entries;
    rows.saturating_mul(mean_len) >= 2 * bytes
}

/// Whether nothing the step queues after its decompression reads its fetched chunks, so that they can
/// be freed then: no column goes to arrow-rs (which decodes from them), and every body and level the
/// decoders read was decompressed into the step's own buffers (no uncompressed page decoded where it
/// was fetched, no v2 page's levels read there).
pub(super) fn chunks_read_no_more(input: &StepInput<'_>, step: &StepColumns, decompressed: &Decompressed) -> bool {
    let fetched = input.chunk_base..input.chunk_base.saturating_add(input.plan.dest_len);
    let to_host = !step.fallback.is_empty() || input.routes.iter().any(|r| matches!(r.route, Route::Host(_)));
    let reads_fetched =
        |b: &Body| (b.data_len > 0 && fetched.contains(&b.data)) || (b.levels_len > 0 && fetched.contains(&b.levels));
    !to_host && !decompressed.bodies.iter().flatten().any(reads_fetched)
}

/// Decompresses the bodies of the pages the kept GPU columns decode (`keep`, by GPU column).
pub(super) fn decompress_bodies<E: Executor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &StepColumns,
    keep: &[bool],
) -> Result<Decompressed> {
    let source = input.source;
    let gpu = &step.gpu;
    let chunks = &step.chunks;
    let mut bodies: Vec<Vec<Body>> = Vec::with_capacity(chunks.len());
    let mut jobs: BTreeMap<String, (Compression, Vec<DecompressJob>)> = BTreeMap::new();
    // Chunk, page, offset in its column's own buffer, len, and that column (None: the shared buffer,
    // laid out once the own buffers are known).
    let mut out_items: Vec<(usize, usize, u64, u64, Option<usize>)> = Vec::new();
    // The columns whose data pages (and some dictionary pages) get a buffer of their own, and its
    // bytes so far.
    let mut own_total: BTreeMap<usize, u64> = (0..gpu.len())
        .filter(|&c| keep[c] && views_in_copy(step, c))
        .map(|c| (c, 0))
        .collect();
    for (ci, ch) in chunks.iter().enumerate() {
        let mut b = Vec::with_capacity(ch.infos.len());
        for (pi, p) in ch.infos.iter().enumerate() {
            let body = ch.start + p.data_offset;
            let levels_len = if p.page_type == 3 {
                (p.def_levels_byte_length as u64) + (p.rep_levels_byte_length as u64)
            } else {
                0
            };
            let compressed = ch.codec != Compression::UNCOMPRESSED && (p.page_type != 3 || p.is_compressed != 0);
            let in_len = (p.compressed_size as u64).saturating_sub(levels_len);
            // A dictionary-typed column's keys need no dictionary bytes, its values nothing else.
            let unused = match gpu[ch.column].1.role {
                LeafRole::Column => false,
                LeafRole::DictionaryKeys(_) => p.page_type == 2,
                LeafRole::DictionaryValues => p.page_type != 2 && dictionary_encoded(p),
            };
            if !keep[ch.column] || p.page_type == 1 || unused {
                b.push(Body {
                    data: 0,
                    data_len: 0,
                    levels: 0,
                    levels_len: 0,
                });
                continue;
            }
            if compressed {
                let out_len = (p.uncompressed_size as i64) - levels_len as i64;
                if out_len < 0 {
                    return Err(corrupt(
                        source,
                        gpu,
                        ch,
                        Some(pi),
                        &format!(
                            "uncompressed size {} is smaller than its levels ({levels_len} bytes)",
                            p.uncompressed_size
                        ),
                    ));
                }
                if out_len == 0 {
                    // Nothing to decompress (an empty page, or a v2 page of levels only).
                    b.push(Body {
                        data: 0,
                        data_len: 0,
                        levels: body,
                        levels_len,
                    });
                    continue;
                }
                // 64-byte aligned outputs: nvCOMP asks at most that of its output buffers.
                let place = (out_len as u64).div_ceil(64) * 64;
                match own_total.get_mut(&ch.column) {
                    Some(total) if p.page_type != 2 || dictionary_pays_its_keep(&ch.infos) => {
                        out_items.push((ci, pi, *total, out_len as u64, Some(ch.column)));
                        *total += place;
                    }
                    _ => out_items.push((ci, pi, 0, out_len as u64, None)),
                }
                b.push(Body {
                    data: 0,
                    data_len: out_len as u64,
                    levels: body,
                    levels_len,
                });
            } else {
                b.push(Body {
                    data: body + levels_len,
                    data_len: in_len,
                    levels: body,
                    levels_len,
                });
            }
        }
        bodies.push(b);
    }
    // Zeroed (`alloc`), though every body's output is written by its decompressor: compute-sanitizer's
    // initcheck then flags reads of nvCOMP's output (by our kernels and nvCOMP's own) as uninitialized.
    // A view's offset is an i32: a column whose pages pass the 32-bit offsets' limit keeps them in the
    // shared buffer (its strings are then copied, in segments).
    let limit = exec.string_offset_limit();
    let mut own: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for (&c, &total) in &own_total {
        if total > 0 && total <= limit {
            own.insert(c, (exec.alloc(total as usize)?, total));
        }
    }
    // The shared bodies in two buffers: the strings' (read until their characters are copied) and the
    // other columns' (read only by the fixed-width kernels, which run first).
    let is_strings = |ci: usize| gpu[chunks[ci].column].1.physical == physical::BYTE_ARRAY;
    let mut shared_total = [0u64; 2];
    for x in out_items.iter().filter(|x| x.4.is_none_or(|c| !own.contains_key(&c))) {
        shared_total[is_strings(x.0) as usize] += x.3.div_ceil(64) * 64;
    }
    let mut shared_base = [0u64; 2];
    for (base, &total) in shared_base.iter_mut().zip(&shared_total) {
        if total > 0 {
            *base = exec.alloc(total as usize)?;
        }
    }
    let mut shared_at = [0u64; 2];
    for &(ci, pi, off, len, column) in &out_items {
        let ch = &chunks[ci];
        let p = &ch.infos[pi];
        let body = &mut bodies[ci][pi];
        body.data = match column.and_then(|c| own.get(&c)) {
            Some(&(addr, _)) => addr + off,
            None => {
                let k = is_strings(ci) as usize;
                let at = shared_base[k] + shared_at[k];
                shared_at[k] += len.div_ceil(64) * 64;
                at
            }
        };
        let src = ch.start + p.data_offset + body.levels_len;
        let src_len = (p.compressed_size as u64).saturating_sub(body.levels_len);
        jobs.entry(format!("{:?}", ch.codec))
            .or_insert_with(|| (ch.codec, Vec::new()))
            .1
            .push((
                ci,
                pi,
                Decompress {
                    src,
                    src_len: src_len as usize,
                    dst: body.data,
                    dst_len: len as usize,
                },
            ));
    }
    let mut decompressed_on: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (_, (codec, items)) in jobs {
        let batch: Vec<Decompress> = items.iter().map(|x| x.2).collect();
        let (outcomes, on) = exec.decompress(codec, &batch)?;
        let on_s = match on {
            DecompressedOn::Gpu(by) => format!("gpu ({by})"),
            DecompressedOn::Host(why) => format!("host ({why})"),
        };
        for ((ci, pi, d), r) in items.iter().zip(outcomes) {
            let ch = &chunks[*ci];
            match r {
                Ok(n) if n == d.dst_len => {}
                Ok(n) => {
                    return Err(corrupt(
                        source,
                        gpu,
                        ch,
                        Some(*pi),
                        &format!("{codec} page decompressed to {n} bytes, its header says {}", d.dst_len),
                    ));
                }
                Err(why) => {
                    return Err(corrupt(
                        source,
                        gpu,
                        ch,
                        Some(*pi),
                        &format!("{codec} decompression failed: {why}"),
                    ));
                }
            }
            let v = decompressed_on.entry(ch.column).or_default();
            if !v.contains(&on_s) {
                v.push(on_s.clone());
            }
        }
    }
    Ok(Decompressed {
        bodies,
        base: shared_base[1],
        fixed: shared_base[0],
        on: decompressed_on,
        own,
    })
}
