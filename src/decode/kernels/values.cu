// Fixed-width values into their output rows, and bit packing. Host references: host_kernels/core.rs
// (gather_fixed, pack_bits).

namespace gpcore {

// Where a fixed-width page's values come from.
constexpr u32 SRC_BAD = 0;         // an encoding not valid for the type
constexpr u32 SRC_PLAIN = 1;       // values + k * type_len
constexpr u32 SRC_PLAIN_BOOL = 2;  // bit k of values
constexpr u32 SRC_DICT = 3;        // u32 index in dense, bytes at dict + index * type_len
constexpr u32 SRC_DENSE = 4;       // dense + (row_start + k) * dense_width (RLE booleans, DELTA, BSS)
constexpr u32 SRC_KEYS = 5;        // the key dict_count + i of row i (ENC_SEQUENCE_KEYS)

__device__ inline u32 gather_source(u32 physical, u32 enc) {
    const bool dict = dictionary_encoding(enc);
    switch (physical) {
        case PT_BOOLEAN:
            return enc == ENC_PLAIN ? SRC_PLAIN_BOOL : enc == ENC_RLE ? SRC_DENSE : SRC_BAD;
        case PT_INT32:
        case PT_INT64:
            if (physical == PT_INT32 && enc == ENC_SEQUENCE_KEYS) return SRC_KEYS;
            if (enc == ENC_DELTA_BINARY_PACKED || enc == ENC_BYTE_STREAM_SPLIT) return SRC_DENSE;
            return enc == ENC_PLAIN ? SRC_PLAIN : dict ? SRC_DICT : SRC_BAD;
        case PT_FLOAT:
        case PT_DOUBLE:
        case PT_FIXED_LEN_BYTE_ARRAY:
            // DELTA_BYTE_ARRAY: rebuilt in dense by gp_delta_byte_array_fixed.
            if (enc == ENC_BYTE_STREAM_SPLIT) return SRC_DENSE;
            if (physical == PT_FIXED_LEN_BYTE_ARRAY && enc == ENC_DELTA_BYTE_ARRAY) return SRC_DENSE;
            return enc == ENC_PLAIN ? SRC_PLAIN : dict ? SRC_DICT : SRC_BAD;
        case PT_INT96:
            return enc == ENC_PLAIN ? SRC_PLAIN : dict ? SRC_DICT : SRC_BAD;
        default:
            return SRC_BAD;
    }
}

// Copies one value of `w` bytes; `fast` says dst and src are both aligned to w (4 or 8).
__device__ inline void copy_value(u8* dst, const u8* src, u32 w, bool fast) {
    if (fast && w == 4) {
        *(u32*)dst = *(const u32*)src;
    } else if (fast && w == 8) {
        *(u64*)dst = *(const u64*)src;
    } else {
        for (u32 b = 0; b < w; b++) dst[b] = src[b];
    }
}

__device__ inline void zero_value(u8* dst, u32 w, bool fast) {
    if (fast && w == 4) {
        *(u32*)dst = 0;
    } else if (fast && w == 8) {
        *(u64*)dst = 0;
    } else {
        for (u32 b = 0; b < w; b++) dst[b] = 0;
    }
}

}  // namespace gpcore

// Block per page (grid n, block 256, no dynamic shared memory); pages whose physical type is not
// BYTE_ARRAY, but for those whose dictionary values gp_dict_indices wrote (dict_values_direct). Row i
// of the page gets, at out_values + (row_start + i) * out_width, the bytes of value k (k = i for
// required columns, else vidx[row_start + i]; a null row gets zeros): PLAIN from values + k * type_len,
// BOOLEAN PLAIN bit k (LSB first) as a byte, dictionary from dict + idx * type_len with idx the u32
// in dense, RLE booleans / DELTA_BINARY_PACKED / BYTE_STREAM_SPLIT from dense + (row_start +
// k) * dense_width; INT32 pages of ENC_SEQUENCE_KEYS (a dictionary-typed column's keys over a page not
// dictionary-encoded) the key dict_count + i, with no source read. min(type_len, out_width) bytes are
// copied, the rest of out_width zeroed.
// Errors: BAD_ENCODING (an encoding not valid for the type; nothing written, detail = encoding);
// OVERRUN for a value past values_len (PLAIN) or dict_len (dictionary), or k >= min(num_non_null,
// num_values), detail = k
// of the lowest such row: every other row is still written, the failing rows are left untouched;
// BAD_PAGE_SIZE when the rows are not inside the column or dense_width is too small for the encoding.
// Hot path: a page with no nulls whose values are contiguous (PLAIN, or dense at stride type_len) and
// fully present is one cooperative 16-byte-wide copy.
extern "C" __global__ void __launch_bounds__(256) gp_gather_fixed(PageDesc* pages, u32 n, ColumnDesc* cols) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    PageDesc* pg = &pages[blockIdx.x];
    const PageDesc page = *pg;
    const u32 t = threadIdx.x;
    if (page.error != 0 || page.physical == PT_BYTE_ARRAY) return;
    const ColumnDesc col = cols[page.column];
    // Its rows were written by gp_dict_indices.
    if (dict_values_direct(page, col)) return;
    const u32 src_kind = gather_source(page.physical, page.encoding);
    if (src_kind == SRC_BAD) {
        if (t == 0) page_error(pg, ERR_BAD_ENCODING, page.encoding);
        return;
    }
    const u32 tl = page.type_len, ow = col.out_width, dw = col.dense_width;
    const u32 w = tl < ow ? tl : ow;
    if (!rows_ok(page, col) || (src_kind == SRC_DICT && dw < 4) || (src_kind == SRC_DENSE && dw < tl)) {
        if (t == 0) page_error(pg, ERR_BAD_PAGE_SIZE, page.num_values);
        return;
    }
    // Values a row may name: num_non_null, never more than the page's rows.
    const u32 nv = page.num_values, nn = page.num_non_null < nv ? page.num_non_null : nv;
    const bool required = page.max_def == 0;
    u8* out = (u8*)col.out_values + (u64)page.row_start * ow;

    // No nulls, contiguous source: one copy.
    if ((required || nn == nv) && tl == ow) {
        const u64 bytes = (u64)nv * tl;
        if (src_kind == SRC_PLAIN && bytes <= page.values_len) {
            coop_copy(out, (const u8*)page.values, bytes, t, BLOCK);
            return;
        }
        if (src_kind == SRC_DENSE && dw == tl) {
            coop_copy(out, (const u8*)col.dense + (u64)page.row_start * dw, bytes, t, BLOCK);
            return;
        }
    }

    __shared__ unsigned long long first_bad;
    if (t == 0) first_bad = NO_ERROR_KEY;
    __syncthreads();
    const i32* vidx = (const i32*)col.vidx + page.row_start;
    const u8* values = (const u8*)page.values;
    const u8* dict = (const u8*)page.dict;
    const u8* dense = (const u8*)col.dense + (u64)page.row_start * dw;
    const bool out_aligned = (w == 4 || w == 8) && w == ow && (col.out_values & (w - 1)) == 0;
    // 4- and 8-byte values are read as words (shifted into place when the stream is unaligned) and
    // stored whole.
    const bool words = out_aligned && tl == w;
    const bool dense_fast = out_aligned && ((col.dense | dw) & (w - 1)) == 0;
    const bool idx_aligned = ((col.dense | dw) & 3) == 0;
    for (u32 i = t; i < nv; i += BLOCK) {
        const i64 k = required ? (i64)i : (i64)vidx[i];
        u8* dst = out + (u64)i * ow;
        if (k < 0) {
            zero_value(dst, ow, out_aligned);
            continue;
        }
        if (k >= nn) {
            atomicMin(&first_bad, error_key(i, ERR_OVERRUN));
            continue;
        }
        switch (src_kind) {
            case SRC_PLAIN_BOOL: {
                const u64 byte = (u64)k >> 3;
                if (byte >= page.values_len) {
                    atomicMin(&first_bad, error_key(i, ERR_OVERRUN));
                } else {
                    if (ow > 0) dst[0] = (values[byte] >> (k & 7)) & 1;
                    for (u32 b = 1; b < ow; b++) dst[b] = 0;
                }
                break;
            }
            case SRC_PLAIN: {
                const u64 off = (u64)k * tl;
                if (off + tl > page.values_len) {
                    atomicMin(&first_bad, error_key(i, ERR_OVERRUN));
                } else {
                    if (words) {
                        copy_word_value(dst, page.values + off, w, page.values, page.values + page.values_len);
                    } else {
                        copy_value(dst, values + off, w, false);
                    }
                    for (u32 b = w; b < ow; b++) dst[b] = 0;
                }
                break;
            }
            case SRC_DICT: {
                const u8* ip = dense + (u64)k * dw;
                const u32 idx = idx_aligned ? *(const u32*)ip : load_u32_le(ip);
                const u64 off = (u64)idx * tl;
                if (off + tl > page.dict_len) {
                    atomicMin(&first_bad, error_key(i, ERR_OVERRUN));
                } else {
                    if (words) {
                        copy_word_value(dst, page.dict + off, w, page.dict, page.dict + page.dict_len);
                    } else {
                        copy_value(dst, dict + off, w, false);
                    }
                    for (u32 b = w; b < ow; b++) dst[b] = 0;
                }
                break;
            }
            case SRC_KEYS: {
                // Row i's own slot among the dictionary's values, which hold the page's rows in order.
                const u32 key = page.dict_count + i;
                const u8 bytes[4] = {(u8)key, (u8)(key >> 8), (u8)(key >> 16), (u8)(key >> 24)};
                copy_value(dst, bytes, w < 4 ? w : 4, false);
                for (u32 b = w < 4 ? w : 4; b < ow; b++) dst[b] = 0;
                break;
            }
            default: {  // SRC_DENSE
                copy_value(dst, dense + (u64)k * dw, w, dense_fast);
                for (u32 b = w; b < ow; b++) dst[b] = 0;
                break;
            }
        }
    }
    __syncthreads();
    if (t == 0 && first_bad != NO_ERROR_KEY) {
        const u32 row = (u32)(first_bad >> 32);
        const u32 k = required ? row : (u32)vidx[row];
        page_error(pg, (u32)(first_bad & 0xffffffffu), k);
    }
}

// The 16 bits "byte j of v is not 0", byte 0 in bit 0.
__device__ inline u32 nonzero_bits16(uint4 v) {
    const u32 w[4] = {v.x, v.y, v.z, v.w};
    u32 m = 0;
#pragma unroll
    for (u32 j = 0; j < 4; j++) {
        // High bit of each byte: set where the byte is not 0 (its low 7 bits carry into it, or it is set).
        const u32 b = ((((w[j] & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w[j]) & 0x80808080u) >> 7;
        m |= ((b | (b >> 7) | (b >> 14) | (b >> 21)) & 0xfu) << (4 * j);
    }
    return m;
}

// Grid-stride over n bytes (any grid; block a multiple of 32, e.g. 256; no dynamic shared memory):
// bit i of the LSB-first bitmap `words` (ceil(n / 32) u32, the last one's tail bits 0) = bytes[i] != 0;
// the number of set bits is added to *set_count (which the caller zeroes). With `bytes` 16-aligned, a
// warp takes 512 bytes a step, 16 a lane (one 16-byte load), and lane pairs join their halves of a
// word; otherwise a ballot per 32 bytes (which took 1.3 ms, in ncu on the H200, for the plain
// benchmark file's 350 MB of validity bytes, against 0.28 ms for the 16-byte path).
extern "C" __global__ void gp_pack_bits(const u8* bytes, u64 n, u32* words, u64* set_count) {
    const u32 lane = threadIdx.x & 31;
    u64 local = 0;
    if (((u64)bytes & 15) == 0) {
        const u64 warp_id = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
        const u64 stride = ((u64)gridDim.x * blockDim.x >> 5) * 512;
        for (u64 base = warp_id * 512; base < n; base += stride) {
            const u64 i = base + 16 * lane;
            u32 m = 0;
            if (i + 16 <= n) {
                m = nonzero_bits16(*(const uint4*)(bytes + i));
            } else {
                for (u64 j = 0; i + j < n; j++) m |= (u32)(bytes[i + j] != 0) << j;
            }
            local += __popc(m);
            const u32 partner = __shfl_xor_sync(gpcore::FULL_MASK, m, 1);
            if ((lane & 1) == 0 && i < n) words[(base >> 5) + (lane >> 1)] = m | (partner << 16);
        }
    } else {
        const u64 stride = (u64)gridDim.x * blockDim.x;
        for (u64 base = (u64)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); base < n; base += stride) {
            const u64 i = base + lane;
            const u32 m = __ballot_sync(gpcore::FULL_MASK, i < n && bytes[i] != 0);
            if (lane == 0) {
                words[base >> 5] = m;
                local += __popc(m);
            }
        }
    }
    // Summed over the warp first: a shared atomic from every lane on one address cost more than the
    // 16-byte loads saved (2.36 ms against 1.30 in ncu).
    for (u32 o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(gpcore::FULL_MASK, local, o);
    __shared__ unsigned long long block_count;
    if (threadIdx.x == 0) block_count = 0;
    __syncthreads();
    if (lane == 0 && local) atomicAdd(&block_count, (unsigned long long)local);
    __syncthreads();
    if (threadIdx.x == 0 && block_count) atomicAdd((unsigned long long*)set_count, block_count);
}
