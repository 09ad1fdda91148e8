//! Test support: a decode step built from a Parquet file's pages exactly as the orchestrator builds
//! one (descriptors over an [`Arena`]), and the core pipeline run over it with the host references.
//!
//! Pages come from parquet's `SerializedPageReader` (already decompressed). v1 data pages: `data` is
//! the whole body, flagged [`PAGE_V1_LEVELS`] when the column is nullable (else `values = data`). v2:
//! `levels` is the first `def_levels_byte_len` bytes, `data = values` the rest. Every data page of the
//! chosen columns across all row groups is one step, each page pointing at its own chunk's dictionary.

use bytes::Bytes;
use parquet::basic::{Encoding, Type as ParquetType};
use parquet::column::page::Page;
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::Arena;
use super::core as r;
use crate::decode::layout::{ColumnDesc, DictDesc, PAGE_V1_LEVELS, PageDesc, encoding as enc, physical as pt};

/// One decode step: the arena and the descriptors the kernels would get.
#[derive(Debug)]
pub(crate) struct Step {
    pub arena: Arena,
    pub pages: Vec<PageDesc>,
    pub cols: Vec<ColumnDesc>,
    pub dicts: Vec<DictDesc>,
}

/// What the pipeline produced for one column, read back from the arena.
#[derive(Debug, Clone, Default)]
pub(crate) struct ColumnOut {
    /// Fixed width: `num_rows * out_width` bytes; BYTE_ARRAY: the characters.
    pub values: Vec<u8>,
    /// One byte per row, for nullable columns.
    pub valid: Option<Vec<u8>>,
    /// BYTE_ARRAY: `num_rows + 1` offsets (`i32` or, where `out_width` is 8, `i64`, widened).
    pub offsets: Option<Vec<i64>>,
    /// `pack_bits` of `valid`: words and set count.
    pub valid_bits: Option<(Vec<u32>, u64)>,
    /// BOOLEAN: `pack_bits` of the value bytes.
    pub value_bits: Option<(Vec<u32>, u64)>,
    /// BYTE_ARRAY: `validate_utf8` of the characters (the first failing byte, `u64::MAX` for none).
    pub utf8_first_bad: Option<u64>,
    /// BYTE_ARRAY: the views `copy_strings` wrote (16 bytes a row) and the longest length it found.
    pub views: Option<(Vec<u8>, u32)>,
}

/// The view segment [`alloc_column`] gives columns of 64-bit offsets: small, so that the tests'
/// strings spread over several data buffers.
pub(crate) const TEST_VIEW_SEGMENT: u64 = 64;

/// Parquet's `Encoding` as the number in the file.
pub(crate) fn encoding_code(e: Encoding) -> u32 {
    #[allow(deprecated)]
    match e {
        Encoding::PLAIN => enc::PLAIN,
        Encoding::PLAIN_DICTIONARY => enc::PLAIN_DICTIONARY,
        Encoding::RLE => enc::RLE,
        Encoding::BIT_PACKED => enc::BIT_PACKED,
        Encoding::DELTA_BINARY_PACKED => enc::DELTA_BINARY_PACKED,
        Encoding::DELTA_LENGTH_BYTE_ARRAY => enc::DELTA_LENGTH_BYTE_ARRAY,
        Encoding::DELTA_BYTE_ARRAY => enc::DELTA_BYTE_ARRAY,
        Encoding::RLE_DICTIONARY => enc::RLE_DICTIONARY,
        Encoding::BYTE_STREAM_SPLIT => enc::BYTE_STREAM_SPLIT,
        _ => 99,
    }
}

fn physical_code(t: ParquetType) -> u32 {
    match t {
        ParquetType::BOOLEAN => pt::BOOLEAN,
        ParquetType::INT32 => pt::INT32,
        ParquetType::INT64 => pt::INT64,
        ParquetType::INT96 => pt::INT96,
        ParquetType::FLOAT => pt::FLOAT,
        ParquetType::DOUBLE => pt::DOUBLE,
        ParquetType::BYTE_ARRAY => pt::BYTE_ARRAY,
        ParquetType::FIXED_LEN_BYTE_ARRAY => pt::FIXED_LEN_BYTE_ARRAY,
    }
}

/// Builds the step decoding leaf columns `leaves` (in that order: `ColumnDesc` `i` is `leaves[i]`) of
/// the Parquet file `file`, with every output buffer allocated and zeroed (BYTE_ARRAY characters come
/// later, in [`run_core`], once the offsets are known).
pub(crate) fn build_step(file: &Bytes, leaves: &[usize]) -> Step {
    let reader = SerializedFileReader::new(file.clone()).expect("a Parquet file");
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let mut arena = Arena::new();
    let (mut pages, mut cols, mut dicts) = (Vec::new(), Vec::new(), Vec::new());
    for (ci, &leaf) in leaves.iter().enumerate() {
        let descr = schema.column(leaf);
        assert_eq!(descr.max_rep_level(), 0, "flat columns only");
        let max_def = descr.max_def_level() as u32;
        let physical = physical_code(descr.physical_type());
        let type_len = match physical {
            pt::BOOLEAN => 1,
            pt::INT32 | pt::FLOAT => 4,
            pt::INT64 | pt::DOUBLE => 8,
            pt::INT96 => 12,
            pt::BYTE_ARRAY => 0,
            _ => descr.type_length() as u32,
        };
        let mut row = 0u32;
        for rg in 0..reader.num_row_groups() {
            let mut pr = reader
                .get_row_group(rg)
                .expect("row group")
                .get_column_page_reader(leaf)
                .expect("page reader");
            // (address, length, entries, index) of this chunk's dictionary.
            let mut dict = (0u64, 0u64, 0u32, 0u64);
            while let Some(page) = pr.get_next_page().expect("page") {
                let mut pd = PageDesc {
                    physical,
                    type_len,
                    max_def,
                    def_bit_width: 32 - max_def.leading_zeros(),
                    column: ci as u32,
                    row_start: row,
                    ..PageDesc::default()
                };
                match page {
                    Page::DictionaryPage { buf, num_values, .. } => {
                        let addr = arena.upload(&buf);
                        let index = if physical == pt::BYTE_ARRAY {
                            let index = arena.alloc(num_values as usize * 8);
                            dicts.push(DictDesc {
                                data: addr,
                                data_len: buf.len() as u64,
                                index,
                                count: num_values,
                                ..DictDesc::default()
                            });
                            index
                        } else {
                            0
                        };
                        dict = (addr, buf.len() as u64, num_values, index);
                        continue;
                    }
                    Page::DataPage {
                        buf,
                        num_values,
                        encoding,
                        def_level_encoding,
                        ..
                    } => {
                        let addr = arena.upload(&buf);
                        pd.data = addr;
                        pd.data_len = buf.len() as u64;
                        if max_def > 0 {
                            assert_eq!(def_level_encoding, Encoding::RLE);
                            pd.flags = PAGE_V1_LEVELS;
                        } else {
                            pd.values = addr;
                            pd.values_len = pd.data_len;
                        }
                        pd.num_values = num_values;
                        pd.encoding = encoding_code(encoding);
                    }
                    Page::DataPageV2 {
                        buf,
                        num_values,
                        encoding,
                        def_levels_byte_len,
                        rep_levels_byte_len,
                        ..
                    } => {
                        assert_eq!(rep_levels_byte_len, 0);
                        let addr = arena.upload(&buf);
                        let dl = u64::from(def_levels_byte_len);
                        if max_def > 0 {
                            pd.levels = addr;
                            pd.levels_len = dl;
                        }
                        pd.data = addr + dl;
                        pd.data_len = buf.len() as u64 - dl;
                        pd.values = pd.data;
                        pd.values_len = pd.data_len;
                        pd.num_values = num_values;
                        pd.encoding = encoding_code(encoding);
                    }
                }
                (pd.dict, pd.dict_len, pd.dict_count, pd.dict_index) = dict;
                row += pd.num_values;
                pages.push(pd);
            }
        }
        let dense_width = type_len.max(4);
        let mut col = ColumnDesc {
            num_rows: u64::from(row),
            dense_width,
            out_width: if physical == pt::BYTE_ARRAY { 0 } else { type_len },
            physical,
            ..ColumnDesc::default()
        };
        alloc_column(&mut arena, &mut col, max_def > 0);
        cols.push(col);
    }
    Step {
        arena,
        pages,
        cols,
        dicts,
    }
}

/// Allocates (zeroed) every buffer of `col` its `num_rows`, widths and type call for, as the
/// orchestrator does: `vidx` and `out_valid` when `nullable`; BYTE_ARRAY characters come later, and
/// BYTE_ARRAY views (with [`TEST_VIEW_SEGMENT`] where the offsets are 64-bit) are always written.
pub(crate) fn alloc_column(arena: &mut Arena, col: &mut ColumnDesc, nullable: bool) {
    let n = col.num_rows as usize;
    let byte_array = col.physical == pt::BYTE_ARRAY;
    let mut alloc = |want: bool, len: usize| if want { arena.alloc(len) } else { 0 };
    col.vidx = alloc(nullable, n * 4);
    col.dense = alloc(true, n * col.dense_width as usize);
    col.out_values = alloc(!byte_array, n * col.out_width as usize);
    col.out_valid = alloc(nullable, n);
    let offset_width = if r::wide_offsets(col) { 8 } else { 4 };
    col.out_offsets = alloc(byte_array, (n + 1) * offset_width);
    col.str_src = alloc(byte_array, n * 8);
    col.str_len = alloc(byte_array, n * 4);
    col.chars_capacity = 0;
    col.out_views = alloc(byte_array, n * 16);
    col.view_longest = alloc(byte_array, 8);
    col.view_segment = if byte_array && offset_width == 8 {
        TEST_VIEW_SEGMENT
    } else {
        0
    };
}

/// Runs the core pipeline over `step` in launch order (as the orchestrator would; characters are
/// allocated from the last offset between [`r::string_offsets`] and [`r::copy_strings`]), then packs
/// validity and boolean values, and reads every column's outputs back.
pub(crate) fn run_core(step: &mut Step) -> Vec<ColumnOut> {
    let Step {
        arena,
        pages,
        cols,
        dicts,
    } = step;
    r::page_setup(arena, pages);
    r::levels(arena, pages, cols);
    r::dict_indices(arena, pages, cols);
    r::dict_byte_array_index(arena, dicts);
    r::gather_fixed(arena, pages, cols);
    r::byte_array_values(arena, pages, cols);
    r::string_offsets(arena, pages, cols);
    for col in cols.iter_mut().filter(|c| c.physical == pt::BYTE_ARRAY && c.error == 0) {
        let wide = r::wide_offsets(col);
        let last = r::read_offsets(
            arena,
            col.out_offsets + col.num_rows * if wide { 8 } else { 4 },
            wide,
            1,
        )
        .expect("offsets")[0];
        let cap = last.max(0) as u64;
        col.out_values = arena.alloc(cap as usize);
        col.chars_capacity = cap;
    }
    r::copy_strings(arena, pages, cols);
    cols.iter()
        .map(|col| {
            let n = col.num_rows;
            let byte_array = col.physical == pt::BYTE_ARRAY;
            let values_len = if byte_array {
                col.chars_capacity
            } else {
                n * u64::from(col.out_width)
            };
            let mut out = ColumnOut {
                values: if values_len == 0 {
                    Vec::new()
                } else {
                    arena.get(col.out_values, values_len).expect("values").to_vec()
                },
                ..ColumnOut::default()
            };
            let pack = |arena: &mut Arena, bytes: u64| {
                let words = arena.alloc(n.div_ceil(32) as usize * 4);
                let set = r::pack_bits(arena, bytes, n, words);
                (arena.read::<u32>(words, n.div_ceil(32) as usize).expect("words"), set)
            };
            if col.out_valid != 0 {
                out.valid = Some(arena.get(col.out_valid, n).expect("valid").to_vec());
                out.valid_bits = Some(pack(arena, col.out_valid));
            }
            if byte_array {
                let offsets =
                    r::read_offsets(arena, col.out_offsets, r::wide_offsets(col), n as usize + 1).expect("offsets");
                out.utf8_first_bad = Some(r::validate_utf8(&out.values, &offsets));
                out.offsets = Some(offsets);
                if col.out_views != 0 {
                    let views = arena.get(col.out_views, n * 16).expect("views").to_vec();
                    let longest = arena.read::<u32>(col.view_longest, 1).expect("longest")[0];
                    out.views = Some((views, longest));
                }
            }
            if col.physical == pt::BOOLEAN {
                out.value_bits = Some(pack(arena, col.out_values));
            }
            out
        })
        .collect()
}
