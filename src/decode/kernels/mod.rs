//! The CUDA C++ sources of the GPU decoder, compiled at run time by NVRTC ([`crate::gpu::nvrtc`]).
//!
//! The files are concatenated in [`SOURCES`] order into one program ([`source`]): `common.cuh` first
//! (descriptor structs twinned with [`crate::decode::layout`], error codes, bounds-checked readers),
//! then one file per family of kernels. Each kernel has a host reference in
//! [`crate::decode::host_kernels`] computing the same result.
//!
//! # The core decode step (flat columns)
//!
//! `core_util.cuh`, `levels.cu`, `values.cu` and `strings.cu`; references in
//! [`crate::decode::host_kernels::core`]. With `n` data pages (sorted by column, then row), `ncols`
//! columns and `ndicts` BYTE_ARRAY dictionaries, every buffer zeroed, launch in this order (no
//! dynamic shared memory anywhere; skip a launch whose grid would be 0):
//!
//! | # | kernel | grid × block | reads | writes |
//! |---|---|---|---|---|
//! | 1 | `gp_page_setup(PageDesc*, u32 n)` | ceil(n/128) × 128 | v1 `data` prefix | `levels`, `values` |
//! | 2 | `gp_levels(PageDesc*, u32 n, ColumnDesc*)` | n × 256 | `levels` | `vidx`, `out_valid`, `num_non_null` |
//! | 3 | `gp_dict_indices(PageDesc*, u32 n, ColumnDesc*)` | n × 256 | `values`, `dict` | `dense` (u32 indices / RLE booleans), or `out_values` (the dictionary's values, on pages `dict_values_direct` names) |
//! | 4 | `gp_dict_byte_array_index(DictDesc*, u32 ndicts, WalkChain* chains)` (chains zeroed, one a dictionary) | ndicts × slices × 256 | `data` | `index` |
//! | | (DELTA_* and BYTE_STREAM_SPLIT decoders; `gp_delta_byte_array_fixed` rebuilds FIXED_LEN_BYTE_ARRAY values in `dense`) | | | `dense`, `str_src`, `str_len` |
//! | 5 | `gp_gather_fixed(PageDesc*, u32 n, ColumnDesc*)` (not the pages 3 wrote) | n × 256 | `values`, `dict`, `dense`, `vidx` | `out_values` |
//! | 6 | `gp_byte_array_values(PageDesc*, u32 n, ColumnDesc*, WalkChain* chains)` (chains zeroed, one a page) | n × slices × 256 | `values`, `dense`, `dict_index` | `str_src`, `str_len` |
//! | 7a | `gp_string_page_totals(const PageDesc*, u32 n, const ColumnDesc*, u64* t)` | n × 256 | `vidx`, `str_len` | `t[n]` |
//! | 7b | `gp_string_page_bases(const PageDesc*, u32 n, ColumnDesc*, u32 ncols, u64* t)` | ncols × 256 | `t` | `t` (bases), column `error` |
//! | 7c | `gp_string_offsets(const PageDesc*, u32 n, const ColumnDesc*, const u64* t)` | n × 256 | `t`, `vidx`, `str_len` | `out_offsets` |
//! | | host: read `out_offsets[num_rows]` of each BYTE_ARRAY column without `error`, allocate that many characters (`out_values`, `chars_capacity`) | | | |
//! | 8 | `gp_copy_strings(PageDesc*, u32 n, const ColumnDesc*)` | n × slices × 256 | `str_src`, `str_len`, `out_offsets` | `out_values` (characters) |
//! | | (a dictionary-views column, `view_flags::DICT_VIEWS`: 6 writes nothing, 7a and 7c read neither `str_src` nor `str_len`, and 8 reads `dense`, `dict_index` and the dictionary for each row's view) | | | |
//! | 9 | `gp_pack_bits(const u8*, u64 len, u32* words, u64* set)` | any × 256 (grid-stride) | validity or boolean bytes | `ceil(len/32)` words, `*set += ` set bits |
//! | 10 | `gp_validate_utf8(const u8* chars, u64 n, const void* offsets, u32 offset_width, u64 rows, u64* first_bad)` (string columns) | any × any (grid-stride) | `out_values`, `out_offsets` | `*first_bad` min= first byte failing UTF-8 |
//!
//! Nested columns (`nested.cu`, references in [`crate::decode::host_kernels::nested`]): a repeated leaf's
//! pages hold level entries, not rows, and its `ColumnDesc::num_rows` counts entries; v1 pages flagged
//! `PAGE_V1_REP_LEVELS` have 1 step over their repetition levels; 2 keeps their definition levels, a
//! byte an entry, at `ColumnDesc::out_def`. After 2:
//! `gp_rep_levels(LevelJob*, u32 n)` (n × 256: a page's repetition levels, a byte an entry; errors in
//! the job). Before 9, structs without lists take
//! `gp_levels_at_least(const u8* levels, u64 len, u32 threshold, u8* out)` (any × any: validity bytes);
//! columns with lists take the slot scan (the entries of a slot space `(r, t)` numbered:
//! `gp_slot_tile_counts`, ceil(n / 4096) × 256; `gp_slot_tile_bases`, 1 × 1024; `gp_slot_tile_scan`,
//! ceil(n / 4096) × 256), then `gp_compact` (a leaf's values, string offsets and validity bytes packed
//! to its items' slots), `gp_list_offsets` and `gp_slot_flags` (a list's offsets, a list's or struct's
//! validity bytes), grid-stride, any × 256. A fixed-size list then takes `gp_fixed_size_check` (its
//! lists' item counts) and, where a list has no item, `gp_fixed_size_pad` (its items with `size` nulls
//! for each such list), grid-stride, any × any.
//!
//! `gp_string_offsets` writes `i64` offsets for a column whose `out_width` is 8 (`LargeUtf8`,
//! `LargeBinary`, and views whose characters pass 2 GiB a step, widened and computed again), and the
//! kernels reading offsets read them so.
//!
//! The row filter (`row_filter.cu`, references in [`crate::decode::host_kernels::row_filter`], launches
//! from [`crate::decode::row_filter::launch_plan`], orchestrated by
//! [`crate::decode::row_filter::filter_columns`]) runs on decoded Arrow columns, not pages: `gp_rf_leaf`
//! (a predicate leaf into a tri-state byte a row) and `gp_rf_logic` (Kleene and / or / not), grid-stride;
//! the scan `gp_rf_tile_sums` (ceil(n / 4096) × 256), `gp_rf_tile_bases` (1 × 256) and
//! `gp_rf_tile_scan` (ceil(n / 4096) × 256), turning a mask into selected row indices or lengths into
//! offsets; `gp_rf_mask_bits`; and the gathers `gp_rf_gather_fixed`, `gp_rf_gather_bits`,
//! `gp_rf_gather_lengths` (grid-stride), `gp_rf_gather_chars` and `gp_rf_expand_ranges` (a warp a
//! row). Data errors are min'ed into `u64` error words as the row they concern.
//!
//! Compressed page bodies, before any of the above: `gp_validate_compressed` (a warp a body; the check
//! before nvCOMP), the Snappy decoders (`snappy.cu`, `snappy_wide.cu`) and `gp_unzstd(UnsnapItem*, u32
//! n)` (`zstd.cu`, n × 32: a warp a Zstd body; reference: libzstd, `host_kernels::unzstd`).
//!
//! `t` is a `u64[n]` scratch buffer. Blocks of other sizes trap (except 1, 9 and 10). Every page error is
//! in `PageDesc::error` / `error_detail`, dictionary errors in `DictDesc`, offset overflow in
//! `ColumnDesc::error`; a later kernel skips a page already in error, and the result, errors included,
//! is deterministic and equal to the references'. The tests run these kernels on a CPU emulation
//! (`emu`, test-only) against the references.

/// The files of the program, in order: (name, text).
pub(crate) const SOURCES: &[(&str, &str)] = &[
    ("common.cuh", include_str!("common.cuh")),
    ("page_headers.cu", include_str!("page_headers.cu")),
    ("core_util.cuh", include_str!("core_util.cuh")),
    ("levels.cu", include_str!("levels.cu")),
    ("values.cu", include_str!("values.cu")),
    ("strings.cu", include_str!("strings.cu")),
    ("delta.cu", include_str!("delta.cu")),
    ("nested.cu", include_str!("nested.cu")),
    ("convert.cu", include_str!("convert.cu")),
    ("validate.cu", include_str!("validate.cu")),
    ("snappy.cu", include_str!("snappy.cu")),
    ("snappy_wide.cu", include_str!("snappy_wide.cu")),
    ("zstd.cu", include_str!("zstd.cu")),
    ("transfer.cu", include_str!("transfer.cu")),
    ("row_filter.cu", include_str!("row_filter.cu")),
];

#[cfg(test)]
pub(crate) mod emu;

/// Name of the program, in NVRTC messages and cache file names.
pub(crate) const PROGRAM_NAME: &str = "gpu_parquet_decode";

/// The whole program: every file of [`SOURCES`], each after a `#line` directive naming it, so NVRTC's
/// messages point at the file and line.
pub fn source() -> String {
    let mut s = String::new();
    for (name, text) in SOURCES {
        s.push_str(&format!("#line 1 \"{name}\"\n"));
        s.push_str(text);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::gpu::nvrtc;

    /// The whole program compiles, without warnings, for Hopper and for the architectures whose
    /// kernels take another branch (no warp reductions before sm_80: `core_util.cuh`'s `warp_add`,
    /// `warp_or`), where NVRTC is present (no GPU needed); says why it skips otherwise.
    #[test]
    fn kernels_compile() {
        if let Err(why) = nvrtc::nvrtc_present() {
            crate::test_skip(&why);
            return;
        }
        for arch in [90, 80, 75] {
            let c = nvrtc::compile(&super::source(), super::PROGRAM_NAME, arch)
                .unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
            assert!(c.cubin.len() > 1000, "sm_{arch}");
            assert!(!c.log.contains("warning"), "NVRTC warnings for sm_{arch}:\n{}", c.log);
        }
    }
}
