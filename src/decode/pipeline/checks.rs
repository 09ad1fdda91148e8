//! Phase 2 of a step: the host's checks of every GPU chunk's pages; a column with page features the
//! kernels lack, or more entries than one step's descriptors hold, falls back to the host.

use super::{ChunkPages, GpuLeaf, LeafRole, StepColumns, StepInput, corrupt, key_capacity};
use crate::decode::layout::{encoding, physical};
use crate::error::Result;

/// Largest page the pipeline accepts, compressed or not (arrow-rs's limit is i32 sizes too).
const MAX_PAGE_BYTES: i64 = i32::MAX as i64;

/// What the checks found of the GPU columns (indexed as the step's GPU columns).
pub(super) struct Checked {
    /// Level entries per GPU column: its rows, or more where it repeats.
    pub(super) entries_of: Vec<u64>,
    /// Dictionary entries per GPU column.
    pub(super) dictionary_entries_of: Vec<u64>,
    /// Whether the column stays on the GPU (its route did not fall back to the host).
    pub(super) keep: Vec<bool>,
}

/// Checks every chunk's pages on the host and counts each GPU column's entries; columns the kernels
/// cannot decode go to `step.fallback` with the reason.
pub(super) fn check_columns(input: &StepInput<'_>, step: &mut StepColumns) -> Result<Checked> {
    let source = input.source;
    let gpu = &step.gpu;
    let fallback = &mut step.fallback;
    for ch in &step.chunks {
        let (route_idx, leaf) = &gpu[ch.column];
        if fallback.contains_key(route_idx) {
            continue;
        }
        if let Some(why) = validate_chunk(ch, leaf).map_err(|m| corrupt(source, gpu, ch, m.1, &m.0))? {
            fallback.insert(*route_idx, why);
        } else if let Some(why) = dictionary_chunk_fallback(ch, leaf) {
            fallback.insert(*route_idx, why);
        }
    }
    // Level entries per GPU column (its rows, or more where it repeats), and dictionary entries.
    let mut entries_of = vec![0u64; gpu.len()];
    let mut dictionary_entries_of = vec![0u64; gpu.len()];
    for ch in &step.chunks {
        for p in &ch.infos {
            let n = p.num_values.max(0) as u64;
            match p.page_type {
                0 | 3 => entries_of[ch.column] += n,
                2 => dictionary_entries_of[ch.column] += n,
                _ => {}
            }
        }
    }
    for (gi, (route_idx, leaf)) in gpu.iter().enumerate() {
        if fallback.contains_key(route_idx) {
            continue;
        }
        // Keys index the step's dictionaries one after another: their entries must fit the key type.
        let entries = dictionary_entries_of[gi];
        if matches!(leaf.role, LeafRole::DictionaryKeys(_)) && entries > key_capacity(&leaf.data_type) {
            fallback.insert(
                *route_idx,
                format!(
                    "{entries} dictionary entries in one step, more than {} keys hold: decoded on the host",
                    leaf.data_type
                ),
            );
        } else if entries_of[gi] > i32::MAX as u64 {
            fallback.insert(
                *route_idx,
                "more than 2^31 level entries in one step: decoded on the host".into(),
            );
        }
    }
    let keep: Vec<bool> = gpu.iter().map(|(i, _)| !fallback.contains_key(i)).collect();
    Ok(Checked {
        entries_of,
        dictionary_entries_of,
        keep,
    })
}

/// Why a dictionary-typed column's chunk goes to the host: its keys come from dictionary indices, so
/// every data page must be dictionary-encoded after a dictionary page (a writer falls back to plain
/// pages when the dictionary grows too large).
fn dictionary_chunk_fallback(ch: &ChunkPages, leaf: &GpuLeaf) -> Option<String> {
    if !matches!(leaf.role, LeafRole::DictionaryKeys(_)) {
        return None;
    }
    let mut has_dictionary = false;
    for p in &ch.infos {
        match p.page_type {
            2 => has_dictionary = true,
            0 | 3 => {
                let e = p.encoding as u32;
                if e != encoding::PLAIN_DICTIONARY && e != encoding::RLE_DICTIONARY {
                    return Some(format!(
                        "a dictionary-typed column with data pages in encoding {e} (not dictionary indices): decoded on the host"
                    ));
                }
            }
            _ => {}
        }
    }
    (!has_dictionary && ch.infos.iter().any(|p| p.page_type == 0 || p.page_type == 3))
        .then(|| "a dictionary-typed column without a dictionary page: decoded on the host".to_string())
}

/// Checks a GPU chunk's pages on the host. `Ok(Some(why))`: the kernels cannot decode it (the column
/// goes to the host); `Err((message, page))`: the chunk is corrupt.
fn validate_chunk(ch: &ChunkPages, leaf: &GpuLeaf) -> std::result::Result<Option<String>, (String, Option<usize>)> {
    let mut values = 0u64;
    let mut seen_data = false;
    let mut seen_dict = false;
    for (i, p) in ch.infos.iter().enumerate() {
        let bad = |m: String| Err((m, Some(i)));
        if p.compressed_size < 0 || p.uncompressed_size < 0 || p.num_values < 0 {
            return bad("a negative size or count".into());
        }
        if p.compressed_size as i64 > MAX_PAGE_BYTES || p.uncompressed_size as i64 > MAX_PAGE_BYTES {
            return bad("a page over 2 GiB".into());
        }
        match p.page_type {
            1 => continue,
            2 => {
                if seen_data || seen_dict {
                    return bad("a dictionary page that is not the chunk's first page".into());
                }
                if p.encoding as u32 != encoding::PLAIN && p.encoding as u32 != encoding::PLAIN_DICTIONARY {
                    return bad(format!("dictionary page encoding {}", p.encoding));
                }
                seen_dict = true;
            }
            0 | 3 => {
                seen_data = true;
                values += p.num_values as u64;
                let e = p.encoding as u32;
                let ok = match leaf.physical {
                    physical::BOOLEAN => e == encoding::PLAIN || e == encoding::RLE,
                    physical::INT32 | physical::INT64 => matches!(
                        e,
                        encoding::PLAIN
                            | encoding::PLAIN_DICTIONARY
                            | encoding::RLE_DICTIONARY
                            | encoding::DELTA_BINARY_PACKED
                            | encoding::BYTE_STREAM_SPLIT
                    ),
                    physical::INT96 => matches!(
                        e,
                        encoding::PLAIN | encoding::PLAIN_DICTIONARY | encoding::RLE_DICTIONARY
                    ),
                    physical::FLOAT | physical::DOUBLE | physical::FIXED_LEN_BYTE_ARRAY => matches!(
                        e,
                        encoding::PLAIN
                            | encoding::PLAIN_DICTIONARY
                            | encoding::RLE_DICTIONARY
                            | encoding::BYTE_STREAM_SPLIT
                    ),
                    physical::BYTE_ARRAY => matches!(
                        e,
                        encoding::PLAIN
                            | encoding::PLAIN_DICTIONARY
                            | encoding::RLE_DICTIONARY
                            | encoding::DELTA_LENGTH_BYTE_ARRAY
                            | encoding::DELTA_BYTE_ARRAY
                    ),
                    _ => false,
                };
                if !ok {
                    if leaf.physical == physical::FIXED_LEN_BYTE_ARRAY && e == encoding::DELTA_BYTE_ARRAY {
                        return Ok(Some(
                            "DELTA_BYTE_ARRAY on FIXED_LEN_BYTE_ARRAY: decoded on the host".into(),
                        ));
                    }
                    return bad(format!("encoding {e} is not valid for this column's type"));
                }
                // Values outside parquet.thrift's Encoding make the header invalid even where the
                // column has no levels to decode (arrow-rs refuses the page the same way).
                let known = |e: i32| e == 0 || (2..=9).contains(&e);
                if p.page_type == 0 && !(known(p.def_level_encoding) && known(p.rep_level_encoding)) {
                    return bad(format!(
                        "level encodings {} and {} (not Parquet encodings)",
                        p.def_level_encoding, p.rep_level_encoding
                    ));
                }
                if p.page_type == 0 && leaf.max_rep > 0 && p.rep_level_encoding as u32 != encoding::RLE {
                    return Ok(Some(format!(
                        "repetition levels in encoding {} (deprecated BIT_PACKED): decoded on the host",
                        p.rep_level_encoding
                    )));
                }
                if p.page_type == 0 && leaf.max_def > 0 && p.def_level_encoding as u32 != encoding::RLE {
                    return Ok(Some(format!(
                        "definition levels in encoding {} (deprecated BIT_PACKED): decoded on the host",
                        p.def_level_encoding
                    )));
                }
                if p.page_type == 3 {
                    // Repetition level bytes in a flat column (some writers store an empty run) are
                    // skipped, as arrow-rs does.
                    if p.rep_levels_byte_length < 0
                        || p.def_levels_byte_length < 0
                        || (p.def_levels_byte_length as i64 + p.rep_levels_byte_length as i64)
                            > p.compressed_size as i64
                    {
                        return bad("level lengths larger than the page".into());
                    }
                }
            }
            t => return bad(format!("unknown page type {t}")),
        }
    }
    if leaf.max_rep == 0 && values != ch.rows {
        return Err((
            format!(
                "the data pages hold {values} values, the row group has {} rows",
                ch.rows
            ),
            None,
        ));
    }
    Ok(None)
}
