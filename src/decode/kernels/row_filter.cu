// The row filter: a predicate leaf evaluated into a tri-state byte per row (0 false, 1 true, 2 unknown),
// Kleene and / or / not over those bytes, the scan turning a mask into selected row indices (or lengths
// into offsets), and the gathers compacting a column to the selected rows. Twins:
// host_kernels/row_filter.rs; descriptor: RowLeafDesc in decode/row_filter.rs; launches: its
// `launch_plan`. Every bound comes from a length passed in; a data error (an offset past the
// characters, a view past its buffer, a dictionary key past the dictionary, an index past the rows)
// min's the row it concerns into the u64 error word (starting at ~0) and the row reads as unknown or
// copies nothing.

#define RF_FALSE 0
#define RF_TRUE 1
#define RF_UNKNOWN 2
// compare_ieee's result where a NaN is involved: neither less, equal nor greater.
#define RF_UNORDERED 2

#define LEAF_SIGNED 1u
#define LEAF_UNSIGNED 2u
#define LEAF_FLOAT 3u
#define LEAF_BOOL 4u
#define LEAF_BYTES 5u
#define LEAF_VIEW 6u
#define LEAF_FIXED_BYTES 7u
#define LEAF_DICT_SIGNED 8u
#define LEAF_DICT_UNSIGNED 9u
#define LEAF_NULLS 10u
#define LEAF_FLOAT_IEEE 11u

#define RF_OP_EQ 0u
#define RF_OP_NE 1u
#define RF_OP_LT 2u
#define RF_OP_LE 3u
#define RF_OP_GT 4u
#define RF_OP_GE 5u
#define RF_OP_IN 6u
#define RF_OP_IS_NULL 7u
#define RF_OP_IS_NOT_NULL 8u

#define RF_AND 0u
#define RF_OR 1u
#define RF_NOT 2u

#define RF_SCAN_MASK 0u
#define RF_SCAN_LENGTHS32 1u
#define RF_SCAN_LENGTHS64 2u
#define RF_SCAN_TILE 4096u

struct RowLeafDesc {
    u32 kind, op, width, nlits;
    u64 values, values_len;
    u64 offsets, offsets_len;
    u64 aux, aux_len;
    u64 validity, validity_len, validity_offset;
    u64 offset;
    u64 lits, lits_len, lit_offsets;
    u64 error;
};

namespace gprf {

__device__ inline u64 first_thread() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline u64 all_threads() { return (u64)gridDim.x * blockDim.x; }

__device__ inline void report(u64* error, u64 row) {
    if (error) atomicMin((unsigned long long*)error, (unsigned long long)row);
}

// Bit i of `len` bytes at p: 1, 0, or -1 outside them.
__device__ inline int bit_at(const u8* p, u64 len, u64 i) {
    if (i / 8 >= len) return -1;
    return (p[i / 8] >> (i % 8)) & 1;
}

// `len` unaligned little-endian bytes (1..8) as u64.
__device__ inline u64 load_le(const u8* p, u32 len) {
    u64 v = 0;
    for (u32 k = 0; k < len; k++) v |= (u64)p[k] << (8 * k);
    return v;
}

// A value of `w` bytes (1, 2, 4, 8) of the leaf's kind as a key ordered like the values: signed,
// unsigned, or a float in IEEE total order (arrow-rs's total_cmp).
__device__ inline void key64(u32 kind, const u8* p, u32 w, i64* s, u64* u) {
    const u64 raw = load_le(p, w);
    const u32 shift = 64 - 8 * w;
    i64 v = (i64)(raw << shift) >> shift;
    if (kind == LEAF_FLOAT) v ^= (i64)(((u64)(v >> 63)) >> (shift + 1));
    *s = v;
    *u = raw;
}

// -1, 0, 1: a against b, both `w` bytes of the leaf's kind (16 and 32 bytes: two's complement).
__device__ inline int compare_fixed(u32 kind, const u8* a, const u8* b, u32 w) {
    if (w <= 8) {
        i64 sa = 0, sb = 0;
        u64 ua = 0, ub = 0;
        key64(kind, a, w, &sa, &ua);
        key64(kind, b, w, &sb, &ub);
        if (kind == LEAF_UNSIGNED) return ua < ub ? -1 : ua > ub ? 1 : 0;
        return sa < sb ? -1 : sa > sb ? 1 : 0;
    }
    const u32 top = w / 8 - 1;
    const i64 ta = (i64)load_le(a + 8 * top, 8), tb = (i64)load_le(b + 8 * top, 8);
    if (ta != tb) return ta < tb ? -1 : 1;
    for (u32 k = top; k-- > 0;) {
        const u64 x = load_le(a + 8 * k, 8), y = load_le(b + 8 * k, 8);
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

// -1, 0, 1, or RF_UNORDERED: IEEE 754 floats of `w` bytes (2, 4, 8) as C and pyarrow compare them
// (NaN unordered, -0 equal to +0). Outside NaN and zeros the total-order keys order them the same.
__device__ inline int compare_ieee(const u8* a, const u8* b, u32 w) {
    const u64 sign = 1ull << (8 * w - 1);
    const u64 inf = w == 2 ? 0x7C00ull : w == 4 ? 0x7F800000ull : 0x7FF0000000000000ull;
    const u64 ma = load_le(a, w) & (sign - 1), mb = load_le(b, w) & (sign - 1);
    if (ma > inf || mb > inf) return RF_UNORDERED;
    if (ma == 0 && mb == 0) return 0;
    return compare_fixed(LEAF_FLOAT, a, b, w);
}

__device__ inline int compare_bytes(const u8* a, u64 alen, const u8* b, u64 blen) {
    const u64 n = alen < blen ? alen : blen;
    for (u64 k = 0; k < n; k++) {
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    }
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

// `op` of a comparison's result c (-1, 0, 1, or RF_UNORDERED, which only != accepts).
__device__ inline u8 decide(u32 op, int c) {
    if (c == RF_UNORDERED) return op == RF_OP_NE ? RF_TRUE : op <= RF_OP_GE ? RF_FALSE : RF_UNKNOWN;
    bool r = false;
    switch (op) {
    case RF_OP_EQ: r = c == 0; break;
    case RF_OP_NE: r = c != 0; break;
    case RF_OP_LT: r = c < 0; break;
    case RF_OP_LE: r = c <= 0; break;
    case RF_OP_GT: r = c > 0; break;
    case RF_OP_GE: r = c >= 0; break;
    default: return RF_UNKNOWN;
    }
    return r ? RF_TRUE : RF_FALSE;
}

// Offsets k of `w` bytes (4: i32, 8: i64) at p (len bytes): false where missing.
__device__ inline bool offset_at(const u8* p, u64 len, u32 w, u64 k, i64* v) {
    if ((k + 1) * w > len) return false;
    *v = w == 4 ? (i64)(i32)load_le(p + k * 4, 4) : (i64)load_le(p + k * 8, 8);
    return true;
}

// Row `row`'s (start, end) in `chars_len` characters: false where the offsets are missing, negative,
// backwards or past them.
__device__ inline bool range_at(const u8* p, u64 len, u32 w, u64 row, u64 chars_len, u64* s, u64* e) {
    i64 a = 0, b = 0;
    if (!offset_at(p, len, w, row, &a) || !offset_at(p, len, w, row + 1, &b)) return false;
    if (a < 0 || a > b || (u64)b > chars_len) return false;
    *s = (u64)a;
    *e = (u64)b;
    return true;
}

// The bytes of view `row` (views: `views_len` bytes; data buffers: nbufs addresses and lengths).
__device__ inline bool view_at(const u8* views, u64 views_len, const u64* bufs, const u64* lens, u64 nbufs,
                               u64 row, const u8** p, u64* len) {
    if ((row + 1) * 16 > views_len) return false;
    const u8* v = views + row * 16;
    const u32 l = (u32)load_le(v, 4);
    if (l <= 12) {
        *p = v + 4;
        *len = l;
        return true;
    }
    const u32 index = (u32)load_le(v + 8, 4), off = (u32)load_le(v + 12, 4);
    if (index >= nbufs || (u64)off + l > lens[index]) return false;
    *p = (const u8*)bufs[index] + off;
    *len = l;
    return true;
}

// One valid row's result, or -1 for a data error.
__device__ int leaf_row(const RowLeafDesc& d, u64 row) {
    const u8* values = (const u8*)d.values;
    const u8* lits = (const u8*)d.lits;
    const u64* lit_offsets = (const u64*)d.lit_offsets;
    const u32 w = d.width;
    const bool in = d.op == RF_OP_IN;
    switch (d.kind) {
    case LEAF_SIGNED:
    case LEAF_UNSIGNED:
    case LEAF_FLOAT: {
        if ((row + 1) * w > d.values_len) return -1;
        const u8* v = values + row * w;
        if (!in) return d.nlits ? decide(d.op, compare_fixed(d.kind, v, lits, w)) : RF_UNKNOWN;
        for (u32 k = 0; k < d.nlits; k++) {
            if (compare_fixed(d.kind, v, lits + (u64)k * w, w) == 0) return RF_TRUE;
        }
        return RF_FALSE;
    }
    case LEAF_FLOAT_IEEE: {
        if ((row + 1) * w > d.values_len || (w != 2 && w != 4 && w != 8)) return -1;
        const u8* v = values + row * w;
        if (!in) return d.nlits ? decide(d.op, compare_ieee(v, lits, w)) : RF_UNKNOWN;
        for (u32 k = 0; k < d.nlits; k++) {
            if (compare_ieee(v, lits + (u64)k * w, w) == 0) return RF_TRUE;
        }
        return RF_FALSE;
    }
    case LEAF_BOOL: {
        const int b = bit_at(values, d.values_len, row);
        if (b < 0) return -1;
        if (!in) return d.nlits ? decide(d.op, b < lits[0] ? -1 : b > lits[0] ? 1 : 0) : RF_UNKNOWN;
        for (u32 k = 0; k < d.nlits; k++) {
            if (b == lits[k]) return RF_TRUE;
        }
        return RF_FALSE;
    }
    case LEAF_BYTES:
    case LEAF_VIEW:
    case LEAF_FIXED_BYTES: {
        const u8* p = nullptr;
        u64 len = 0;
        if (d.kind == LEAF_BYTES) {
            u64 s = 0, e = 0;
            if (!range_at((const u8*)d.offsets, d.offsets_len, w, row, d.values_len, &s, &e)) return -1;
            p = values + s;
            len = e - s;
        } else if (d.kind == LEAF_VIEW) {
            if (!view_at(values, d.values_len, (const u64*)d.offsets, (const u64*)d.aux, d.offsets_len / 8, row, &p,
                         &len))
                return -1;
        } else {
            if ((row + 1) * w > d.values_len) return -1;
            p = values + row * w;
            len = w;
        }
        if (!in) {
            if (!d.nlits) return RF_UNKNOWN;
            return decide(d.op, compare_bytes(p, len, lits + lit_offsets[0], lit_offsets[1] - lit_offsets[0]));
        }
        for (u32 k = 0; k < d.nlits; k++) {
            const u64 s = lit_offsets[k];
            if (compare_bytes(p, len, lits + s, lit_offsets[k + 1] - s) == 0) return RF_TRUE;
        }
        return RF_FALSE;
    }
    case LEAF_DICT_SIGNED:
    case LEAF_DICT_UNSIGNED: {
        if ((row + 1) * w > d.values_len) return -1;
        i64 s = 0;
        u64 u = 0;
        key64(d.kind == LEAF_DICT_SIGNED ? LEAF_SIGNED : LEAF_UNSIGNED, values + row * w, w, &s, &u);
        if (d.kind == LEAF_DICT_SIGNED && s < 0) return -1;
        const u64 key = d.kind == LEAF_DICT_SIGNED ? (u64)s : u;
        if (key >= d.nlits || key >= d.lits_len) return -1;
        return lits[key];
    }
    default:
        return -1;
    }
}

}  // namespace gprf

// Grid-stride (any grid and block): the leaf at `desc` over n rows into out[n].
extern "C" __global__ void gp_rf_leaf(const RowLeafDesc* desc, u64 n, u8* out) {
    using namespace gprf;
    const RowLeafDesc d = *desc;
    const bool is_dict = d.kind == LEAF_DICT_SIGNED || d.kind == LEAF_DICT_UNSIGNED;
    const bool null_test = d.op == RF_OP_IS_NULL || d.op == RF_OP_IS_NOT_NULL;
    for (u64 i = first_thread(); i < n; i += all_threads()) {
        int valid = 1;
        if (d.validity) valid = bit_at((const u8*)d.validity, d.validity_len, d.validity_offset + i);
        int r;
        if (valid < 0) {
            r = -1;
        } else if (!valid) {
            r = d.op == RF_OP_IS_NULL ? RF_TRUE : d.op == RF_OP_IS_NOT_NULL ? RF_FALSE : RF_UNKNOWN;
        } else if (null_test && !is_dict) {
            r = d.op == RF_OP_IS_NOT_NULL ? RF_TRUE : RF_FALSE;
        } else {
            r = leaf_row(d, d.offset + i);
        }
        if (r < 0) {
            report((u64*)d.error, i);
            r = RF_UNKNOWN;
        }
        out[i] = (u8)r;
    }
}

// Grid-stride (any grid and block): out[i] = Kleene a[i] op b[i] (b unread for not).
extern "C" __global__ void gp_rf_logic(u32 op, const u8* a, const u8* b, u64 n, u8* out) {
    using namespace gprf;
    for (u64 i = first_thread(); i < n; i += all_threads()) {
        const u8 p = a[i];
        u8 r = RF_UNKNOWN;
        if (op == RF_NOT) {
            r = p == RF_TRUE ? RF_FALSE : p == RF_FALSE ? RF_TRUE : RF_UNKNOWN;
        } else {
            const u8 q = b[i];
            if (op == RF_AND) {
                r = (p == RF_FALSE || q == RF_FALSE) ? RF_FALSE : (p == RF_TRUE && q == RF_TRUE) ? RF_TRUE : RF_UNKNOWN;
            } else {
                r = (p == RF_TRUE || q == RF_TRUE) ? RF_TRUE : (p == RF_FALSE && q == RF_FALSE) ? RF_FALSE : RF_UNKNOWN;
            }
        }
        out[i] = r;
    }
}

namespace gprf {

__device__ inline u64 scan_item(u32 kind, const void* src, u64 i) {
    if (kind == RF_SCAN_MASK) return ((const u8*)src)[i] == RF_TRUE ? 1 : 0;
    return ((const u64*)src)[i];
}

// The block's exclusive prefix sum of each thread's x (blocks of a multiple of 32 threads up to 1024),
// and the block's total in *total. Uses warp_sums[32]; ends with a barrier.
__device__ inline u64 block_exclusive(u64 x, u64* warp_sums, u64* total) {
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    u64 incl = x;
    for (u32 o = 1; o < 32; o <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const u64 w = lane < nwarps ? warp_sums[lane] : 0;
        u64 z = w;
        for (u32 o = 1; o < 32; o <<= 1) {
            const u64 y = __shfl_up_sync(0xffffffffu, z, o);
            if (lane >= o) z += y;
        }
        if (lane < nwarps) warp_sums[lane] = z - w;
        if (lane == nwarps - 1) *total = z;
    }
    __syncthreads();
    const u64 r = warp_sums[warp] + incl - x;
    __syncthreads();
    return r;
}

}  // namespace gprf

// A block a tile of RF_SCAN_TILE items (grid ceil(n / RF_SCAN_TILE), blocks of a multiple of 32 threads
// up to 1024): the tile's sum into sums[tile]. Mask items count 1 where TRUE; lengths are u64.
extern "C" __global__ void gp_rf_tile_sums(u32 kind, const void* src, u64 n, u64* sums) {
    using namespace gprf;
    if (blockDim.x % 32 != 0 || blockDim.x > 1024) __trap();
    __shared__ u64 warp_sums[32];
    __shared__ u64 total;
    const u64 start = (u64)blockIdx.x * RF_SCAN_TILE;
    const u64 end = start + RF_SCAN_TILE < n ? start + RF_SCAN_TILE : n;
    u64 mine = 0;
    for (u64 i = start + threadIdx.x; i < end; i += blockDim.x) mine += scan_item(kind, src, i);
    block_exclusive(mine, warp_sums, &total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// One block (grid 1, a multiple of 32 threads up to 1024): sums[0..ntiles) become their exclusive
// prefix sums, a block's width at a time; the whole sum into *total.
extern "C" __global__ void gp_rf_tile_bases(u64* sums, u64 ntiles, u64* total) {
    using namespace gprf;
    if (gridDim.x != 1 || blockDim.x % 32 != 0 || blockDim.x > 1024) __trap();
    __shared__ u64 warp_sums[32];
    __shared__ u64 chunk;
    u64 carry = 0;
    for (u64 base = 0; base < ntiles; base += blockDim.x) {
        const u64 i = base + threadIdx.x;
        const u64 v = i < ntiles ? sums[i] : 0;
        const u64 before = block_exclusive(v, warp_sums, &chunk);
        if (i < ntiles) sums[i] = carry + before;
        carry += chunk;
        __syncthreads();
    }
    if (threadIdx.x == 0) *total = carry;
}

// A block a tile (as gp_rf_tile_sums, with its base from bases[tile]): a mask's TRUE rows' indices (u32)
// into out (out_cap of them at most); lengths' exclusive prefix sums as offsets (i32 or i64) into
// out[0..n), and *total into out[n] by the last tile (out_cap is n + 1 then).
extern "C" __global__ void gp_rf_tile_scan(u32 kind, const void* src, u64 n, const u64* bases, const u64* total,
                                           void* out, u64 out_cap) {
    using namespace gprf;
    if (blockDim.x % 32 != 0 || blockDim.x > 1024) __trap();
    if (kind != RF_SCAN_MASK && n >= out_cap) return;
    __shared__ u64 warp_sums[32];
    __shared__ u64 pass_total;
    const u64 start = (u64)blockIdx.x * RF_SCAN_TILE;
    const u64 end = start + RF_SCAN_TILE < n ? start + RF_SCAN_TILE : n;
    u64 run = bases[blockIdx.x];
    for (u64 pass = start; pass < end; pass += blockDim.x) {
        const u64 i = pass + threadIdx.x;
        const u64 v = i < end ? scan_item(kind, src, i) : 0;
        const u64 at = run + block_exclusive(v, warp_sums, &pass_total);
        if (i < end) {
            if (kind == RF_SCAN_MASK) {
                if (v && at < out_cap) ((u32*)out)[at] = (u32)i;
            } else if (kind == RF_SCAN_LENGTHS32) {
                ((i32*)out)[i] = (i32)at;
            } else {
                ((i64*)out)[i] = (i64)at;
            }
        }
        run += pass_total;
        __syncthreads();
    }
    if (kind != RF_SCAN_MASK && end == n && threadIdx.x == 0) {
        if (kind == RF_SCAN_LENGTHS32) {
            ((i32*)out)[n] = (i32)*total;
        } else {
            ((i64*)out)[n] = (i64)*total;
        }
    }
}

// Grid-stride over words (any grid and block): bit i of words (u32[ceil(n / 32)]) set where mask[i] is
// TRUE; the set bits added to *count.
extern "C" __global__ void gp_rf_mask_bits(const u8* mask, u64 n, u32* words, u64* count) {
    using namespace gprf;
    const u64 nwords = (n + 31) / 32;
    for (u64 w = first_thread(); w < nwords; w += all_threads()) {
        u32 bits = 0;
        for (u32 k = 0; k < 32; k++) {
            const u64 i = w * 32 + k;
            if (i < n && mask[i] == RF_TRUE) bits |= 1u << k;
        }
        words[w] = bits;
        if (bits) atomicAdd((unsigned long long*)count, (unsigned long long)__popc(bits));
    }
}

// Grid-stride over output rows (any grid and block): dst[j] = src[offset + idx[j]], `width` bytes each.
extern "C" __global__ void gp_rf_gather_fixed(const u8* src, u64 src_len, u32 width, u64 offset, u64 rows,
                                              const u32* idx, u64 count, u8* dst, u64* error) {
    using namespace gprf;
    for (u64 j = first_thread(); j < count; j += all_threads()) {
        const u64 i = idx[j];
        u8* d = dst + j * width;
        if (i >= rows || (offset + i + 1) * width > src_len) {
            report(error, j);
            for (u32 k = 0; k < width; k++) d[k] = 0;
            continue;
        }
        const u8* s = src + (offset + i) * width;
        // Whole words where both sides are aligned for them (always, for buffers of their own).
        switch ((((u64)s | (u64)d) % width == 0) ? width : 0) {
        case 1: *d = *s; break;
        case 2: *(u16*)d = *(const u16*)s; break;
        case 4: *(u32*)d = *(const u32*)s; break;
        case 8: *(u64*)d = *(const u64*)s; break;
        default:
            for (u32 k = 0; k < width; k++) d[k] = s[k];
        }
    }
}

// Grid-stride over output words (any grid and block): bit j of dst (u32[ceil(count / 32)]) = bit
// bit_offset + idx[j] of src (src_len bytes); the set bits added to *set.
extern "C" __global__ void gp_rf_gather_bits(const u8* src, u64 src_len, u64 bit_offset, u64 rows, const u32* idx,
                                             u64 count, u32* dst, u64* set, u64* error) {
    using namespace gprf;
    const u64 nwords = (count + 31) / 32;
    for (u64 w = first_thread(); w < nwords; w += all_threads()) {
        u32 bits = 0;
        for (u32 k = 0; k < 32; k++) {
            const u64 j = w * 32 + k;
            if (j >= count) break;
            const u64 i = idx[j];
            const int b = i < rows ? bit_at(src, src_len, bit_offset + i) : -1;
            if (b < 0) report(error, j);
            if (b > 0) bits |= 1u << k;
        }
        dst[w] = bits;
        if (bits) atomicAdd((unsigned long long*)set, (unsigned long long)__popc(bits));
    }
}

// Grid-stride over output rows (any grid and block): lens[j] = the length of row offset + idx[j]'s range
// in `chars_len` characters, from 4- or 8-byte (wide) offsets; 0 and an error where it fails its checks.
extern "C" __global__ void gp_rf_gather_lengths(const u8* offsets, u64 offsets_len, u32 wide, u64 offset, u64 rows,
                                                u64 chars_len, const u32* idx, u64 count, u64* lens, u64* error) {
    using namespace gprf;
    const u32 w = wide ? 8 : 4;
    for (u64 j = first_thread(); j < count; j += all_threads()) {
        const u64 i = idx[j];
        u64 s = 0, e = 0;
        if (i >= rows || !range_at(offsets, offsets_len, w, offset + i, chars_len, &s, &e)) {
            report(error, j);
            s = e = 0;
        }
        lens[j] = e - s;
    }
}

// A warp a row, grid-stride (blocks of a multiple of 32 threads): row offset + idx[j]'s characters
// copied to dst at dst_offsets[j] (count + 1 offsets of 4 or 8 bytes, dst_len characters).
extern "C" __global__ void gp_rf_gather_chars(const u8* offsets, u64 offsets_len, u32 wide, u64 offset, u64 rows,
                                              const u8* chars, u64 chars_len, const u32* idx, u64 count,
                                              const u8* dst_offsets, u32 dst_wide, u8* dst, u64 dst_len, u64* error) {
    using namespace gprf;
    const u32 w = wide ? 8 : 4, dw = dst_wide ? 8 : 4;
    const u64 lane = threadIdx.x & 31;
    const u64 warps = all_threads() / 32;
    for (u64 j = first_thread() / 32; j < count; j += warps) {
        const u64 i = idx[j];
        u64 s = 0, e = 0, ds = 0, de = 0;
        const bool ok = i < rows && range_at(offsets, offsets_len, w, offset + i, chars_len, &s, &e) &&
                        range_at(dst_offsets, (count + 1) * dw, dw, j, dst_len, &ds, &de) && e - s == de - ds;
        if (!ok) {
            if (lane == 0) report(error, j);
            continue;
        }
        for (u64 k = lane; k < e - s; k += 32) dst[ds + k] = chars[s + k];
    }
}

// A warp a row, grid-stride (blocks of a multiple of 32 threads): a list's row offset + idx[j]'s item
// indices start..end (indices into the child, at most child_rows) written as u32 at
// child_indices[dst_offsets[j]..] (child_count entries).
extern "C" __global__ void gp_rf_expand_ranges(const u8* offsets, u64 offsets_len, u32 wide, u64 offset, u64 rows,
                                               u64 child_rows, const u32* idx, u64 count, const u8* dst_offsets,
                                               u32 dst_wide, u32* child_indices, u64 child_count, u64* error) {
    using namespace gprf;
    const u32 w = wide ? 8 : 4, dw = dst_wide ? 8 : 4;
    const u64 lane = threadIdx.x & 31;
    const u64 warps = all_threads() / 32;
    for (u64 j = first_thread() / 32; j < count; j += warps) {
        const u64 i = idx[j];
        u64 s = 0, e = 0, ds = 0, de = 0;
        const bool ok = i < rows && range_at(offsets, offsets_len, w, offset + i, child_rows, &s, &e) &&
                        range_at(dst_offsets, (count + 1) * dw, dw, j, child_count, &ds, &de) && e - s == de - ds;
        if (!ok) {
            if (lane == 0) report(error, j);
            continue;
        }
        for (u64 k = lane; k < e - s; k += 32) child_indices[ds + k] = (u32)(s + k);
    }
}
