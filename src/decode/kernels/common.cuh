// Shared by every gpu-parquet decode kernel: the descriptor structs (twins of src/decode/layout.rs,
// field for field), error codes, and bounds-checked readers. Compiled by NVRTC, so no host headers.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

// ---- descriptors (see layout.rs for the meaning of each field) ----
struct ChunkDesc {
    u64 start; u64 len;
    u32 first_page; u32 page_capacity; u32 page_count; u32 error;
    u64 error_at;
};

struct PageInfo {
    u64 header_offset; u64 data_offset;
    u32 header_len;
    i32 page_type; i32 compressed_size; i32 uncompressed_size; i32 num_values; i32 encoding;
    i32 def_level_encoding; i32 rep_level_encoding; i32 num_nulls; i32 num_rows;
    i32 def_levels_byte_length; i32 rep_levels_byte_length; i32 is_compressed; i32 reserved;
};

struct PageDesc {
    u64 data; u64 data_len;
    u64 levels; u64 levels_len;
    u64 values; u64 values_len;
    u64 dict; u64 dict_len;
    u64 dict_index;
    u32 dict_count; u32 num_values; u32 row_start; u32 num_non_null;
    u32 encoding; u32 physical; u32 type_len; u32 max_def; u32 def_bit_width; u32 flags;
    u32 column; u32 error; u32 error_detail; u32 reserved;
};

#define PAGE_V1_LEVELS 1u
#define PAGE_V1_REP_LEVELS 2u

struct DictEntry { u32 offset; u32 len; };

struct DictDesc {
    u64 data; u64 data_len; u64 index;
    u32 count; u32 error; u32 error_detail; u32 reserved;
};

struct ColumnDesc {
    u64 num_rows; u64 vidx; u64 dense;
    u32 dense_width; u32 out_width;
    u64 out_values; u64 out_valid; u64 out_offsets; u64 str_src; u64 str_len; u64 chars_capacity;
    u32 physical; u32 error;
    u64 out_views; u64 view_segment; u64 view_longest;
    u32 view_flags; u32 view_buffer; u64 view_pages; u64 view_pages_len;
    u64 out_def;
};
// ColumnDesc::view_flags (layout.rs view_flags).
#define VIEW_IN_COPY 1u
#define VIEW_CHECK_UTF8 2u
#define VIEW_DICT_VIEWS 4u

// ---- error codes (ErrorCode in layout.rs) ----
#define ERR_HEADER_PAST_CHUNK 1u
#define ERR_BAD_HEADER 2u
#define ERR_BAD_PAGE_SIZE 3u
#define ERR_PAGE_PAST_CHUNK 4u
#define ERR_TOO_MANY_PAGES 5u
#define ERR_OVERRUN 6u
#define ERR_BAD_BIT_WIDTH 7u
#define ERR_DICT_INDEX 8u
#define ERR_SHORT_PAGE 9u
#define ERR_BAD_ENCODING 10u
#define ERR_BAD_DELTA_HEADER 11u
#define ERR_OFFSET_OVERFLOW 12u
#define ERR_BAD_LEVEL 13u
#define ERR_MISSING_DICTIONARY 14u
#define ERR_BAD_PREFIX 15u
#define ERR_BAD_UTF8 16u

// ---- Parquet enums ----
#define ENC_PLAIN 0u
#define ENC_PLAIN_DICTIONARY 2u
#define ENC_RLE 3u
#define ENC_BIT_PACKED 4u
#define ENC_DELTA_BINARY_PACKED 5u
#define ENC_DELTA_LENGTH_BYTE_ARRAY 6u
#define ENC_DELTA_BYTE_ARRAY 7u
#define ENC_RLE_DICTIONARY 8u
#define ENC_BYTE_STREAM_SPLIT 9u
// Not a Parquet encoding: a dictionary-typed column's keys over a page not dictionary-encoded (encoding::SEQUENCE_KEYS).
#define ENC_SEQUENCE_KEYS 100u

#define PT_BOOLEAN 0u
#define PT_INT32 1u
#define PT_INT64 2u
#define PT_INT96 3u
#define PT_FLOAT 4u
#define PT_DOUBLE 5u
#define PT_BYTE_ARRAY 6u
#define PT_FIXED_LEN_BYTE_ARRAY 7u

// Records the first error of a page: later errors do not overwrite it.
// A BYTE_ARRAY column's offsets are i64 where its out_width is 8 (LargeUtf8 / LargeBinary), else i32.
__device__ inline bool wide_offsets(const ColumnDesc& col) { return col.out_width == 8; }

// Offset i of a BYTE_ARRAY column (i32 or i64, as wide_offsets says).
__device__ inline i64 offset_at(const ColumnDesc& col, u64 i) {
    return wide_offsets(col) ? ((const i64*)col.out_offsets)[i] : (i64)((const i32*)col.out_offsets)[i];
}

__device__ inline void page_error(PageDesc* page, u32 code, u32 detail) {
    if (atomicCAS(&page->error, 0u, code) == 0u) {
        page->error_detail = detail;
    }
}

// Reads an unsigned LEB128 varint from [*pos, end) of the bytes `byte_at(p)` gives. Returns false (and
// leaves *out undefined) if it runs past `end` or is longer than 10 bytes. Advances *pos past it on
// success.
template <typename ByteAt>
__device__ inline bool read_uleb128_at(ByteAt byte_at, u64* pos, u64 end, u64* out) {
    u64 v = 0;
    u32 shift = 0;
    u64 p = *pos;
    for (int i = 0; i < 10; i++) {
        if (p >= end) return false;
        const u32 b = byte_at(p++);
        v |= (u64)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) { *pos = p; *out = v; return true; }
        shift += 7;
    }
    return false;
}

// The `nb` (at most 4) bytes at p as a little-endian value, each through byte_at (u64 -> u32).
template <class ByteAt>
__device__ inline u32 read_le_at(ByteAt byte_at, u64 p, u32 nb) {
    u32 v = 0;
    for (u32 i = 0; i < nb; i++) v |= byte_at(p + i) << (8 * i);
    return v;
}

// The same over memory at `base`.
__device__ inline bool read_uleb128(const u8* base, u64* pos, u64 end, u64* out) {
    return read_uleb128_at([base](u64 p) { return (u32)base[p]; }, pos, end, out);
}

__device__ inline i64 zigzag_decode(u64 v) { return (i64)(v >> 1) ^ -(i64)(v & 1); }

// `width` bits (0..=64) starting at bit `bit` of the little-endian, LSB-first bit stream at `base`,
// which holds `len` bytes. Bits past the end read as 0; the caller checks bounds before relying on
// the value (the hybrid and delta decoders check a run's bytes fit before unpacking it).
__device__ inline u64 read_bits(const u8* base, u64 len, u64 bit, u32 width) {
    if (width == 0) return 0;
    u64 byte = bit >> 3;
    // Up to 32 bits (hybrid runs, most deltas): two aligned words hold them, 31 + 32 bits at most;
    // where both words lie inside the stream, two loads and a shift instead of a load per byte.
    const u32 mis = (u32)(((u64)base + byte) & 3);
    if (width <= 32 && byte >= mis && byte - mis < len && len - (byte - mis) >= 8) {
        const u32* w = (const u32*)(base + byte - mis);
        const u64 both = (u64)w[0] | ((u64)w[1] << 32);
        return (both >> (mis * 8 + (u32)(bit & 7))) & (((u64)1 << width) - 1);
    }
    u32 shift = (u32)(bit & 7);
    // Up to 64 + 7 bits span 9 bytes.
    u64 lo = 0;
    u32 nbytes = (shift + width + 7) >> 3;
    for (u32 i = 0; i < nbytes && i < 8; i++) {
        if (byte + i < len) lo |= (u64)base[byte + i] << (8 * i);
    }
    u64 v = lo >> shift;
    if (nbytes == 9) {
        u64 hi = (byte + 8 < len) ? (u64)base[byte + 8] : 0;
        v |= hi << (64 - shift);
    }
    if (width < 64) v &= ((u64)1 << width) - 1;
    return v;
}

// Arrow's 16-byte view (Utf8View, BinaryView) of a string of `len` bytes at offset `off` of its
// column's characters, from its first 16 bytes b0, b1 (little-endian; bytes past len are cleared
// here): the length, then up to 12 bytes inline, or the first 4, the buffer and the offset (segment 0:
// buffer 0 at off; else buffer off / segment at off % segment). The one view builder of every kernel
// file; view_of and view_of_in read the bytes.
__device__ inline uint4 view_from(u64 b0, u64 b1, u32 len, u64 off, u64 segment) {
    uint4 v;
    v.x = len;
    if (len <= 12) {
        if (len < 8) {
            b0 &= ((u64)1 << (8 * len)) - 1;
            b1 = 0;
        } else {
            b1 &= ((u64)1 << (8 * (len - 8))) - 1;
        }
        v.y = (u32)b0;
        v.z = (u32)(b0 >> 32);
        v.w = (u32)b1;
    } else {
        v.y = (u32)b0;
        v.z = segment == 0 ? 0u : (u32)(off / segment);
        v.w = segment == 0 ? (u32)off : (u32)(off % segment);
    }
    return v;
}

// The view of the `len` bytes at p (view_from), read byte by byte: p[0, min(len, 12)), or p[0, 4)
// for a longer string.
__device__ inline uint4 view_of(const u8* p, u32 len, u64 off, u64 segment) {
    u64 b0 = 0, b1 = 0;
    const u32 want = len <= 12 ? len : 4;
    // Unrolled with constant indices, the bytes stay in registers (a byte array indexed by a variable
    // went to local memory).
#pragma unroll
    for (u32 b = 0; b < 12; b++) {
        const u64 x = b < want ? (u64)p[b] : 0;
        if (b < 8) {
            b0 |= x << (8 * b);
        } else {
            b1 |= x << (8 * (b - 8));
        }
    }
    return view_from(b0, b1, len, off, segment);
}

// The same view, its bytes read as the two or three aligned 8-byte words from p's down, where those
// 24 bytes lie inside [lo, hi), a region the caller may read (else byte by byte, as view_of): a
// string's bytes cost one or two loads instead of one each (gp_copy_strings, a row per thread).
__device__ inline uint4 view_of_in(const u8* p, u32 len, u64 off, u64 segment, u64 lo, u64 hi) {
    const u64 a = (u64)p & ~(u64)7;
    if (a < lo || hi < 24 || a > hi - 24) return view_of(p, len, off, segment);
    const u64* w = (const u64*)a;
    const u32 sh = 8 * (u32)((u64)p & 7);
    u64 b0 = w[0], b1 = w[1];
    if (sh != 0) {
        const u64 b2 = w[2];
        b0 = (b0 >> sh) | (b1 << (64 - sh));
        b1 = (b1 >> sh) | (b2 << (64 - sh));
    }
    return view_from(b0, b1, len, off, segment);
}

// Whether the len bytes at s are all ASCII (so valid UTF-8), read as the aligned 8-byte words that
// cover them. False where a byte is not ASCII, or where those words do not lie inside [lo, hi), a
// region the caller may read: the caller then checks byte by byte.
__device__ inline bool ascii_in(const u8* s, u32 len, u64 lo, u64 hi) {
    if (len == 0) return true;
    const u64 a = (u64)s & ~(u64)7, e = ((u64)s + len + 7) & ~(u64)7;
    if (a < lo || e > hi) return false;
    const u64* w = (const u64*)a;
    const u32 words = (u32)((e - a) >> 3), head = (u32)((u64)s & 7), tail = (u32)(e - ((u64)s + len));
    u64 any = 0;
    for (u32 k = 0; k < words; k++) {
        u64 x = w[k];
        if (k == 0) x &= ~(u64)0 << (8 * head);
        if (k + 1 == words) x &= ~(u64)0 >> (8 * tail);
        any |= x;
    }
    return (any & 0x8080808080808080ull) == 0;
}

// Block-wide inclusive prefix sum of one value per thread, wrapping (blockDim.x a multiple of 32, at
// most 1024). `scratch` needs 32 T of shared memory; *total (when not null) gets the block's sum. Ends
// with a barrier, so the caller may reuse `scratch` at once. The one scan of every kernel file.
template <typename T>
__device__ inline T block_inclusive_scan(T v, T* scratch, T* total) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    T x = v;
    for (u32 o = 1; o < 32; o <<= 1) {
        T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) scratch[warp] = x;
    __syncthreads();
    if (warp == 0) {
        T w = lane < nwarps ? scratch[lane] : 0;
        for (u32 o = 1; o < 32; o <<= 1) {
            T y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        scratch[lane] = w;  // inclusive sums of warps
    }
    __syncthreads();
    const T r = (warp == 0 ? 0 : scratch[warp - 1]) + x;
    const T t = scratch[nwarps - 1];
    __syncthreads();  // scratch may be reused by the caller
    if (total) *total = t;
    return r;
}

// The exclusive form of block_inclusive_scan for u32 (the thread's prefix without its own value).
__device__ inline u32 block_exclusive_scan(u32 v, u32* scratch, u32* total) {
    return block_inclusive_scan<u32>(v, scratch, total) - v;
}

// Reports each struct's size so the host can check the layout against layout.rs.
extern "C" __global__ void gp_layout_sizes(u32* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = sizeof(ChunkDesc);
        out[1] = sizeof(PageInfo);
        out[2] = sizeof(PageDesc);
        out[3] = sizeof(DictDesc);
        out[4] = sizeof(ColumnDesc);
        out[5] = 32;  // ValidateItem: checked by a static_assert in validate.cu
        out[6] = 40;  // UnsnapItem: likewise in snappy.cu
        out[7] = 88;  // WsnapItem: likewise in snappy_wide.cu
    }
}
