//! The structures the GPU decode kernels and their host references share, laid out as C.
//!
//! Each `#[repr(C)]` struct here has a twin of the same name in `kernels/common.cuh`; the field order,
//! types and sizes must match exactly (the `layout_sizes` test checks the host side against the
//! constants below, and the device test `gp_layout_sizes` checks the device side). Every address is a
//! device address on the GPU and an [`Arena`](crate::decode::host_kernels::Arena) address in the host
//! references, so one orchestration drives both.
//!
//! Kernels never trust these descriptors' contents derived from the file: each one checks every read
//! against the stream lengths given here and reports a problem as an [`ErrorCode`] in the page's (or
//! chunk's) `error` field instead of reading past the end.

use serde::Serialize;

/// A column chunk handed to the page-header kernel (`gp_page_headers`): in and out.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChunkDesc {
    /// Address of the chunk's first byte (its dictionary page header, or first data page header).
    pub start: u64,
    /// Bytes in the chunk.
    pub len: u64,
    /// Fill pass: index in the page array where this chunk's first page goes.
    pub first_page: u32,
    /// Fill pass: pages this chunk may write (its count from the count pass). Count pass: 0.
    pub page_capacity: u32,
    /// Out: pages found (both passes).
    pub page_count: u32,
    /// Out: the first [`ErrorCode`] met, 0 when none.
    pub error: u32,
    /// Out: offset in the chunk where the error was met.
    pub error_at: u64,
}

/// One page header as parsed from the file (Thrift compact `PageHeader`), by the kernel or its host
/// reference. Absent optional fields are 0 unless noted.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PageInfo {
    /// Offset of the header's first byte from the chunk start.
    pub header_offset: u64,
    /// Offset of the page body (first byte after the header) from the chunk start.
    pub data_offset: u64,
    /// Header length in bytes.
    pub header_len: u32,
    /// Parquet `PageType`: 0 data v1, 1 index, 2 dictionary, 3 data v2.
    pub page_type: i32,
    /// `compressed_page_size`: body bytes in the file.
    pub compressed_size: i32,
    /// `uncompressed_page_size`.
    pub uncompressed_size: i32,
    /// `num_values` of the data or dictionary page header (levels for data pages, entries for
    /// dictionaries).
    pub num_values: i32,
    /// Encoding of the values (data pages) or of the dictionary (dictionary pages).
    pub encoding: i32,
    /// Data page v1: encoding of the definition levels.
    pub def_level_encoding: i32,
    /// Data page v1: encoding of the repetition levels.
    pub rep_level_encoding: i32,
    /// Data page v2: `num_nulls`.
    pub num_nulls: i32,
    /// Data page v2: `num_rows`.
    pub num_rows: i32,
    /// Data page v2: bytes of definition levels at the start of the body (never compressed).
    pub def_levels_byte_length: i32,
    /// Data page v2: bytes of repetition levels at the start of the body (never compressed).
    pub rep_levels_byte_length: i32,
    /// Data page v2: `is_compressed` (1 when absent, as the format says); 1 for other pages.
    pub is_compressed: i32,
    /// Reserved, 0.
    pub reserved: i32,
}

/// One data page handed to the decode kernels: in and out. Built by the host from a [`PageInfo`] after
/// decompression; one block per page (several for the string kernels, `page_slice` in the kernels).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PageDesc {
    /// Address of the page body after decompression. v1: `[rep levels][def levels][values]`; v2: the
    /// values only (levels are in [`Self::levels`]).
    pub data: u64,
    /// Bytes at [`Self::data`].
    pub data_len: u64,
    /// Address of the definition levels (RLE/bit-packed hybrid, without v1's 4-byte length prefix).
    /// v2: set by the host. v1: set by `gp_page_setup` from the prefix. 0 when the column is required.
    pub levels: u64,
    /// Bytes at [`Self::levels`].
    pub levels_len: u64,
    /// Address of the values stream (v1: set by `gp_page_setup`; v2: equal to [`Self::data`]).
    pub values: u64,
    /// Bytes at [`Self::values`].
    pub values_len: u64,
    /// Address of the chunk's dictionary page body (plain-encoded entries), 0 when none.
    pub dict: u64,
    /// Bytes at [`Self::dict`].
    pub dict_len: u64,
    /// BYTE_ARRAY dictionaries: address of `dict_count` [`DictEntry`]s (built by
    /// `gp_dict_byte_array_index`). 0 otherwise.
    pub dict_index: u64,
    /// Entries in the dictionary.
    pub dict_count: u32,
    /// Levels in the page: rows, for the flat columns the GPU decodes.
    pub num_values: u32,
    /// First row of this page in its column's output of this step.
    pub row_start: u32,
    /// Out (`gp_levels`): values present (levels equal to [`Self::max_def`]); `num_values` when required.
    pub num_non_null: u32,
    /// Parquet `Encoding` of the values.
    pub encoding: u32,
    /// Parquet physical `Type` (0 BOOLEAN, 1 INT32, 2 INT64, 3 INT96, 4 FLOAT, 5 DOUBLE, 6 BYTE_ARRAY,
    /// 7 FIXED_LEN_BYTE_ARRAY).
    pub physical: u32,
    /// Bytes per value in plain encoding for fixed-width types (4, 8, 12, or the FLBA length); 0 for
    /// BYTE_ARRAY; 1 for BOOLEAN (its dense form is one byte per value).
    pub type_len: u32,
    /// The column's maximum definition level (0: required, no levels stored).
    pub max_def: u32,
    /// Bit width of the definition levels (`ceil(log2(max_def + 1))`).
    pub def_bit_width: u32,
    /// [`PAGE_V1_LEVELS`] and friends.
    pub flags: u32,
    /// Index of the page's column in the [`ColumnDesc`] array.
    pub column: u32,
    /// Out: the first [`ErrorCode`] met in this page, 0 when none.
    pub error: u32,
    /// Out: a number saying more about the error (an offset, an index, a width). While a kernel whose
    /// blocks share the page runs, their lowest failing row so far (complemented); 0 again after.
    pub error_detail: u32,
    /// Reserved, 0; while a kernel whose blocks share the page runs, how many of them have ended.
    pub reserved: u32,
}

/// `PageDesc::flags`: a v1 page whose definition levels are RLE with a 4-byte length prefix at the
/// start of [`PageDesc::data`]; `gp_page_setup` resolves [`PageDesc::levels`] and [`PageDesc::values`].
pub(crate) const PAGE_V1_LEVELS: u32 = 1;

/// `PageDesc::flags`: a v1 page of a repeated column: its body starts with the repetition levels
/// (a 4-byte length, then the stream), which `gp_page_setup` steps over before the definition levels
/// ([`PAGE_V1_LEVELS`]) or the values.
pub(crate) const PAGE_V1_REP_LEVELS: u32 = 2;

/// One entry of a BYTE_ARRAY dictionary: where its bytes start in the dictionary page body, and how many.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DictEntry {
    /// Offset of the first byte from the dictionary page body's start.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
}

/// A BYTE_ARRAY dictionary page to index (`gp_dict_byte_array_index`): in and out.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DictDesc {
    /// Address of the dictionary page body (plain-encoded byte arrays).
    pub data: u64,
    /// Bytes at [`Self::data`].
    pub data_len: u64,
    /// Address of `count` [`DictEntry`]s to write.
    pub index: u64,
    /// Entries.
    pub count: u32,
    /// Out: the first [`ErrorCode`], 0 when none.
    pub error: u32,
    /// Out: the entry at which it was met.
    pub error_detail: u32,
    /// Reserved, 0.
    pub reserved: u32,
}

/// One column of one decode step: the buffers the kernels write. Addresses are 0 where unused.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ColumnDesc {
    /// Rows of this column in this step.
    pub num_rows: u64,
    /// `i32[num_rows]`: for each row, the index of its value within its page, or -1 for a null
    /// (written by `gp_levels`; unused for required columns, where the index is the row's place in its
    /// page).
    pub vidx: u64,
    /// Dense values, `num_rows * dense_width` bytes: page `p`'s `k`-th present value at
    /// `(row_start + k) * dense_width`. Written by decoders whose values are not already in plain form
    /// (dictionary indices as `u32`, RLE booleans as `u8`, delta and byte-stream-split values in the
    /// physical width, DELTA_BYTE_ARRAY prefix lengths as `u32`).
    pub dense: u64,
    /// Bytes per dense value: `max(4, type_len)` (dictionary indices are `u32`; RLE booleans one byte
    /// at that stride).
    pub dense_width: u32,
    /// Bytes per output value for fixed-width columns (the physical width; 1 for BOOLEAN before
    /// packing); for BYTE_ARRAY, bytes per offset: 8 for `i64` offsets (`LargeUtf8` / `LargeBinary`),
    /// else (4 or 0) `i32`.
    pub out_width: u32,
    /// Output values: fixed width `num_rows * out_width` bytes (BOOLEAN: one byte per row, packed
    /// later); BYTE_ARRAY: the characters (`chars_capacity` bytes).
    pub out_values: u64,
    /// Output validity, one byte per row (1 present, 0 null), packed into a bitmap later; 0 when the
    /// column is required.
    pub out_valid: u64,
    /// BYTE_ARRAY: `i32[num_rows + 1]` Arrow offsets (`i64` where `out_width` is 8).
    pub out_offsets: u64,
    /// BYTE_ARRAY: `u64[num_rows]` dense source addresses of the present values (`(row_start + k)`).
    /// For a DELTA_BYTE_ARRAY value, the address of its suffix: `gp_delta_byte_array_copy` rebuilds
    /// those values (prefix from the previous value, then the suffix) and `gp_copy_strings` skips them.
    pub str_src: u64,
    /// BYTE_ARRAY: `u32[num_rows]` dense lengths of the present values.
    pub str_len: u64,
    /// BYTE_ARRAY: bytes at [`Self::out_values`].
    pub chars_capacity: u64,
    /// Parquet physical type.
    pub physical: u32,
    /// Out: the first [`ErrorCode`] met for the column as a whole (offset overflow), 0 when none.
    pub error: u32,
    /// BYTE_ARRAY: Arrow's 16-byte views (`Utf8View`, `BinaryView`), `num_rows` of them, written by
    /// `gp_copy_strings` as it copies each row's characters; 0 where the views are built afterwards
    /// (`gp_strings_to_views`) or the column has none.
    pub out_views: u64,
    /// With `out_views`: the characters' segment (see `Kernel::StringsToViews`): 0 for one data
    /// buffer, else a string starting at `o` lies in buffer `o / segment` at `o % segment`.
    pub view_segment: u64,
    /// With `out_views`: a `u32` the longest view's length is max'ed into (zeroed by the caller).
    pub view_longest: u64,
    /// [`view_flags`]: 0, or how `gp_copy_strings` writes this column's views (set before the offsets,
    /// which count only the characters it copies).
    pub view_flags: u32,
    /// With `view_flags`: the data buffer (0 or 1) the copied characters' first segment is, after
    /// `view_pages`.
    pub view_buffer: u32,
    /// With `view_flags`: where the column's own decompressed pages lie (`view_pages_len` bytes, under
    /// 2^31), its data buffer 0; a row whose bytes lie there is not copied, its view points at them.
    /// 0 when the column has none.
    pub view_pages: u64,
    /// Bytes at `view_pages`.
    pub view_pages_len: u64,
    /// Nested columns: `u8[num_rows]`, each row's (level entry's) definition level, written by
    /// `gp_levels` beside `vidx` (pages with levels only); 0 when the column's levels are not kept.
    pub out_def: u64,
}

/// [`ColumnDesc::view_flags`] bits.
pub mod view_flags {
    /// `gp_copy_strings` writes the views, copying only the characters of rows longer than 12 bytes
    /// that do not lie in `view_pages` (the offsets count those alone).
    pub const IN_COPY: u32 = 1;
    /// ... and checks every present row's string is UTF-8 (`Utf8View`), failing with `BadUtf8`.
    pub const CHECK_UTF8: u32 = 2;
    /// ... and every page of the column in the step is dictionary-encoded with its dictionary in
    /// `view_pages`: a row's view is its dictionary entry's (`gp_copy_strings`, from the index in
    /// `dense`), so no row is copied and `str_src` and `str_len` are neither written nor read (they
    /// may be 0). Set by the host (`launch::dictionary_views`); a page that breaks it fails.
    pub const DICT_VIEWS: u32 = 4;
}

/// Whether `page` is as [`view_flags::DICT_VIEWS`] asks of its column's pages: dictionary-encoded,
/// its dictionary inside `col`'s own pages (`view_pages`), so each entry's view can point at its
/// bytes there. The host sets the flag where every page of the column holds it; the kernels
/// (`dict_in_own_pages` in strings.cu) and their references check it again on each page.
pub(crate) fn dictionary_in_own_pages(page: &PageDesc, col: &ColumnDesc) -> bool {
    let (lo, n) = (col.view_pages, col.view_pages_len);
    encoding::is_dictionary(page.encoding)
        && page.dict != 0
        && page.dict_index != 0
        && lo != 0
        && page.dict >= lo
        && page.dict - lo <= n
        && page.dict_len <= n - (page.dict - lo)
}

/// Whether a dictionary page's values go straight from `gp_dict_indices` to its rows (no index through
/// `dense`; `gp_gather_fixed` leaves the page alone): 4- or 8-byte values stored as they are, every
/// row present, and a dictionary holding all `dict_count` entries. Twin of `core_util.cuh`'s
/// `dict_values_direct`.
pub(crate) fn dictionary_values_direct(page: &PageDesc, col: &ColumnDesc) -> bool {
    let fixed = matches!(
        page.physical,
        physical::INT32 | physical::INT64 | physical::FLOAT | physical::DOUBLE | physical::FIXED_LEN_BYTE_ARRAY
    );
    let tl = page.type_len;
    encoding::is_dictionary(page.encoding)
        && fixed
        && (tl == 4 || tl == 8)
        && col.out_width == tl
        && col.out_values.is_multiple_of(u64::from(tl))
        && page.num_non_null == page.num_values
        && page.dict != 0
        && u64::from(page.dict_count) * u64::from(tl) <= page.dict_len
}

/// One compressed page body for `gp_validate_compressed`: in and out.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ValidateItem {
    /// Address of the compressed bytes.
    pub src: u64,
    /// Compressed bytes.
    pub src_len: u64,
    /// The size the page declares uncompressed.
    pub dst_len: u64,
    /// [`validate_codec`] constant.
    pub codec: u32,
    /// Out: 0 when the body passed, else a [`validate_status`] code.
    pub status: u32,
}

/// Bodies per block of `gp_validate_compressed` (a warp each), as `kernels/validate.cu` defines it. A
/// body the kernel does not reach keeps the status the host gave it, so a mismatch fails closed.
pub const VALIDATE_WARPS: u32 = 4;

/// Long Snappy bodies checked by `gp_validate_compressed` in segments, a lane each (see
/// `kernels/validate.cu`): a warp walking a 550 kB page alone held the launch, and nvCOMP behind it,
/// some 2-5 ms, and its 64-byte windows cost some 85 warp instructions each.
pub mod validate_segments {
    use super::{ValidateItem, validate_codec, validate_status};

    /// `joins[first]` after a body's join: it was joined,
    pub const JOINED: u32 = 1 << 31;
    /// the whole body was walked (a failure, or a doubt),
    pub const WALKED_WHOLE: u32 = 1 << 30;
    /// and, in the bits below, how many segments were walked again from the true element.
    pub const REPAIRS: u32 = (1 << 30) - 1;

    /// One segment of a body: its lane's work.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct ValidateSegment {
        /// The body's index among the launch's items.
        pub item: u32,
        /// This segment's index in the body.
        pub index: u32,
        /// The body's segments.
        pub count: u32,
        /// The body's first segment's index in the launch (its outs and join word).
        pub first: u32,
    }

    /// A segment's walk, as its lane leaves it for the join (device scratch; the layout only sizes it).
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct SegmentOut {
        pub sum: u64,
        pub dmax: i64,
        pub q_first: u32,
        pub q_next: u32,
        pub flags: u32,
        pub pad: u32,
    }

    // As `kernels/validate.cu` asserts.
    const _: () = assert!(size_of::<ValidateSegment>() == 16 && size_of::<SegmentOut>() == 32);

    /// How bodies are cut.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Geometry {
        /// Bytes a segment covers (its lane walks about `overlap` more).
        pub seg_bytes: u32,
        /// Bytes a segment's guessed chain has to meet the true one before it counts.
        pub overlap: u32,
        /// Bodies shorter than this are walked whole.
        pub min_src: u64,
    }

    /// The GPU's: 4 kB segments (some 1,200 elements a lane), a guess given 256 bytes to meet the
    /// true chain, cut from bodies of 96 kB or more. 2 kB segments made one launch over 65 row groups
    /// of lineitem SF10 snappy faster (1.62 ms against 2.29, `precheck_segments_on_a_file`, run AY)
    /// but not its decode alone (run BA: 68.8-71.1 ms against 68.1-70.6, within the noise), so the
    /// segments stay at 4 kB. Emulated over SF1 lineitem's long bodies
    /// (`segments_on_a_files_long_bodies`, row groups 0 and 25, 22 bodies of 16 kB or more), 1.0 % of
    /// the segments were walked again, as with 2 kB segments (1.1 %), against 4.4 % with a guess
    /// given 128 bytes; the most in one body, 6, in a 38 kB page compressing 3 %. The benchmark
    /// file's 80 kB data pages of random integers had up to 10 of their 20 segments walked again (a
    /// walk in the join, one after another, longer than the warp's whole walk): those, and
    /// lineitem's bodies under 96 kB, stay with the warp.
    pub const PRODUCTION: Geometry = Geometry {
        seg_bytes: 4 << 10,
        overlap: 256,
        min_src: 96 << 10,
    };

    /// Warps of a launch of `gp_validate_compressed` over `items` bodies and `segments` segments:
    /// a lane per segment, then a warp per body.
    pub fn launch_warps(items: usize, segments: usize) -> u32 {
        (segments.div_ceil(32) + items) as u32
    }

    /// Bodies longer than this are walked whole by a warp: a body whose guessed chains never meet the
    /// true one is walked again segment after segment by one thread (some 0.1 ms a 4 kB segment), and
    /// this bounds that at about the warp's walk of a 16 MB body.
    pub const MAX_SRC: u64 = 4 << 20;

    /// Whether a body is checked in segments: Snappy, at least `min_src` long, at most [`MAX_SRC`],
    /// and compressing by more than a 64th. A body that compresses less is mostly long literals, where
    /// a guessed chain seldom meets the true one (and the literal copier takes bodies of literals
    /// only).
    pub(crate) fn cut(item: &ValidateItem, g: Geometry) -> bool {
        item.codec == validate_codec::SNAPPY
            && item.src_len >= g.min_src
            && item.src_len <= MAX_SRC
            && item.dst_len < 1 << 31
            && item.dst_len > item.src_len + item.src_len / 64
    }

    /// The segments of a body of `src_len` bytes that [`cut`] takes: the last one's counted range
    /// reaches the body's end.
    pub(crate) fn count(src_len: u64, g: Geometry) -> u32 {
        (src_len - u64::from(g.overlap)).div_ceil(u64::from(g.seg_bytes)) as u32
    }

    /// Cuts the bodies [`cut`] takes into segments, marking their items
    /// [`validate_status::SEGMENTED`] (their own warps skip them; the status stays not OK where no
    /// join sets it): the segments, a body's in order. `g` must have `overlap < seg_bytes` and
    /// `overlap < min_src` (every segment then starts inside its body).
    pub fn plan(items: &mut [ValidateItem], g: Geometry) -> Vec<ValidateSegment> {
        assert!(g.overlap < g.seg_bytes && u64::from(g.overlap) < g.min_src && g.overlap >= 16);
        let mut segs = Vec::new();
        for (i, it) in items.iter_mut().enumerate() {
            if !cut(it, g) {
                continue;
            }
            let count = count(it.src_len, g);
            let first = segs.len() as u32;
            it.status = validate_status::SEGMENTED;
            segs.extend((0..count).map(|index| ValidateSegment {
                item: i as u32,
                index,
                count,
                first,
            }));
        }
        segs
    }
}

/// Launch geometry of `gp_snappy_literals` (`kernels/snappy.cu`), which copies Snappy bodies of
/// literals only, taking [`UnsnapItem`]s.
pub mod snappy_literals {
    /// Threads of a block (the kernel traps on another size).
    pub const THREADS: u32 = 256;
    /// Literals a body may hold at most (a 64 KiB literal per Snappy block: 4 MiB pages).
    pub(crate) const MAX: u32 = 64;
    /// Output bytes per block (a body's last block takes fewer).
    pub(crate) const SLICE_BYTES: u64 = 64 << 10;

    /// Blocks a body declaring `dst_len` bytes gets: one per [`SLICE_BYTES`], one at least (a body
    /// of something else must be walked to be refused).
    pub(crate) fn blocks(dst_len: u64) -> u64 {
        dst_len.div_ceil(SLICE_BYTES).max(1)
    }

    /// Gives each item its first block, one body's blocks after another's: the grid's size, or `None`
    /// past what a grid holds (2^31 - 1 blocks).
    pub fn plan(items: &mut [super::UnsnapItem]) -> Option<u32> {
        let mut next = 0u64;
        for it in items.iter_mut() {
            it.block0 = u32::try_from(next).ok()?;
            next += blocks(it.dst_len);
        }
        u32::try_from(next).ok().filter(|&g| g <= i32::MAX as u32)
    }
}

/// One Snappy page body for `gp_unsnap` (or `gp_snappy_literals`): in and out.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct UnsnapItem {
    /// Address of the compressed bytes.
    pub src: u64,
    /// Compressed bytes.
    pub src_len: u64,
    /// Address of the output, `dst_len` bytes.
    pub dst: u64,
    /// The size the page declares uncompressed.
    pub dst_len: u64,
    /// Out: 0 when the body decompressed to exactly `dst_len` bytes, else a [`validate_status`] code
    /// (the pre-check's on the same body).
    pub status: u32,
    /// `gp_snappy_literals`: the item's first block ([`snappy_literals::plan`]); `gp_unsnap`: unused.
    pub block0: u32,
}

/// One Snappy page body for the wide decoder (`kernels/snappy_wide.cu`): in, scratch and out. The
/// host fills everything but `produced`, `status` (set to `u32::MAX`) and `unresolved` (0), laying
/// the scratch out with [`wsnap`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct WsnapItem {
    /// Address of the compressed bytes.
    pub src: u64,
    /// Compressed bytes (under 2^31).
    pub src_len: u64,
    /// Address of the output, `dst_len` bytes.
    pub dst: u64,
    /// The size the page declares uncompressed (under 2^31).
    pub dst_len: u64,
    /// Scratch: [`wsnap::Scratch::table`] bytes.
    pub table: u64,
    /// Scratch: [`wsnap::Scratch::segs`] bytes.
    pub segs: u64,
    /// Scratch: [`wsnap::Scratch::ptr`] bytes.
    pub ptr: u64,
    /// Scratch: [`wsnap::Scratch::kind`] bytes.
    pub kind: u64,
    /// Out: the output the stream's elements add up to (saturating).
    pub produced: u64,
    /// The body's first block in the segment kernels' grid (tabulate, emit).
    pub seg_block0: u32,
    /// The body's first block in the byte kernels' grid (jump, gather).
    pub byte_block0: u32,
    /// Out: 0 when the body decompressed to exactly `dst_len` bytes, else a [`validate_status`] code
    /// (the pre-check's on the same body).
    pub status: u32,
    /// Out: match bytes left unresolved after the jump rounds or `gp_wsnap_resolve` (0, or the body is
    /// refused).
    pub unresolved: u32,
}

/// Geometry of the wide Snappy decoder (twin of the `WSNAP_*` constants of `snappy_wide.cu`): the
/// scratch each body needs and the blocks each kernel takes. The launch order, for items laid out by
/// [`wsnap::plan`]: `gp_wsnap_tabulate(items, n)` and later `gp_wsnap_emit(items, n)` over
/// `seg_blocks` × 128; `gp_wsnap_join(items, n)` and `gp_wsnap_finish(items, n)`
/// over n × 32 each; then, where [`wsnap::Plan::resolve`], `gp_wsnap_resolve(items, n)` over n × 256;
/// otherwise `gp_wsnap_jump(items, n, flags, r)` for r in 0..rounds over `byte_blocks` × 256, with
/// `flags` `flag_words` zeroed u32s, and `gp_wsnap_gather(items, n)` over `byte_blocks` × 256.
pub mod wsnap {
    /// Input bytes of a segment.
    pub const SEG: u64 = 2048;
    /// Candidate starts tabulated per segment.
    pub(crate) const CAND: u64 = 32;
    /// Segments (warps) per block of the segment kernels.
    pub(crate) const SEG_WARPS: u64 = 4;
    /// Output bytes per block of the byte kernels.
    pub(crate) const BLOCK_BYTES: u64 = 256 * 16 * 4;
    /// Jump rounds at most: the first words of the flags.
    pub(crate) const MAX_ROUNDS: u32 = 32;
    /// The most segments of a body for which a batch ends with `gp_wsnap_resolve` (a block per body,
    /// a step per segment) rather than the jump rounds and the gather.
    pub const RESOLVE_MAX_SEGS: u64 = 2048;
    /// Threads of a `gp_wsnap_resolve` block.
    pub const RESOLVE_THREADS: u32 = 256;
    /// Where each scratch region starts within a body's scratch.
    const ALIGN: u64 = 256;

    /// Scratch bytes of one body, each region 256-byte aligned.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Scratch {
        /// `{u32 exit, u32 output}` for each candidate of each segment.
        pub table: u64,
        /// 16 bytes per segment.
        pub segs: u64,
        /// A `u32` per output byte.
        pub ptr: u64,
        /// A byte per output byte, rounded up to 16 (read 16 at a time).
        pub kind: u64,
    }

    impl Scratch {
        /// For a body of `src_len` bytes declaring `dst_len`.
        pub fn of(src_len: u64, dst_len: u64) -> Self {
            let segs = src_len.div_ceil(SEG).max(1);
            Scratch {
                table: segs * CAND * 8,
                segs: segs * 16,
                ptr: dst_len.max(1) * 4,
                kind: dst_len.max(1).div_ceil(16) * 16,
            }
        }

        /// All four regions, each rounded up to 256 bytes.
        pub(crate) fn total(&self) -> u64 {
            [self.table, self.segs, self.ptr, self.kind]
                .iter()
                .map(|b| b.div_ceil(ALIGN) * ALIGN)
                .sum()
        }
    }

    /// The launch plan of a batch of bodies.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Plan {
        /// Blocks of the segment kernels.
        pub seg_blocks: u32,
        /// Blocks of the byte kernels.
        pub byte_blocks: u32,
        /// Jump rounds: enough for a chain of as many hops as the most segments of a body (each hop
        /// goes back a segment or more, and each round at least doubles the hops behind a byte).
        pub rounds: u32,
        /// `u32` words of the flags buffer (zeroed): [`MAX_ROUNDS`], then one per byte block.
        pub flag_words: u64,
        /// Whether the waiting match bytes are resolved by `gp_wsnap_resolve` (no body has more than
        /// [`RESOLVE_MAX_SEGS`] segments) rather than by the jump rounds and the gather. Either way
        /// gives the same bytes (the wide decoder's tests run both).
        pub resolve: bool,
        /// Scratch bytes in all.
        pub scratch: u64,
    }

    /// Fills `items`' block numbers and scratch addresses (from `scratch_base`, laid out body after
    /// body), `status` = `u32::MAX`, `unresolved` = `produced` = 0; `src`, `src_len`, `dst`, `dst_len`
    /// must be set. Bodies and outputs must be under 2^31 bytes.
    pub fn plan(items: &mut [super::WsnapItem], scratch_base: u64) -> Plan {
        let (mut seg_blocks, mut byte_blocks, mut at, mut most_segs) = (0u64, 0u64, scratch_base, 1u64);
        for it in items.iter_mut() {
            it.seg_block0 = seg_blocks as u32;
            it.byte_block0 = byte_blocks as u32;
            seg_blocks += it.src_len.div_ceil(SEG).div_ceil(SEG_WARPS).max(1);
            byte_blocks += it.dst_len.div_ceil(BLOCK_BYTES).max(1);
            let s = Scratch::of(it.src_len, it.dst_len);
            for (field, bytes) in [
                (&mut it.table, s.table),
                (&mut it.segs, s.segs),
                (&mut it.ptr, s.ptr),
                (&mut it.kind, s.kind),
            ] {
                *field = at;
                at += bytes.div_ceil(ALIGN) * ALIGN;
            }
            it.status = u32::MAX;
            it.unresolved = 0;
            it.produced = 0;
            most_segs = most_segs.max(it.src_len.div_ceil(SEG));
        }
        Plan {
            seg_blocks: seg_blocks as u32,
            byte_blocks: byte_blocks as u32,
            rounds: (66 - most_segs.leading_zeros()).min(MAX_ROUNDS),
            flag_words: u64::from(MAX_ROUNDS) + byte_blocks,
            resolve: most_segs <= RESOLVE_MAX_SEGS,
            scratch: at - scratch_base,
        }
    }
}

/// `ValidateItem::codec` values.
pub(crate) mod validate_codec {
    /// Snappy (raw, as Parquet stores it).
    pub(crate) const SNAPPY: u32 = 1;
    /// Zstandard frames.
    pub(crate) const ZSTD: u32 = 2;
    /// An LZ4 block (Parquet's LZ4_RAW).
    pub(crate) const LZ4_RAW: u32 = 3;
    /// Gzip members.
    pub(crate) const GZIP: u32 = 4;
}

/// `ValidateItem::status` values.
pub(crate) mod validate_status {
    /// The body passed.
    pub(crate) const OK: u32 = 0;
    /// The stream ends inside an element.
    pub(crate) const TRUNCATED: u32 = 1;
    /// A match reaches before the start of the output.
    pub(crate) const BAD_OFFSET: u32 = 2;
    /// The stream produces (or declares) another size than the page header.
    pub(crate) const WRONG_SIZE: u32 = 3;
    /// Not this codec's header.
    pub(crate) const BAD_HEADER: u32 = 4;
    /// Our Snappy and Zstd decoders only (the pre-check, `gp_unsnap`, the wide decoder, `gp_unzstd`): a
    /// body or declared size of 2^31 bytes or more (Parquet page sizes are 32-bit signed, so no page
    /// has one); not decoded on the GPU.
    pub(crate) const TOO_LARGE: u32 = 6;
    /// The wide Snappy decoder only: match bytes left unresolved after its jump rounds or its resolve
    /// kernel (a bug, never seen; the host decompresses the page).
    pub(crate) const UNRESOLVED: u32 = 7;
    /// `gp_snappy_literals` only: the body holds a match, or more literals than it takes
    /// ([`super::snappy_literals::MAX`]); the other Snappy decoders take it.
    pub(crate) const NOT_LITERALS: u32 = 8;
    /// `gp_unzstd` only: a frame with a dictionary or a content checksum; nvCOMP or the host takes it.
    pub(crate) const ZSTD_UNSUPPORTED: u32 = 9;
    /// `gp_unzstd` only: an entropy table, bitstream, sequence or block that libzstd would refuse (or
    /// that the kernel checks more strictly); the host decompressor takes the page.
    pub(crate) const ZSTD_CORRUPT: u32 = 10;
    /// `gp_unzstd_blocks` told not to decode whole what it did not plan (tests only).
    #[cfg(test)]
    pub(crate) const ZSTD_NOT_PLANNED: u32 = 11;
    /// The pre-check only, given by the host: a body checked in segments
    /// ([`super::validate_segments`]); their join replaces it.
    pub(crate) const SEGMENTED: u32 = 0xffff_fffe;

    /// What a status means.
    pub(crate) fn describe(status: u32) -> &'static str {
        match status {
            OK => "valid",
            TRUNCATED => "the compressed stream ends inside an element",
            BAD_OFFSET => "a match points before the start of the output",
            WRONG_SIZE => "the stream's size differs from the page header's uncompressed size",
            BAD_HEADER => "not a valid header for this codec",
            TOO_LARGE => "2 GiB or more, beyond the GPU Snappy and Zstd decoders' sizes",
            UNRESOLVED => "match bytes left unresolved by the wide GPU Snappy decoder",
            NOT_LITERALS => "not a body of literals only",
            ZSTD_UNSUPPORTED => "a Zstd frame with a dictionary or a checksum",
            ZSTD_CORRUPT => "an invalid Zstd table, bitstream or block",
            SEGMENTED => "checked in segments that were never joined",
            _ => "unknown validation status",
        }
    }
}

/// `gp_unzstd_blocks(items, n, scratch, whole)` (`zstd.cu`): a warp per Zstd body, as `gp_unzstd`,
/// with `scratch[i]` the address of body i's scratch and `whole` 1 (a body its blocks' decode does
/// not take is decoded whole, as `gp_unzstd` decodes it), [`zstd_blocks::scratch_bytes`] of it (the kernel
/// computes the same sizes from the body's declared size: `zbl_slots`, `zbl_checks`).
pub mod zstd_blocks {
    /// The output a block plan stands for (libzstd's block splitter writes blocks well under 128 kB).
    const PLAN_OUT: u64 = 4096;
    /// A full set of table entries (LL, ML and OF at their largest) for every this many output bytes.
    const TABLE_OUT: u64 = 32_768;
    const TABLE_SET: u64 = 1280;
    /// The output a checkpoint (32 sequences) stands for when a body's checkpoints fill its scratch.
    const CHECK_OUT: u64 = 192;
    /// A block's plan (`ZBlockPlan`), a table entry (`ZFse`), a checkpoint (`ZCheck`).
    const PLAN_BYTES: u64 = 64;
    const ENTRY_BYTES: u64 = 4;
    const CHECK_BYTES: u64 = 24;

    /// Scratch bytes of a body of `dst_len` output bytes (a multiple of 8, so bodies' scratch can
    /// follow each other). A frame of more blocks, table entries or checkpoints than it holds is
    /// decoded whole.
    pub fn scratch_bytes(dst_len: u64) -> u64 {
        let plans = dst_len / PLAN_OUT + 2;
        let entries = (dst_len / TABLE_OUT + 2) * TABLE_SET;
        let checks = dst_len / CHECK_OUT + plans;
        plans * PLAN_BYTES + entries * ENTRY_BYTES + checks * CHECK_BYTES
    }
}

/// Sizes in bytes both sides must agree on (checked on the host by a test and on the device by
/// `gp_layout_sizes`).
pub const LAYOUT_SIZES: [(&str, usize); 8] = [
    ("ChunkDesc", 40),
    ("PageInfo", 72),
    ("PageDesc", 128),
    ("DictDesc", 40),
    ("ColumnDesc", 144),
    ("ValidateItem", 32),
    ("UnsnapItem", 40),
    ("WsnapItem", 88),
];

/// A problem a kernel (or its host reference) met, as written to an `error` field.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ErrorCode {
    /// A page header runs past the end of its chunk.
    HeaderPastChunk = 1,
    /// A page header is not valid Thrift compact protocol (bad field type, varint too long, nesting
    /// too deep, a required field missing).
    BadHeader = 2,
    /// A page header gives a negative or impossible size or count.
    BadPageSize = 3,
    /// A page body runs past the end of its chunk.
    PagePastChunk = 4,
    /// The chunk holds more pages than the count pass found (the bytes changed between passes).
    TooManyPages = 5,
    /// A level or value stream ends before the values the page declares.
    Overrun = 6,
    /// A bit width over the type's maximum (levels, dictionary indices, delta miniblocks).
    BadBitWidth = 7,
    /// A dictionary index at or past the dictionary's entry count.
    DictIndexOutOfRange = 8,
    /// A page holds fewer values than its header declares.
    ShortPage = 9,
    /// An encoding this kernel does not decode for this type.
    BadEncoding = 10,
    /// A DELTA_* header (block size, miniblocks) is invalid.
    BadDeltaHeader = 11,
    /// A string column's characters exceed what 32-bit offsets hold.
    OffsetOverflow = 12,
    /// A definition level above the column's maximum.
    BadLevel = 13,
    /// A dictionary-encoded page in a chunk without a dictionary page.
    MissingDictionary = 14,
    /// A DELTA_BYTE_ARRAY prefix longer than the previous value.
    BadPrefix = 15,
    /// A string of a `Utf8View` column is not valid UTF-8 (detail: the row within the page).
    BadUtf8 = 16,
}

impl ErrorCode {
    /// The code from an `error` field, `None` for 0 or an unknown value.
    pub fn from_u32(code: u32) -> Option<Self> {
        use ErrorCode::*;
        Some(match code {
            1 => HeaderPastChunk,
            2 => BadHeader,
            3 => BadPageSize,
            4 => PagePastChunk,
            5 => TooManyPages,
            6 => Overrun,
            7 => BadBitWidth,
            8 => DictIndexOutOfRange,
            9 => ShortPage,
            10 => BadEncoding,
            11 => BadDeltaHeader,
            12 => OffsetOverflow,
            13 => BadLevel,
            14 => MissingDictionary,
            15 => BadPrefix,
            16 => BadUtf8,
            _ => return None,
        })
    }

    /// What the code means, for error messages.
    pub(crate) fn describe(self) -> &'static str {
        use ErrorCode::*;
        match self {
            HeaderPastChunk => "a page header runs past the end of the column chunk",
            BadHeader => "a page header is not valid Thrift compact protocol",
            BadPageSize => "a page header gives a negative or impossible size or count",
            PagePastChunk => "a page runs past the end of the column chunk",
            TooManyPages => "the chunk holds more pages than first counted",
            Overrun => "a level or value stream ends before the values the page declares",
            BadBitWidth => "a bit width is larger than the type allows",
            DictIndexOutOfRange => "a dictionary index is out of range",
            ShortPage => "the page holds fewer values than its header declares",
            BadEncoding => "an encoding not valid for this column's type",
            BadDeltaHeader => "an invalid DELTA encoding header",
            OffsetOverflow => "the column's strings exceed 2 GiB in one batch (32-bit offsets)",
            BadLevel => "a definition level is above the column's maximum",
            MissingDictionary => "a dictionary-encoded page in a chunk without a dictionary page",
            BadPrefix => "a DELTA_BYTE_ARRAY prefix is longer than the previous value",
            BadUtf8 => "a string that is not valid UTF-8",
        }
    }
}

/// Parquet `Encoding` values the decoders know.
pub mod encoding {
    /// PLAIN.
    pub(crate) const PLAIN: u32 = 0;
    /// PLAIN_DICTIONARY (v1 name of dictionary indices).
    pub(crate) const PLAIN_DICTIONARY: u32 = 2;
    /// RLE (levels; booleans in v2 pages).
    pub(crate) const RLE: u32 = 3;
    /// BIT_PACKED (deprecated levels encoding).
    pub const BIT_PACKED: u32 = 4;
    /// DELTA_BINARY_PACKED.
    pub const DELTA_BINARY_PACKED: u32 = 5;
    /// DELTA_LENGTH_BYTE_ARRAY.
    pub const DELTA_LENGTH_BYTE_ARRAY: u32 = 6;
    /// DELTA_BYTE_ARRAY.
    pub const DELTA_BYTE_ARRAY: u32 = 7;
    /// RLE_DICTIONARY.
    pub(crate) const RLE_DICTIONARY: u32 = 8;
    /// BYTE_STREAM_SPLIT.
    pub const BYTE_STREAM_SPLIT: u32 = 9;
    /// Not a Parquet encoding: the keys of a dictionary-typed column over one of its pages that is not
    /// dictionary-encoded (a writer's fallback once its dictionary grew too large). The page's values
    /// are decoded into the column's dictionary, in row order from its entry `dict_count`, so row `i`'s
    /// key is `dict_count + i` (`gp_gather_fixed`, INT32 pages only).
    pub(crate) const SEQUENCE_KEYS: u32 = 100;

    /// Whether a page's values are dictionary indices (PLAIN_DICTIONARY, or RLE_DICTIONARY). Twin of
    /// `core_util.cuh`'s `dictionary_encoding`.
    pub(crate) fn is_dictionary(e: u32) -> bool {
        e == PLAIN_DICTIONARY || e == RLE_DICTIONARY
    }
}

/// Parquet physical `Type` values.
pub mod physical {
    /// BOOLEAN.
    pub const BOOLEAN: u32 = 0;
    /// INT32.
    pub const INT32: u32 = 1;
    /// INT64.
    pub const INT64: u32 = 2;
    /// INT96.
    pub const INT96: u32 = 3;
    /// FLOAT.
    pub const FLOAT: u32 = 4;
    /// DOUBLE.
    pub const DOUBLE: u32 = 5;
    /// BYTE_ARRAY.
    pub const BYTE_ARRAY: u32 = 6;
    /// FIXED_LEN_BYTE_ARRAY.
    pub const FIXED_LEN_BYTE_ARRAY: u32 = 7;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body gets a block per 64 KiB of output, one at least, each body's after the one before.
    #[test]
    fn literal_copier_blocks_follow_one_another() {
        let mut items: Vec<UnsnapItem> = [0u64, 1, 65_536, 65_537, 1 << 20]
            .iter()
            .map(|&dst_len| UnsnapItem {
                dst_len,
                ..Default::default()
            })
            .collect();
        assert_eq!(snappy_literals::plan(&mut items), Some(1 + 1 + 1 + 2 + 16));
        let firsts: Vec<u32> = items.iter().map(|it| it.block0).collect();
        assert_eq!(firsts, [0, 1, 2, 3, 5]);
        assert_eq!(snappy_literals::plan(&mut []), Some(0));
        // Past a grid's 2^31 - 1 blocks: no plan.
        let mut huge = vec![
            UnsnapItem {
                dst_len: 1 << 47,
                ..Default::default()
            };
            2
        ];
        assert_eq!(snappy_literals::plan(&mut huge), None);
    }

    #[test]
    fn layout_sizes() {
        let host = [
            std::mem::size_of::<ChunkDesc>(),
            std::mem::size_of::<PageInfo>(),
            std::mem::size_of::<PageDesc>(),
            std::mem::size_of::<DictDesc>(),
            std::mem::size_of::<ColumnDesc>(),
            std::mem::size_of::<ValidateItem>(),
            std::mem::size_of::<UnsnapItem>(),
            std::mem::size_of::<WsnapItem>(),
        ];
        assert_eq!(host.len(), LAYOUT_SIZES.len());
        for ((name, want), got) in LAYOUT_SIZES.iter().zip(host) {
            assert_eq!(*want, got, "{name}");
        }
    }

    /// Long Snappy bodies that compress are cut into segments covering them, a body's in order after
    /// another's; the rest keep their status and are walked whole.
    #[test]
    fn the_check_segments_long_snappy_bodies_of_long_chains() {
        use validate_segments::{MAX_SRC, PRODUCTION, ValidateSegment, plan};
        let item = |codec, src_len: u64, dst_len: u64| ValidateItem {
            src_len,
            dst_len,
            codec,
            status: u32::MAX,
            ..Default::default()
        };
        const MIN: u64 = 96 << 10;
        let mut items = vec![
            item(validate_codec::SNAPPY, 550_000, 1_200_000), // a dictionary page: 135 segments
            item(validate_codec::SNAPPY, MIN - 1, 300_000),   // under 96 kB
            item(validate_codec::SNAPPY, MIN, MIN + MIN / 64), // compresses by a 64th, not more
            item(validate_codec::SNAPPY, MIN, MIN + MIN / 64 + 1), // 24 segments: (96 kB - 256) / 4 kB
            item(validate_codec::LZ4_RAW, 550_000, 1_200_000),
            item(validate_codec::SNAPPY, MAX_SRC + 1, 4 * MAX_SRC), // walked whole by a warp
        ];
        let segs = plan(&mut items, PRODUCTION);
        let statuses: Vec<u32> = items.iter().map(|i| i.status).collect();
        let s = validate_status::SEGMENTED;
        assert_eq!(statuses, [s, u32::MAX, u32::MAX, s, u32::MAX, u32::MAX]);
        assert_eq!(PRODUCTION.min_src, MIN);
        assert_eq!(segs.len(), 135 + 24);
        let want: Vec<ValidateSegment> = (0..135)
            .map(|index| ValidateSegment {
                item: 0,
                index,
                count: 135,
                first: 0,
            })
            .chain((0..24).map(|index| ValidateSegment {
                item: 3,
                index,
                count: 24,
                first: 135,
            }))
            .collect();
        assert_eq!(segs, want);
        // Every segment starts inside its body, and the last one's counted range too.
        let g = PRODUCTION;
        for &(src_len, count) in &[(550_000u64, 135u64), (MIN, 24)] {
            assert!((count - 1) * u64::from(g.seg_bytes) + u64::from(g.overlap) < src_len);
            assert!(count * u64::from(g.seg_bytes) + u64::from(g.overlap) >= src_len);
        }
        // A lane per segment, rounded up to whole warps, then a warp per body.
        assert_eq!(validate_segments::launch_warps(items.len(), segs.len()), 5 + 6);
        assert_eq!(segs.len().div_ceil(32), 5);
        assert_eq!(validate_segments::launch_warps(3, 0), 3);
        assert_eq!(validate_segments::launch_warps(0, 32), 1);
    }

    /// A batch ends with `gp_wsnap_resolve` while no body has more than `RESOLVE_MAX_SEGS` segments.
    #[test]
    fn the_wide_plan_resolves_by_segments_up_to_its_limit() {
        let plan_of = |src_lens: &[u64]| {
            let mut items: Vec<WsnapItem> = src_lens
                .iter()
                .map(|&src_len| WsnapItem {
                    src_len,
                    dst_len: 2 * src_len,
                    ..Default::default()
                })
                .collect();
            wsnap::plan(&mut items, 0)
        };
        let limit = wsnap::RESOLVE_MAX_SEGS * wsnap::SEG;
        assert!(plan_of(&[1, 300_000, limit]).resolve);
        assert!(!plan_of(&[1, limit + 1]).resolve);
        assert!(plan_of(&[]).resolve);
    }

    #[test]
    fn error_codes_round_trip() {
        for code in 1..=15 {
            let e = ErrorCode::from_u32(code).unwrap();
            assert_eq!(e as u32, code);
            assert!(!e.describe().is_empty());
        }
        assert_eq!(ErrorCode::from_u32(0), None);
        assert_eq!(ErrorCode::from_u32(99), None);
    }
}

/// A per-value conversion from the physical form the decoder produces to the Arrow type's.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// `i32` to `i8` (truncating, as arrow-rs's `as` cast).
    I32ToI8 = 1,
    /// `i32` to `i16` (truncating).
    I32ToI16 = 2,
    /// `i32` to `i128` (sign-extending; decimals).
    I32ToI128 = 3,
    /// `i64` to `i128` (sign-extending; decimals).
    I64ToI128 = 4,
    /// INT96 (nanoseconds of day, Julian day) to nanoseconds since the epoch, wrapping as arrow-rs.
    Int96ToNanos = 5,
    /// `i32` to `i64` (sign-extending; `Decimal64` from INT32, and 64-bit string offsets).
    I32ToI64 = 6,
    /// `i32` to `i256` (sign-extending; `Decimal256` from INT32).
    I32ToI256 = 7,
    /// `i64` to `i256` (sign-extending; `Decimal256` from INT64).
    I64ToI256 = 8,
    /// A big-endian two's complement integer of the source width (FIXED_LEN_BYTE_ARRAY decimals, at
    /// most 4 bytes) to `i32`, as arrow-rs's `sign_extend_be`.
    BigEndianToI32 = 9,
    /// The same, at most 8 bytes, to `i64`.
    BigEndianToI64 = 10,
    /// The same, at most 16 bytes, to `i128`.
    BigEndianToI128 = 11,
    /// The same, at most 32 bytes, to `i256`.
    BigEndianToI256 = 12,
    /// INT96 to seconds since the epoch (`Int96::to_seconds`: whole days, then nanoseconds of the day
    /// divided toward zero, wrapping).
    Int96ToSeconds = 13,
    /// INT96 to milliseconds since the epoch (`Int96::to_millis`).
    Int96ToMillis = 14,
    /// INT96 to microseconds since the epoch (`Int96::to_micros`).
    Int96ToMicros = 15,
    /// `i32` days to `i64` milliseconds (`Date64` from a Parquet DATE, as arrow-rs: `x as i64 *
    /// 86_400_000`).
    DaysToMillis = 16,
    /// A Parquet INTERVAL (12 bytes: months, days, milliseconds, each a little-endian `u32`) to
    /// `Interval(YearMonth)`: the months as `i32`.
    IntervalToYearMonth = 17,
    /// The same to `Interval(DayTime)`: the days and milliseconds (8 bytes).
    IntervalToDayTime = 18,
}

impl Conversion {
    /// Bytes per (source, destination) value; `type_len` is the source's width where the physical
    /// type does not fix it (FIXED_LEN_BYTE_ARRAY).
    pub(crate) fn widths(self, type_len: u32) -> (usize, usize) {
        use Conversion as C;
        match self {
            C::I32ToI8 => (4, 1),
            C::I32ToI16 => (4, 2),
            C::I32ToI128 => (4, 16),
            C::I64ToI128 => (8, 16),
            C::Int96ToNanos => (12, 8),
            C::I32ToI64 => (4, 8),
            C::I32ToI256 => (4, 32),
            C::I64ToI256 => (8, 32),
            C::BigEndianToI32 => (type_len as usize, 4),
            C::BigEndianToI64 => (type_len as usize, 8),
            C::BigEndianToI128 => (type_len as usize, 16),
            C::BigEndianToI256 => (type_len as usize, 32),
            C::Int96ToSeconds | C::Int96ToMillis | C::Int96ToMicros => (12, 8),
            C::DaysToMillis => (4, 8),
            C::IntervalToYearMonth => (12, 4),
            C::IntervalToDayTime => (12, 8),
        }
    }
}

/// The row filter's device layout (`kernels/row_filter.cu`): leaf kinds, operators and descriptors,
/// shared by [`crate::decode::row_filter`] and its host twins.
pub mod row_filter {
    use bytemuck::{Pod, Zeroable};

    /// Leaf kinds (`RowLeafDesc::kind`): how a column's values compare.
    pub(crate) const LEAF_SIGNED: u32 = 1;
    /// Unsigned integers.
    pub(crate) const LEAF_UNSIGNED: u32 = 2;
    /// IEEE floats in total order (arrow-rs's `total_cmp`: -NaN < -inf < -0 < +0 < inf < NaN).
    pub(crate) const LEAF_FLOAT: u32 = 3;
    /// Bit-packed booleans (false < true).
    pub(crate) const LEAF_BOOL: u32 = 4;
    /// Byte strings with 4- or 8-byte offsets (`width`), compared as unsigned bytes, shorter first.
    pub(crate) const LEAF_BYTES: u32 = 5;
    /// 16-byte views with data buffers.
    pub(crate) const LEAF_VIEW: u32 = 6;
    /// Byte strings of `width` bytes each.
    pub(crate) const LEAF_FIXED_BYTES: u32 = 7;
    /// Signed dictionary keys mapped through a table of the dictionary values' results.
    pub(crate) const LEAF_DICT_SIGNED: u32 = 8;
    /// Unsigned dictionary keys, likewise.
    pub(crate) const LEAF_DICT_UNSIGNED: u32 = 9;
    /// Validity only (`is null`, `is not null` on any type).
    pub(crate) const LEAF_NULLS: u32 = 10;
    /// IEEE floats (2, 4 or 8 bytes) as IEEE 754, C and pyarrow compare them: NaN neither equal,
    /// less nor greater than anything (only `!=` holds), -0 equal to +0.
    pub(crate) const LEAF_FLOAT_IEEE: u32 = 11;

    /// Leaf operations (`RowLeafDesc::op`).
    pub(crate) const OP_EQ: u32 = 0;
    /// `!=`.
    pub(crate) const OP_NE: u32 = 1;
    /// `<`.
    pub(crate) const OP_LT: u32 = 2;
    /// `<=`.
    pub(crate) const OP_LE: u32 = 3;
    /// `>`.
    pub(crate) const OP_GT: u32 = 4;
    /// `>=`.
    pub(crate) const OP_GE: u32 = 5;
    /// Equal to any of the literals.
    pub(crate) const OP_IN: u32 = 6;
    /// `is null`.
    pub(crate) const OP_IS_NULL: u32 = 7;
    /// `is not null`.
    pub(crate) const OP_IS_NOT_NULL: u32 = 8;

    /// Items a block of the scan kernels takes (`RF_SCAN_TILE`).
    pub(crate) const SCAN_TILE: u64 = 4096;
    /// One predicate leaf as `gp_rf_leaf` reads it (twin of `RowLeafDesc` in `row_filter.cu`). Addresses
    /// are the executor's; lengths in bytes; 0 where unused.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
    pub(crate) struct RowLeafDesc {
        /// `LEAF_*`.
        pub kind: u32,
        /// `OP_*`.
        pub op: u32,
        /// Bytes a value (fixed kinds, dictionary keys), or of an offset (4 or 8, [`LEAF_BYTES`]).
        pub width: u32,
        /// Literals (for a dictionary: its values, one result byte each).
        pub nlits: u32,
        /// Values, views, keys or characters.
        pub values: u64,
        /// Their bytes.
        pub values_len: u64,
        /// Offsets ([`LEAF_BYTES`]) or the data buffers' addresses (`u64` each, [`LEAF_VIEW`]).
        pub offsets: u64,
        /// Their bytes.
        pub offsets_len: u64,
        /// The data buffers' lengths (`u64` each, [`LEAF_VIEW`]).
        pub aux: u64,
        /// Their bytes.
        pub aux_len: u64,
        /// Validity bitmap, or 0.
        pub validity: u64,
        /// Its bytes.
        pub validity_len: u64,
        /// The bit of row 0.
        pub validity_offset: u64,
        /// The value index of row 0.
        pub offset: u64,
        /// Literals: fixed-width values, concatenated bytes, or a dictionary's result bytes.
        pub lits: u64,
        /// Their bytes.
        pub lits_len: u64,
        /// `u64[nlits + 1]` offsets into `lits` (byte kinds).
        pub lit_offsets: u64,
        /// `u64` error word: the first row failing a bounds check is min'ed into it.
        pub error: u64,
    }

    /// Kleene operations of `gp_rf_logic`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(u32)]
    pub(crate) enum RowLogicOp {
        /// `a and b`.
        And = 0,
        /// `a or b`.
        Or = 1,
        /// `not a`.
        Not = 2,
    }

    /// What a scan kernel scans.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(u32)]
    pub enum RowScan {
        /// A tri-state mask (`u8`): its true rows, numbered into `u32` indices.
        Mask = 0,
        /// `u64` lengths into `i32` offsets.
        Lengths32 = 1,
        /// `u64` lengths into `i64` offsets.
        Lengths64 = 2,
    }
}
