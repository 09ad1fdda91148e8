//! Where the decode pipeline's steps run: an [`Executor`] owns the memory and runs the kernels, either
//! on a GPU ([`super::exec_device::DeviceExecutor`]) or on the host through the kernels' references
//! ([`HostExecutor`]). The pipeline ([`super::pipeline`]) is written once against this trait, so CI
//! runs the very orchestration the GPU runs, with the references in place of the kernels.

use bytemuck::Pod;
use parquet::basic::Compression;

use crate::decode::host_kernels::{self, Arena};
use crate::decode::layout::{ChunkDesc, ColumnDesc, DictDesc, PageDesc, PageInfo};
use crate::error::{Error, Result};

/// A family of kernels launched over a step's data pages (a block per page, or several for the string
/// kernels; each returns at once for pages it does not handle), in the order the pipeline launches
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKernel {
    /// v1 level-prefix resolution (`gp_page_setup`).
    Setup,
    /// Definition levels into value indices and validity (`gp_levels`).
    Levels,
    /// Dictionary indices and RLE booleans into dense values (`gp_dict_indices`).
    DictIndices,
    /// DELTA_BINARY_PACKED into dense values (`gp_delta_binary_packed`).
    DeltaBinaryPacked,
    /// BYTE_STREAM_SPLIT into dense values (`gp_byte_stream_split`).
    ByteStreamSplit,
    /// Fixed-width values into the output (`gp_gather_fixed`).
    GatherFixed,
    /// PLAIN and dictionary byte arrays into dense (source, length) (`gp_byte_array_values`).
    ByteArrayValues,
    /// DELTA_LENGTH_BYTE_ARRAY into dense (source, length) (`gp_delta_length_byte_array`).
    DeltaLengthByteArray,
    /// DELTA_BYTE_ARRAY lengths, suffixes and prefixes (`gp_delta_byte_array_lengths`).
    DeltaByteArrayLengths,
    /// DELTA_BYTE_ARRAY pages of FIXED_LEN_BYTE_ARRAY columns, whole, into dense values
    /// (`gp_delta_byte_array_fixed`).
    DeltaByteArrayFixed,
    /// Arrow offsets of byte-array columns (the string offset kernels).
    StringOffsets,
    /// Characters of PLAIN, dictionary and DELTA_LENGTH byte arrays (`gp_copy_strings`).
    CopyStrings,
    /// Characters of DELTA_BYTE_ARRAY pages (`gp_delta_byte_array_copy`).
    DeltaByteArrayCopy,
}

/// How large the pages of one kind are, at most: body bytes and rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PageShape {
    /// Bytes of the largest page body.
    pub bytes: u64,
    /// Rows of the page with the most.
    pub rows: u32,
}

impl PageShape {
    /// The largest of `pages`' bodies and row counts.
    pub fn of<'a>(pages: impl IntoIterator<Item = &'a PageDesc>) -> Self {
        pages.into_iter().fold(Self::default(), |s, p| Self {
            bytes: s.bytes.max(p.data_len),
            rows: s.rows.max(p.num_values),
        })
    }
}

/// One launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Page headers of `n` chunks; `pages` 0 for the count pass.
    PageHeaders {
        /// `ChunkDesc[n]`.
        chunks: u64,
        /// Chunks.
        n: u32,
        /// `PageInfo[]`, or 0.
        pages: u64,
    },
    /// Entry tables of `n` BYTE_ARRAY dictionaries.
    DictByteArrayIndex {
        /// `DictDesc[n]`.
        dicts: u64,
        /// Dictionaries.
        n: u32,
        /// Bytes of the largest dictionary, for an executor that splits a walk among workers.
        largest: u64,
    },
    /// A page kernel over `n` pages and `ncols` columns.
    Pages {
        /// Which.
        kind: PageKernel,
        /// `PageDesc[n]`.
        pages: u64,
        /// Pages.
        n: u32,
        /// `ColumnDesc[ncols]`.
        cols: u64,
        /// Columns.
        ncols: u32,
        /// The largest BYTE_ARRAY page, for an executor that splits such pages among workers.
        largest_strings: PageShape,
    },
    /// `out[i] = levels[i] >= threshold` over `n` bytes (`gp_levels_at_least`): a struct's validity.
    LevelsAtLeast {
        /// `u8[n]`.
        levels: u64,
        /// Bytes.
        n: u64,
        /// The struct's definition level.
        threshold: u32,
        /// `u8[n]`.
        out: u64,
    },
    /// Repetition levels of `n` pages, a byte each (`gp_rep_levels`; `LevelJob[n]`, errors in them).
    RepLevels {
        /// `LevelJob[n]`.
        jobs: u64,
        /// Jobs.
        n: u32,
    },
    /// `pos[i]` (`u32[n + 1]`): the slots of `space` among the `n` entries before `i`
    /// (the `gp_slot_tile_*` kernels; see [`crate::decode::host_kernels::nested`]). Levels 0 where `def` / `rep` is 0.
    SlotScan {
        /// `u8[n]` definition levels, or 0.
        def: u64,
        /// `u8[n]` repetition levels, or 0.
        rep: u64,
        /// Entries.
        n: u64,
        /// `(r, t)`: entries with `rep <= r` and `def >= t`.
        space: (u32, u32),
        /// `u32[n + 1]`.
        pos: u64,
    },
    /// A list's offsets (`gp_list_offsets`): at each slot of its `parent` space, the count of its
    /// items' slots before it, and the total last.
    ListOffsets {
        /// `u8[n]`, or 0.
        def: u64,
        /// `u8[n]`, or 0.
        rep: u64,
        /// Entries.
        n: u64,
        /// The list's own space.
        parent: (u32, u32),
        /// Its [`Kernel::SlotScan`].
        parent_pos: u64,
        /// Its items' [`Kernel::SlotScan`].
        child_pos: u64,
        /// 64-bit offsets (`LargeList`), else 32-bit.
        wide: bool,
        /// `parent slots + 1` offsets.
        offsets: u64,
    },
    /// Checks a fixed-size list's 32-bit offsets (`gp_fixed_size_check`): the lowest list of neither 0
    /// nor `size` items is min'ed into the `u64` at `result` (starting at `u64::MAX`), the lists of no
    /// item counted into the `u64` after it (starting at 0).
    FixedSizeCheck {
        /// `i32[slots + 1]`.
        offsets: u64,
        /// Lists.
        slots: u64,
        /// Items a list.
        size: u32,
        /// `u64[2]`.
        result: u64,
    },
    /// A fixed-size list's items with its lists of no item padded with `size` nulls
    /// (`gp_fixed_size_pad`).
    FixedSizePad {
        /// `i32[slots + 1]`.
        offsets: u64,
        /// Lists.
        slots: u64,
        /// Items a list.
        size: u32,
        /// The items: values, validity bitmap (0: all valid), count.
        src: (u64, u64, u64),
        /// Bytes a value.
        width: u32,
        /// `slots * size` values.
        dst: u64,
        /// `u8[slots * size]`: 1 where the item is valid.
        dst_valid: u64,
    },
    /// `out[pos[i]] = def[i] >= threshold` at each slot `i` of `space` (`gp_slot_flags`).
    SlotFlags {
        /// `u8[n]`, or 0.
        def: u64,
        /// `u8[n]`, or 0.
        rep: u64,
        /// Entries.
        n: u64,
        /// `(r, t)`.
        space: (u32, u32),
        /// Its [`Kernel::SlotScan`].
        pos: u64,
        /// The level.
        threshold: u32,
        /// `u8[slots]`.
        out: u64,
    },
    /// The `width`-byte values of a leaf's entries at the slots of `space`, packed (`gp_compact`);
    /// with `with_end` entry `n` too (a string column's last offset).
    Compact {
        /// `u8[n]`, or 0.
        def: u64,
        /// `u8[n]`, or 0.
        rep: u64,
        /// Entries.
        n: u64,
        /// `(r, t)`.
        space: (u32, u32),
        /// Its [`Kernel::SlotScan`].
        pos: u64,
        /// `n` (or `n + 1`) values.
        src: u64,
        /// Bytes a value.
        width: u32,
        /// Whether entry `n` follows.
        with_end: bool,
        /// The slots' values.
        dst: u64,
    },
    /// Packs `n` bytes (non-zero = set) into an LSB-first bitmap of `u32` words, adding the set bits to
    /// the `u64` at `count`.
    PackBits {
        /// `u8[n]`.
        bytes: u64,
        /// Bytes.
        n: u64,
        /// `u32[ceil(n / 32)]`.
        words: u64,
        /// `u64`.
        count: u64,
    },
    /// Checks that every string of a column is UTF-8: the first failing byte position is min'ed into
    /// the `u64` at `result` (which starts at `u64::MAX`).
    ValidateUtf8 {
        /// `u8[n]`, the characters.
        chars: u64,
        /// Characters.
        n: u64,
        /// `i32[rows + 1]` (or `i64` where `offset_width` is 8), the Arrow offsets.
        offsets: u64,
        /// Bytes per offset: 4 or 8.
        offset_width: u32,
        /// Rows.
        rows: u64,
        /// `u64`.
        result: u64,
    },
    /// A value conversion of `n` rows ([`Conversion`]).
    Convert {
        /// Which.
        op: Conversion,
        /// Source values.
        src: u64,
        /// Bytes per source value ([`Conversion::widths`]).
        src_width: u32,
        /// Rows.
        n: u64,
        /// Destination values.
        dst: u64,
    },
    /// Arrow's 16-byte views (`Utf8View`, `BinaryView`) of `n` strings given as 32-bit offsets into
    /// `chars`: a string of at most 12 bytes inline, a longer one as its length, first 4 bytes, buffer
    /// 0 and its offset; the longest length is max'ed into the `u32` at `max_len`.
    StringsToViews {
        /// `i32[n + 1]`, or `i64` where `segment` is not 0.
        offsets: u64,
        /// 0: one data buffer (buffer 0, offset = the string's start). Else the offsets are `i64` and
        /// the characters are cut into segments of this many bytes (at most 2^30): a string starting in
        /// segment `j` gets buffer `j` and its offset in it, buffer `j` holding segments `j` and `j + 1`.
        segment: u64,
        /// The characters.
        chars: u64,
        /// Characters (`offsets[n]`); a string outside them reads as empty.
        chars_len: u64,
        /// Strings.
        n: u64,
        /// `u8[16 n]`.
        views: u64,
        /// `u32`, starting at 0.
        max_len: u64,
    },
    /// `n` bytes from `src` to `dst` (not overlapping).
    CopyBytes {
        /// Source.
        src: u64,
        /// Destination.
        dst: u64,
        /// Bytes.
        n: u64,
    },
    /// Decimals of `width` bytes (16: `i128`, 32: `i256`) from `n` big-endian two's complement byte
    /// strings (BYTE_ARRAY decimals; empty: 0, as arrow-rs reads a null slot); the first row whose
    /// string is longer than `width` is min'ed into the `u64` at `too_long` (starting at `u64::MAX`),
    /// where arrow-rs would panic.
    StringsToDecimal {
        /// `i32[n + 1]`.
        offsets: u64,
        /// The characters.
        chars: u64,
        /// Characters (`offsets[n]`); a string outside them reads as empty.
        chars_len: u64,
        /// Strings.
        n: u64,
        /// 16 or 32.
        width: u32,
        /// `u8[width n]`.
        dst: u64,
        /// `u64`.
        too_long: u64,
    },
    /// A row-filter predicate leaf over `n` rows into tri-state bytes (`gp_rf_leaf`; see
    /// [`crate::decode::row_filter`]).
    RowLeaf {
        /// `RowLeafDesc`.
        leaf: u64,
        /// Rows.
        n: u64,
        /// `u8[n]`.
        out: u64,
    },
    /// Kleene logic over tri-state bytes (`gp_rf_logic`).
    RowLogic {
        /// Which.
        op: crate::decode::layout::row_filter::RowLogicOp,
        /// `u8[n]`.
        a: u64,
        /// `u8[n]` (unread for `not`).
        b: u64,
        /// Bytes.
        n: u64,
        /// `u8[n]`.
        out: u64,
    },
    /// Tile sums of a row-filter scan (`gp_rf_tile_sums`).
    RowTileSums {
        /// What it scans.
        kind: crate::decode::layout::row_filter::RowScan,
        /// The items.
        src: u64,
        /// Items.
        n: u64,
        /// `u64[ceil(n / SCAN_TILE)]`.
        sums: u64,
    },
    /// The tile sums' exclusive prefix sums, in place, and their total (`gp_rf_tile_bases`).
    RowTileBases {
        /// `u64[ntiles]`.
        sums: u64,
        /// Tiles.
        ntiles: u64,
        /// `u64`.
        total: u64,
    },
    /// Each tile scanned from its base: a mask's selected indices or lengths' offsets (`gp_rf_tile_scan`).
    RowTileScan {
        /// What it scans.
        kind: crate::decode::layout::row_filter::RowScan,
        /// The items.
        src: u64,
        /// Items.
        n: u64,
        /// The tile bases.
        bases: u64,
        /// `u64` total.
        total: u64,
        /// `u32` indices, or `n + 1` offsets.
        out: u64,
        /// Entries `out` holds.
        out_cap: u64,
    },
    /// A tri-state mask packed into bits where true, the set bits added to `count` (`gp_rf_mask_bits`).
    RowMaskBits {
        /// `u8[n]`.
        mask: u64,
        /// Rows.
        n: u64,
        /// `u32[ceil(n / 32)]`.
        words: u64,
        /// `u64`.
        count: u64,
    },
    /// Fixed-width values gathered at selected rows (`gp_rf_gather_fixed`).
    RowGatherFixed {
        /// The values.
        src: u64,
        /// Their bytes.
        src_len: u64,
        /// Bytes a value.
        width: u32,
        /// Value index of row 0.
        offset: u64,
        /// Rows an index may name.
        rows: u64,
        /// `u32[count]`.
        indices: u64,
        /// Selected rows.
        count: u64,
        /// `count * width` bytes.
        dst: u64,
        /// `u64` error word.
        error: u64,
    },
    /// Bits gathered at selected rows, the set ones counted (`gp_rf_gather_bits`).
    RowGatherBits {
        /// The bitmap.
        src: u64,
        /// Its bytes.
        src_len: u64,
        /// Bit of row 0.
        bit_offset: u64,
        /// Rows an index may name.
        rows: u64,
        /// `u32[count]`.
        indices: u64,
        /// Selected rows.
        count: u64,
        /// `u32[ceil(count / 32)]`.
        dst: u64,
        /// `u64` set-bit counter.
        set: u64,
        /// `u64` error word.
        error: u64,
    },
    /// The lengths of selected rows' ranges (strings, lists) (`gp_rf_gather_lengths`).
    RowGatherLengths {
        /// The offsets.
        offsets: u64,
        /// Their bytes.
        offsets_len: u64,
        /// 64-bit offsets, else 32-bit.
        wide: bool,
        /// Offset index of row 0.
        offset: u64,
        /// Rows an index may name.
        rows: u64,
        /// Characters (or items) the ranges must lie in.
        chars_len: u64,
        /// `u32[count]`.
        indices: u64,
        /// Selected rows.
        count: u64,
        /// `u64[count]`.
        lens: u64,
        /// `u64` error word.
        error: u64,
    },
    /// Selected rows' characters copied to their new offsets (`gp_rf_gather_chars`).
    RowGatherChars {
        /// The offsets.
        offsets: u64,
        /// Their bytes.
        offsets_len: u64,
        /// 64-bit offsets, else 32-bit.
        wide: bool,
        /// Offset index of row 0.
        offset: u64,
        /// Rows an index may name.
        rows: u64,
        /// The characters.
        chars: u64,
        /// Their bytes.
        chars_len: u64,
        /// `u32[count]`.
        indices: u64,
        /// Selected rows.
        count: u64,
        /// `count + 1` new offsets.
        dst_offsets: u64,
        /// Whether they are 64-bit.
        dst_wide: bool,
        /// The new characters.
        dst: u64,
        /// Their bytes.
        dst_len: u64,
        /// `u64` error word.
        error: u64,
    },
    /// A list's selected rows' item indices (`gp_rf_expand_ranges`).
    RowExpandRanges {
        /// The offsets.
        offsets: u64,
        /// Their bytes.
        offsets_len: u64,
        /// 64-bit offsets, else 32-bit.
        wide: bool,
        /// Offset index of row 0.
        offset: u64,
        /// Rows an index may name.
        rows: u64,
        /// Items of the child.
        child_rows: u64,
        /// `u32[count]`.
        indices: u64,
        /// Selected rows.
        count: u64,
        /// `count + 1` new offsets.
        dst_offsets: u64,
        /// Whether they are 64-bit.
        dst_wide: bool,
        /// `u32[child_count]`.
        child_indices: u64,
        /// Selected items.
        child_count: u64,
        /// `u64` error word.
        error: u64,
    },
}

pub use crate::decode::layout::Conversion;

/// One compressed page body to decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decompress {
    /// Address of the compressed bytes.
    pub src: u64,
    /// Compressed bytes.
    pub src_len: usize,
    /// Address of the output.
    pub dst: u64,
    /// Bytes the page declares uncompressed (the output's size).
    pub dst_len: usize,
}

/// Where a batch of pages was decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecompressedOn {
    /// On the GPU, by the named decoders (`nvCOMP`, or for Snappy `gp_unsnap`, and `gp_wsnap` and
    /// `gp_snappy_literals` beside either, joined by " + ").
    Gpu(String),
    /// On the host (and uploaded), with the reason.
    Host(String),
}

/// What the host executor fills [`Executor::alloc_uninit`]'s allocations with: as a length, count or
/// index it is far out of range (0xA5A5A5A5), as an i32 value index it is negative, as a flag neither 0
/// nor 1, so a kernel reading a byte no kernel wrote gives an error or a value unequal to arrow-rs's.
pub(crate) const UNINIT_POISON: u8 = 0xA5;

/// Owns a step's memory and runs its kernels.
pub(crate) trait Executor {
    /// The owned buffer type handed out by [`Self::take`].
    type Buffer: OwnedBuffer;

    /// A new zeroed allocation of `bytes` bytes, owned by the executor until [`Self::take`]n.
    fn alloc(&mut self, bytes: usize) -> Result<u64>;
    /// A new allocation of `bytes` bytes whose contents are unspecified: for buffers whose every byte
    /// that is read is written first by a kernel (zeroing them took 1-2 ms of a whole-file step on
    /// the H200). The host executor fills it with [`UNINIT_POISON`], so that CI catches a read of a byte
    /// no kernel wrote. An empty one has no byte to read; where it is backed by one (the device's
    /// allocations are at least 1 byte, which `to_host()` copies), that byte is zeroed.
    fn alloc_uninit(&mut self, bytes: usize) -> Result<u64>;
    /// A new allocation holding `items`.
    fn upload<T: Pod>(&mut self, items: &[T]) -> Result<u64>;
    /// Writes `items` at `addr`, inside an allocation of this executor.
    fn write<T: Pod>(&mut self, addr: u64, items: &[T]) -> Result<()>;
    /// `count` values of `T` at `addr` (waits for the work queued before).
    fn read<T: Pod>(&mut self, addr: u64, count: usize) -> Result<Vec<T>>;
    /// Hands over the allocation that starts at `addr`.
    fn take(&mut self, addr: u64) -> Result<Self::Buffer>;
    /// Frees the allocation that starts at `addr` now.
    fn free(&mut self, addr: u64);
    /// Takes back a buffer [`Self::take`] handed out (kernels may then read it), at the address returned
    /// (the host executor's is a copy).
    fn adopt(&mut self, buffer: Self::Buffer) -> Result<u64>;
    /// Tells the executor that nothing the step queues from now on reads its fetched chunks (at
    /// `chunk_base`): it frees them where it owns them (the host executor's upload, a read's chunks
    /// handed over), and keeps them where they are borrowed.
    fn release_chunks(&mut self, chunk_base: u64);
    /// The most memory one decompression batch held apart from the executor's own allocations (nvCOMP's
    /// aligned input copies and temporary memory); 0 where none does.
    fn decompressor_scratch(&self) -> u64 {
        0
    }
    /// Queues a kernel.
    fn launch(&mut self, kernel: Kernel) -> Result<()>;
    /// The most characters a string column of 32-bit offsets holds in one step: `i32::MAX` (the
    /// kernels' limit), less where a test says so ([`HostExecutor::with_string_offset_limit`]).
    fn string_offset_limit(&self) -> u64 {
        i32::MAX as u64
    }
    /// Decompresses `items` (all of codec `codec`), writing each output and returning each page's
    /// outcome: `Ok(actual bytes)` or `Err(why)`. Returns where it ran.
    fn decompress(
        &mut self,
        codec: Compression,
        items: &[Decompress],
    ) -> Result<(Vec<std::result::Result<usize, String>>, DecompressedOn)>;
}

/// A buffer an executor hands over: device memory, or host bytes for the host executor.
pub trait OwnedBuffer: std::fmt::Debug + Send + Sync {
    /// Bytes.
    fn len(&self) -> usize;
    /// Whether it holds no byte.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A host copy of the bytes.
    fn to_host(&self) -> Result<Vec<u8>>;
    /// The address of the first byte, in the memory the buffer lives in (host or device): what an
    /// Arrow C Device Data Interface export hands out.
    fn address(&self) -> u64;
}

impl OwnedBuffer for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        Ok(self.clone())
    }
    fn address(&self) -> u64 {
        self.as_ptr() as u64
    }
}

impl OwnedBuffer for crate::gpu::DeviceBuffer<u8> {
    fn len(&self) -> usize {
        crate::gpu::DeviceBuffer::len(self)
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        self.copy_to_host()
    }
    fn address(&self) -> u64 {
        self.device_address()
    }
}

/// The host executor: an [`Arena`] for memory and the kernels' references for the kernels.
#[derive(Debug)]
pub(crate) struct HostExecutor {
    arena: Arena,
    /// The most characters a column of 32-bit offsets holds in one step (`i32::MAX`; smaller in tests,
    /// through [`Self::with_string_offset_limit`], to reach the paths of larger steps on small files).
    string_offset_limit: u64,
    /// Page-header passes run (`gp_page_headers` launches), for tests of the one-pass path.
    header_passes: usize,
    /// Allocations made (each a driver call on the device), for tests of how they grow.
    allocations: usize,
}

impl HostExecutor {
    /// An empty executor.
    pub fn new() -> Self {
        HostExecutor {
            arena: Arena::new(),
            string_offset_limit: i32::MAX as u64,
            header_passes: 0,
            allocations: 0,
        }
    }

    /// Test support: columns of 32-bit offsets hold at most `limit` characters a step (as if 2 GiB were
    /// `limit` bytes), so small files reach what steps of over 2 GiB of strings do.
    pub(crate) fn with_string_offset_limit(mut self, limit: u64) -> Self {
        self.string_offset_limit = limit.clamp(2, i32::MAX as u64);
        self
    }

    /// Page-header passes run so far.
    pub(crate) fn header_passes(&self) -> usize {
        self.header_passes
    }

    /// Allocations made so far (`alloc`, `alloc_uninit`, `upload`, `adopt`).
    pub(crate) fn allocations(&self) -> usize {
        self.allocations
    }

    /// Most bytes held at once, what was uploaded included (as [`crate::decode::exec_device`]'s
    /// executor counts a step's peak, less the fetched chunks it borrows).
    #[cfg(test)]
    pub(crate) fn peak_bytes(&self) -> u64 {
        self.arena.peak_bytes()
    }

    fn missing(addr: u64, what: &str) -> Error {
        Error::device(
            "host reference decoder",
            format!("{what} at {addr:#x} is outside every allocation"),
        )
    }
}

impl Default for HostExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl Executor for HostExecutor {
    type Buffer = Vec<u8>;

    fn string_offset_limit(&self) -> u64 {
        self.string_offset_limit
    }

    fn alloc(&mut self, bytes: usize) -> Result<u64> {
        self.allocations += 1;
        Ok(self.arena.alloc(bytes))
    }

    fn alloc_uninit(&mut self, bytes: usize) -> Result<u64> {
        self.allocations += 1;
        Ok(self.arena.upload(&vec![UNINIT_POISON; bytes]))
    }

    fn upload<T: Pod>(&mut self, items: &[T]) -> Result<u64> {
        self.allocations += 1;
        Ok(self.arena.upload_slice(items))
    }

    fn write<T: Pod>(&mut self, addr: u64, items: &[T]) -> Result<()> {
        if self.arena.write(addr, items) {
            Ok(())
        } else {
            Err(Self::missing(addr, "a write"))
        }
    }

    fn read<T: Pod>(&mut self, addr: u64, count: usize) -> Result<Vec<T>> {
        self.arena
            .read(addr, count)
            .ok_or_else(|| Self::missing(addr, "a read"))
    }

    fn take(&mut self, addr: u64) -> Result<Vec<u8>> {
        let bytes = self
            .arena
            .region(addr)
            .ok_or_else(|| Self::missing(addr, "a buffer"))?
            .to_vec();
        self.arena.free(addr);
        Ok(bytes)
    }

    fn free(&mut self, addr: u64) {
        self.arena.free(addr);
    }

    fn adopt(&mut self, buffer: Vec<u8>) -> Result<u64> {
        self.allocations += 1;
        Ok(self.arena.upload(&buffer))
    }

    fn release_chunks(&mut self, chunk_base: u64) {
        // The chunks were uploaded as one allocation: a kernel's reference reading them after this
        // finds no allocation there and fails, so CI checks the pipeline's claim.
        self.arena.free(chunk_base);
    }

    fn launch(&mut self, kernel: Kernel) -> Result<()> {
        if matches!(kernel, Kernel::PageHeaders { .. }) {
            self.header_passes += 1;
        }
        let a = &mut self.arena;
        if run_row_filter_reference(a, &kernel) {
            return Ok(());
        }
        match kernel {
            Kernel::PageHeaders { chunks, n, pages } => {
                let mut cs: Vec<ChunkDesc> = a
                    .read(chunks, n as usize)
                    .ok_or_else(|| Self::missing(chunks, "chunks"))?;
                if pages == 0 {
                    host_kernels::page_headers::page_headers(a, &mut cs, None);
                } else {
                    let total: usize = cs
                        .iter()
                        .map(|c| c.first_page as usize + c.page_capacity as usize)
                        .max()
                        .unwrap_or(0);
                    let mut ps: Vec<PageInfo> = a.read(pages, total).ok_or_else(|| Self::missing(pages, "pages"))?;
                    host_kernels::page_headers::page_headers(a, &mut cs, Some(&mut ps));
                    a.write(pages, &ps);
                }
                a.write(chunks, &cs);
            }
            Kernel::DictByteArrayIndex { dicts, n, largest: _ } => {
                let mut ds: Vec<DictDesc> = a
                    .read(dicts, n as usize)
                    .ok_or_else(|| Self::missing(dicts, "dictionaries"))?;
                host_kernels::core::dict_byte_array_index(a, &mut ds);
                a.write(dicts, &ds);
            }
            Kernel::Pages {
                kind,
                pages,
                n,
                cols,
                ncols,
                largest_strings: _,
            } => {
                let mut ps: Vec<PageDesc> = a.read(pages, n as usize).ok_or_else(|| Self::missing(pages, "pages"))?;
                let mut cs: Vec<ColumnDesc> = a
                    .read(cols, ncols as usize)
                    .ok_or_else(|| Self::missing(cols, "columns"))?;
                use host_kernels::{core, delta};
                match kind {
                    PageKernel::Setup => core::page_setup(a, &mut ps),
                    PageKernel::Levels => core::levels(a, &mut ps, &cs),
                    PageKernel::DictIndices => core::dict_indices(a, &mut ps, &cs),
                    PageKernel::DeltaBinaryPacked => delta::delta_binary_packed(a, &mut ps, &cs),
                    PageKernel::ByteStreamSplit => delta::byte_stream_split(a, &mut ps, &cs),
                    PageKernel::GatherFixed => core::gather_fixed(a, &mut ps, &cs),
                    PageKernel::ByteArrayValues => core::byte_array_values(a, &mut ps, &cs),
                    PageKernel::DeltaLengthByteArray => delta::delta_length_byte_array(a, &mut ps, &cs),
                    PageKernel::DeltaByteArrayLengths => delta::delta_byte_array_lengths(a, &mut ps, &cs),
                    PageKernel::DeltaByteArrayFixed => delta::delta_byte_array_fixed(a, &mut ps, &cs),
                    PageKernel::StringOffsets => core::string_offsets_within(a, &ps, &mut cs, self.string_offset_limit),
                    PageKernel::CopyStrings => core::copy_strings(a, &mut ps, &cs),
                    PageKernel::DeltaByteArrayCopy => delta::delta_byte_array_copy(a, &mut ps, &cs),
                }
                a.write(pages, &ps);
                a.write(cols, &cs);
            }
            Kernel::LevelsAtLeast {
                levels,
                n,
                threshold,
                out,
            } => host_kernels::nested::levels_at_least(a, levels, n, threshold, out),
            Kernel::RepLevels { jobs, n } => {
                let mut js: Vec<host_kernels::nested::LevelJob> = a
                    .read(jobs, n as usize)
                    .ok_or_else(|| Self::missing(jobs, "level jobs"))?;
                host_kernels::nested::rep_levels(a, &mut js);
                a.write(jobs, &js);
            }
            Kernel::SlotScan {
                def,
                rep,
                n,
                space,
                pos,
            } => host_kernels::nested::slot_scan(a, def, rep, n, space, pos),
            Kernel::FixedSizeCheck {
                offsets,
                slots,
                size,
                result,
            } => host_kernels::nested::fixed_size_check(a, offsets, slots, size, result),
            Kernel::FixedSizePad {
                offsets,
                slots,
                size,
                src,
                width,
                dst,
                dst_valid,
            } => host_kernels::nested::fixed_size_pad(a, offsets, slots, size, src, width, dst, dst_valid),
            Kernel::ListOffsets {
                def,
                rep,
                n,
                parent,
                parent_pos,
                child_pos,
                wide,
                offsets,
            } => host_kernels::nested::list_offsets(a, def, rep, n, parent, parent_pos, child_pos, wide, offsets),
            Kernel::SlotFlags {
                def,
                rep,
                n,
                space,
                pos,
                threshold,
                out,
            } => host_kernels::nested::slot_flags(a, def, rep, n, space, pos, threshold, out),
            Kernel::Compact {
                def,
                rep,
                n,
                space,
                pos,
                src,
                width,
                with_end,
                dst,
            } => host_kernels::nested::compact(a, def, rep, n, space, pos, src, width, with_end, dst),
            Kernel::PackBits { bytes, n, words, count } => {
                let set = host_kernels::core::pack_bits(a, bytes, n, words);
                let before: u64 = a.read::<u64>(count, 1).and_then(|v| v.first().copied()).unwrap_or(0);
                a.write(count, &[before + set]);
            }
            Kernel::ValidateUtf8 {
                chars,
                n,
                offsets,
                offset_width,
                rows,
                result,
            } => host_kernels::core::validate_utf8_at(a, chars, n, (offsets, offset_width), rows, result),
            Kernel::Convert {
                op,
                src,
                src_width,
                n,
                dst,
            } => host_kernels::convert::convert(a, op, src, src_width, n, dst),
            Kernel::StringsToViews {
                offsets,
                segment,
                chars,
                chars_len,
                n,
                views,
                max_len,
            } => host_kernels::convert::strings_to_views(a, (offsets, segment), chars, chars_len, n, views, max_len),
            Kernel::CopyBytes { src, dst, n } => {
                let bytes = a
                    .get(src, n)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| Self::missing(src, "a copy"))?;
                if !a.write(dst, &bytes) {
                    return Err(Self::missing(dst, "a copy"));
                }
            }
            Kernel::StringsToDecimal {
                offsets,
                chars,
                chars_len,
                n,
                width,
                dst,
                too_long,
            } => host_kernels::convert::strings_to_decimal(a, offsets, chars, chars_len, n, width, dst, too_long),
            // Run above.
            Kernel::RowLeaf { .. }
            | Kernel::RowLogic { .. }
            | Kernel::RowTileSums { .. }
            | Kernel::RowTileBases { .. }
            | Kernel::RowTileScan { .. }
            | Kernel::RowMaskBits { .. }
            | Kernel::RowGatherFixed { .. }
            | Kernel::RowGatherBits { .. }
            | Kernel::RowGatherLengths { .. }
            | Kernel::RowGatherChars { .. }
            | Kernel::RowExpandRanges { .. } => {}
        }
        Ok(())
    }

    fn decompress(
        &mut self,
        codec: Compression,
        items: &[Decompress],
    ) -> Result<(Vec<std::result::Result<usize, String>>, DecompressedOn)> {
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            let r = match self.arena.get(it.src, it.src_len as u64) {
                None => Err("compressed bytes outside the chunk".to_string()),
                Some(src) => crate::decode::decompress::decompress_host(codec, src, it.dst_len).and_then(|bytes| {
                    if self.arena.write(it.dst, &bytes) {
                        Ok(bytes.len())
                    } else {
                        Err("output outside its buffer".to_string())
                    }
                }),
            };
            out.push(r);
        }
        Ok((out, DecompressedOn::Host("the host reference decoder".into())))
    }
}

/// Runs a row-filter [`Kernel`] on the host references; `false` for the other kernels.
fn run_row_filter_reference(a: &mut crate::decode::host_kernels::Arena, kernel: &Kernel) -> bool {
    use crate::decode::host_kernels::row_filter as r;
    match *kernel {
        Kernel::RowLeaf { leaf, n, out } => r::leaf(a, leaf, n, out),
        Kernel::RowLogic { op, a: x, b, n, out } => r::logic(a, op, x, b, n, out),
        Kernel::RowTileSums { kind, src, n, sums } => r::tile_sums(a, kind, src, n, sums),
        Kernel::RowTileBases { sums, ntiles, total } => r::tile_bases(a, sums, ntiles, total),
        Kernel::RowTileScan {
            kind,
            src,
            n,
            bases,
            total,
            out,
            out_cap,
        } => r::tile_scan(a, kind, src, n, bases, total, out, out_cap),
        Kernel::RowMaskBits { mask, n, words, count } => r::mask_bits(a, mask, n, words, count),
        Kernel::RowGatherFixed {
            src,
            src_len,
            width,
            offset,
            rows,
            indices,
            count,
            dst,
            error,
        } => r::gather_fixed(a, src, src_len, width, offset, rows, indices, count, dst, error),
        Kernel::RowGatherBits {
            src,
            src_len,
            bit_offset,
            rows,
            indices,
            count,
            dst,
            set,
            error,
        } => r::gather_bits(a, src, src_len, bit_offset, rows, indices, count, dst, set, error),
        Kernel::RowGatherLengths {
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            chars_len,
            indices,
            count,
            lens,
            error,
        } => r::gather_lengths(
            a,
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            chars_len,
            indices,
            count,
            lens,
            error,
        ),
        Kernel::RowGatherChars {
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            chars,
            chars_len,
            indices,
            count,
            dst_offsets,
            dst_wide,
            dst,
            dst_len,
            error,
        } => r::gather_chars(
            a,
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            chars,
            chars_len,
            indices,
            count,
            dst_offsets,
            dst_wide,
            dst,
            dst_len,
            error,
        ),
        Kernel::RowExpandRanges {
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            child_rows,
            indices,
            count,
            dst_offsets,
            dst_wide,
            child_indices,
            child_count,
            error,
        } => r::expand_ranges(
            a,
            offsets,
            offsets_len,
            wide,
            offset,
            rows,
            child_rows,
            indices,
            count,
            dst_offsets,
            dst_wide,
            child_indices,
            child_count,
            error,
        ),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_shape_takes_the_largest_body_and_row_count_apart() {
        let page = |data_len, num_values| PageDesc {
            data_len,
            num_values,
            ..Default::default()
        };
        let pages = [page(10, 500), page(900, 20), page(40, 7)];
        assert_eq!(PageShape::of(&pages), PageShape { bytes: 900, rows: 500 });
        assert_eq!(PageShape::of(&[]), PageShape::default());
    }
}
