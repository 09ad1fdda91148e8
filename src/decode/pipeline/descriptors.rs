//! Phase 4 of a step: the kernels' descriptors. Per kept GPU column a [`ColumnDesc`] with its output
//! buffers; per page a [`PageDesc`] (a dictionary-typed column's dictionary page as a plain page of its
//! values column), per BYTE_ARRAY dictionary a [`DictDesc`], and the repeated columns' repetition
//! level jobs.

use std::collections::BTreeMap;

use super::checks::{Checked, dictionary_encoded, fixed_delta_byte_array};
use super::decompress::Body;
use super::{LeafRole, PageOrigin, StepColumns, StepInput, corrupt, offset_width, rep_level_job};
use crate::decode::exec::Executor;
use crate::decode::host_kernels::nested::LevelJob;
use crate::decode::layout::{
    ColumnDesc, DictDesc, DictEntry, PAGE_V1_LEVELS, PAGE_V1_REP_LEVELS, PageDesc, encoding, physical,
};
use crate::error::Result;

/// The step's descriptors and the device buffers they point to.
pub(super) struct Descriptors {
    /// The GPU columns decoded on the GPU (indices into the step's GPU columns), in `cols` order.
    pub(super) kept: Vec<usize>,
    /// One per kept column.
    pub(super) cols: Vec<ColumnDesc>,
    /// Repetition levels, a byte an entry, of the repeated GPU columns; by GPU column.
    pub(super) rep_levels: BTreeMap<usize, u64>,
    /// Repetition level jobs, each with its page's index in `pages`.
    pub(super) rep_jobs: Vec<(LevelJob, usize)>,
    /// Data pages (and dictionary-typed columns' dictionary pages), by column then row group.
    pub(super) pages: Vec<PageDesc>,
    /// Where each of `pages` came from, for errors.
    pub(super) origins: Vec<PageOrigin>,
    /// BYTE_ARRAY dictionaries, indexed by `gp_dict_index`.
    pub(super) dicts: Vec<DictDesc>,
    /// Where each of `dicts` came from.
    pub(super) dict_origins: Vec<PageOrigin>,
    /// Identity dictionaries of dictionary-typed columns' keys, freed after the kernels.
    pub(super) identities: Vec<u64>,
    /// The one allocation holding every entry table of `dicts` (0: none), freed after the kernels.
    pub(super) dict_entries: u64,
}

/// Allocates every kept column's outputs and describes every page the kernels decode.
pub(super) fn describe<E: Executor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &StepColumns,
    checked: &Checked,
    bodies: &[Vec<Body>],
) -> Result<Descriptors> {
    let source = input.source;
    let gpu = &step.gpu;
    let chunks = &step.chunks;
    let kept: Vec<usize> = (0..gpu.len()).filter(|&i| checked.keep[i]).collect();
    let mut col_of_gpu = vec![u32::MAX; gpu.len()];
    let mut cols: Vec<ColumnDesc> = Vec::with_capacity(kept.len());
    let mut rep_levels: BTreeMap<usize, u64> = BTreeMap::new();
    let mut rep_jobs: Vec<(LevelJob, usize)> = Vec::new();
    for (k, &gi) in kept.iter().enumerate() {
        col_of_gpu[gi] = k as u32;
        let leaf = &gpu[gi].1;
        let values_role = leaf.role == LeafRole::DictionaryValues;
        // A dictionary's values are as many as its chunks' dictionary entries; any other column has
        // its level entries (its rows, or more where it repeats).
        let column_rows = if values_role {
            checked.dictionary_entries_of[gi]
        } else {
            checked.entries_of[gi]
        };
        let n = column_rows as usize;
        let needs_dense = chunks
            .iter()
            .filter(|c| c.column == gi)
            .flat_map(|c| &c.infos)
            .any(|p| {
                let e = p.encoding as u32;
                (p.page_type == 0 || p.page_type == 3)
                    && e != encoding::PLAIN
                    && !(values_role && dictionary_encoded(p))
            });
        let dense_width = leaf.type_len.max(4);
        let mut c = ColumnDesc {
            num_rows: column_rows,
            dense_width,
            out_width: if leaf.physical == physical::BYTE_ARRAY {
                offset_width(leaf)
            } else {
                leaf.type_len
            },
            physical: leaf.physical,
            ..Default::default()
        };
        // Not zeroed: gp_levels writes vidx and out_valid for every row, the values kernels every
        // row of out_values (zeros for a null) and out_offsets up to num_rows, and the value kernels
        // dense, str_src and str_len for every present value of a page they leave without error,
        // the only entries read after them (the host executor poisons these buffers to test that).
        if leaf.max_def > 0 {
            c.vidx = exec.alloc_uninit(n * 4)?;
            c.out_valid = exec.alloc_uninit(n)?;
        }
        if needs_dense {
            c.dense = exec.alloc_uninit(n * dense_width as usize)?;
        }
        if leaf.physical == physical::BYTE_ARRAY {
            // Its offsets, sources and lengths are allocated once the fixed-width columns are decoded
            // (`launch::string_buffers`), after their dense values and pages are freed.
        } else {
            c.out_values = exec.alloc_uninit(n * leaf.type_len as usize)?;
            if leaf.physical == physical::FIXED_LEN_BYTE_ARRAY && fixed_delta_byte_array(chunks, gi) {
                // gp_delta_byte_array_fixed's suffixes and lengths (its values go to dense).
                c.str_src = exec.alloc_uninit(n * 8)?;
                c.str_len = exec.alloc_uninit(n * 4)?;
            }
        }
        cols.push(c);
        if leaf.max_rep > 0 {
            rep_levels.insert(gi, exec.alloc(n.max(1))?);
        }
    }

    let mut pages: Vec<PageDesc> = Vec::new();
    let mut origins: Vec<PageOrigin> = Vec::new();
    let mut dicts: Vec<DictDesc> = Vec::new();
    let mut dict_origins: Vec<PageOrigin> = Vec::new();
    // Identity dictionaries of dictionary-typed columns' keys, freed after the kernels.
    let mut identities: Vec<u64> = Vec::new();
    // Bytes of the BYTE_ARRAY dictionaries' entry tables so far.
    let mut entries_len = 0u64;
    for &gi in &kept {
        let leaf = &gpu[gi].1;
        let mut row = 0u64;
        let mut key_base = 0u64;
        for (ci, ch) in chunks.iter().enumerate().filter(|(_, c)| c.column == gi) {
            let mut dict = (0u64, 0u64, 0u32, 0u64);
            for (pi, p) in ch.infos.iter().enumerate() {
                let body = &bodies[ci][pi];
                match (&leaf.role, p.page_type) {
                    (LeafRole::DictionaryKeys(_), 2) => {
                        // Key of entry e of this chunk's dictionary: the entries before it in the step, plus e.
                        let count = p.num_values.max(0) as u32;
                        let identity: Vec<i32> = (0..count).map(|e| (key_base + e as u64) as i32).collect();
                        key_base += count as u64;
                        let at = if identity.is_empty() {
                            exec.alloc(4)?
                        } else {
                            exec.upload(&identity)?
                        };
                        identities.push(at);
                        dict = (at, count as u64 * 4, count, 0);
                    }
                    (LeafRole::DictionaryValues, 2) => {
                        // The dictionary page as a plain data page of the values column.
                        let count = p.num_values.max(0) as u32;
                        pages.push(PageDesc {
                            data: body.data,
                            data_len: body.data_len,
                            values: body.data,
                            values_len: body.data_len,
                            num_values: count,
                            row_start: row as u32,
                            encoding: encoding::PLAIN,
                            physical: leaf.physical,
                            type_len: leaf.type_len,
                            column: col_of_gpu[gi],
                            ..Default::default()
                        });
                        origins.push(PageOrigin {
                            column: gi,
                            row_group: ch.row_group,
                            page: pi,
                        });
                        row += count as u64;
                    }
                    // Its data pages not dictionary-encoded decode into the values like a column's (below).
                    (LeafRole::DictionaryValues, t) if !matches!(t, 0 | 3) || dictionary_encoded(p) => {}
                    (_, 2) => {
                        let count = p.num_values as u32;
                        let mut index = 0;
                        if leaf.physical == physical::BYTE_ARRAY {
                            if count as u64 > body.data_len / 4 {
                                return Err(corrupt(
                                    source,
                                    gpu,
                                    ch,
                                    Some(pi),
                                    &format!("the dictionary declares {count} entries in {} bytes", body.data_len),
                                ));
                            }
                            // A place in the step's one table of entries, made below once every
                            // dictionary is counted: an allocation each (a lineitem step has about 310)
                            // was as many driver calls to make and as many to free, taken while the
                            // other held steps' threads made theirs. Until then `index` is the
                            // place's offset plus one (0 is no table), patched below.
                            index = entries_len + 1;
                            entries_len += count as u64 * std::mem::size_of::<DictEntry>() as u64;
                            dicts.push(DictDesc {
                                data: body.data,
                                data_len: body.data_len,
                                index,
                                count,
                                ..Default::default()
                            });
                            dict_origins.push(PageOrigin {
                                column: gi,
                                row_group: ch.row_group,
                                page: pi,
                            });
                        }
                        dict = (body.data, body.data_len, count, index);
                    }
                    (_, 0 | 3) => {
                        let v2 = p.page_type == 3;
                        let num_values = p.num_values as u32;
                        let mut d = PageDesc {
                            data: body.data,
                            data_len: body.data_len,
                            values: body.data,
                            values_len: body.data_len,
                            dict: dict.0,
                            dict_len: dict.1,
                            dict_count: dict.2,
                            dict_index: dict.3,
                            num_values,
                            row_start: row as u32,
                            encoding: p.encoding as u32,
                            physical: leaf.physical,
                            type_len: leaf.type_len,
                            max_def: leaf.max_def,
                            def_bit_width: 32 - leaf.max_def.leading_zeros(),
                            column: col_of_gpu[gi],
                            ..Default::default()
                        };
                        if matches!(leaf.role, LeafRole::DictionaryKeys(_)) && !dictionary_encoded(p) {
                            // Its rows' values join the dictionary in order: the keys count on.
                            d.encoding = encoding::SEQUENCE_KEYS;
                            d.dict_count = key_base as u32;
                            key_base += num_values as u64;
                        }
                        if v2 {
                            if leaf.max_def > 0 {
                                // v2 bodies start with the repetition levels, then the definition levels.
                                d.levels = body.levels + p.rep_levels_byte_length as u64;
                                d.levels_len = p.def_levels_byte_length as u64;
                            }
                        } else {
                            if leaf.max_def > 0 {
                                d.flags |= PAGE_V1_LEVELS;
                            }
                            if leaf.max_rep > 0 {
                                d.flags |= PAGE_V1_REP_LEVELS;
                            }
                        }
                        if let Some(&levels) = rep_levels.get(&gi) {
                            let first_of_chunk = !ch.infos[..pi].iter().any(|q| q.page_type == 0 || q.page_type == 3);
                            let body = (body.data, body.data_len, body.levels);
                            let job = rep_level_job(p, body, levels + row, leaf.max_rep, first_of_chunk);
                            rep_jobs.push((job, pages.len()));
                        }
                        row += num_values as u64;
                        pages.push(d);
                        origins.push(PageOrigin {
                            column: gi,
                            row_group: ch.row_group,
                            page: pi,
                        });
                    }
                    _ => {}
                }
            }
        }
    }
    // Not zeroed: gp_dict_byte_array_index writes every entry of a dictionary, or flags it, and a
    // flagged one fails the step before any page reads its entries.
    let dict_entries = if dicts.is_empty() {
        0
    } else {
        exec.alloc_uninit(entries_len as usize)?
    };
    let placed = |index: u64| if index == 0 { 0 } else { dict_entries + index - 1 };
    for d in dicts.iter_mut() {
        d.index = placed(d.index);
    }
    for p in pages.iter_mut().filter(|p| p.dict_index != 0) {
        p.dict_index = placed(p.dict_index);
    }
    Ok(Descriptors {
        kept,
        cols,
        rep_levels,
        rep_jobs,
        pages,
        origins,
        dicts,
        dict_origins,
        identities,
        dict_entries,
    })
}
