//! Phase 2 of a step: the host's checks of every GPU chunk's pages; a column with page features the
//! kernels lack, or more entries than one step's descriptors hold, falls back to the host.

use super::{ChunkPages, GpuLeaf, LeafRole, StepColumns, StepInput, corrupt, key_capacity};
use crate::decode::layout::{PageInfo, encoding, physical};
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
    let (gpu, fallback) = (&step.gpu, &mut step.fallback);
    for ch in &step.chunks {
        let (route_idx, leaf) = &gpu[ch.column];
        if fallback.contains_key(route_idx) {
            continue;
        }
        if let Some(why) = validate_chunk(ch, &validated_as(leaf)).map_err(|m| corrupt(source, gpu, ch, m.1, &m.0))? {
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
    add_plain_page_entries(&step.chunks, &mut step.gpu, &mut dictionary_entries_of);
    let (gpu, fallback) = (&step.gpu, &mut step.fallback);
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

/// Whether GPU column `gi` (a FIXED_LEN_BYTE_ARRAY one) has DELTA_BYTE_ARRAY pages in this step.
pub(super) fn fixed_delta_byte_array(chunks: &[ChunkPages], gi: usize) -> bool {
    chunks
        .iter()
        .filter(|c| c.column == gi)
        .flat_map(|c| &c.infos)
        .any(|p| matches!(p.page_type, 0 | 3) && p.encoding as u32 == encoding::DELTA_BYTE_ARRAY)
}

/// Whether `p` is a data page of dictionary indices.
pub(super) fn dictionary_encoded(p: &PageInfo) -> bool {
    matches!(p.page_type, 0 | 3) && matches!(p.encoding as u32, encoding::PLAIN_DICTIONARY | encoding::RLE_DICTIONARY)
}

/// Why a dictionary-typed column's chunk goes to the host. Its data pages that are not
/// dictionary-encoded (a writer falls back to plain pages once its dictionary grows too large, or
/// never writes one) decode into the column's dictionary values, with keys counting on in row order
/// ([`encoding::SEQUENCE_KEYS`]): arrow-rs re-encodes such values into a dictionary of its own, equal
/// value for value. Not yet in repeated columns, whose values would need their level entries' slots.
fn dictionary_chunk_fallback(ch: &ChunkPages, leaf: &GpuLeaf) -> Option<String> {
    if !matches!(leaf.role, LeafRole::DictionaryKeys(_)) || leaf.max_rep == 0 {
        return None;
    }
    ch.infos
        .iter()
        .find(|p| matches!(p.page_type, 0 | 3) && !dictionary_encoded(p))
        .map(|p| {
            format!(
                "a repeated dictionary-typed column with data pages in encoding {} (not dictionary indices): decoded on the host",
                p.encoding
            )
        })
}

/// The leaf whose page encodings [`validate_chunk`] checks: a dictionary-typed column's keys are
/// checked as its values' physical type (their plain pages hold values, not keys).
fn validated_as(leaf: &GpuLeaf) -> std::borrow::Cow<'_, GpuLeaf> {
    match &leaf.role {
        LeafRole::DictionaryKeys(values) => std::borrow::Cow::Owned(GpuLeaf {
            physical: values.physical,
            type_len: values.type_len,
            ..leaf.clone()
        }),
        _ => std::borrow::Cow::Borrowed(leaf),
    }
}

/// Adds to `dictionary_entries` (by GPU column) the level entries of dictionary-typed columns' data
/// pages that are not dictionary-encoded, for their keys and values leaves both: those pages' values
/// join the dictionary values, nulls included as null entries, so the values leaf then takes the
/// keys' definition levels.
fn add_plain_page_entries(chunks: &[ChunkPages], gpu: &mut [(usize, GpuLeaf)], dictionary_entries: &mut [u64]) {
    let mut plain = vec![0u64; gpu.len()];
    for ch in chunks {
        if matches!(gpu[ch.column].1.role, LeafRole::Column) {
            continue;
        }
        plain[ch.column] += ch
            .infos
            .iter()
            .filter(|p| matches!(p.page_type, 0 | 3) && !dictionary_encoded(p))
            .map(|p| p.num_values.max(0) as u64)
            .sum::<u64>();
    }
    for gi in 0..gpu.len() {
        dictionary_entries[gi] += plain[gi];
        // The values leaf follows its keys leaf (see `decode_step`).
        if plain[gi] > 0 && gpu[gi].1.role == LeafRole::DictionaryValues && gi > 0 {
            gpu[gi].1.max_def = gpu[gi - 1].1.max_def;
        }
    }
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
                    physical::FLOAT | physical::DOUBLE => matches!(
                        e,
                        encoding::PLAIN
                            | encoding::PLAIN_DICTIONARY
                            | encoding::RLE_DICTIONARY
                            | encoding::BYTE_STREAM_SPLIT
                    ),
                    physical::FIXED_LEN_BYTE_ARRAY => matches!(
                        e,
                        encoding::PLAIN
                            | encoding::PLAIN_DICTIONARY
                            | encoding::RLE_DICTIONARY
                            | encoding::BYTE_STREAM_SPLIT
                            | encoding::DELTA_BYTE_ARRAY
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
