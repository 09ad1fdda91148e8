// Nested columns: a column's definition levels one byte per row, and validity bytes from them (a
// struct is present where a row's level reaches the struct's definition level).
// Host references: host_kernels/nested.rs (levels_at_least; the levels come from gp_levels, out_def).

// Grid-stride over n bytes (any grid, any block): out[i] = levels[i] >= threshold.
extern "C" __global__ void gp_levels_at_least(const u8* levels, u64 n, u32 threshold, u8* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = (u32)levels[i] >= threshold ? 1 : 0;
    }
}

// ---- lists: repetition levels, slot spaces, offsets, compaction ----
//
// A slot space (r, t) is the set of level entries with rep <= r and def >= t (host_kernels/nested.rs):
// the rows are (0, 0); a list's items (its repetition level, the level its items are defined from).
// `def` / `rep` null: those levels are all 0.

struct LevelJob {
    u64 src, src_len, out;
    u32 count, max_level, bit_width, flags, error, error_detail;
};
#define LEVELS_V1_PREFIX 1u
#define LEVELS_FIRST_ZERO 2u

__device__ inline void job_error(LevelJob* j, u32 code, u32 detail) {
    if (atomicCAS(&j->error, 0u, code) == 0u) j->error_detail = detail;
}

// Block per job (grid n, block 256): a page's repetition levels, a byte each at out. Errors
// (reference rep_levels): OVERRUN for a v1 prefix past src_len (detail the length) or a stream ending
// early (detail the first missing index), BAD_BIT_WIDTH over 8, BAD_LEVEL for a level over max_level
// or, under LEVELS_FIRST_ZERO, a first level that is not 0 (the lowest index wins; the levels before
// it are written).
extern "C" __global__ void __launch_bounds__(256) gp_rep_levels(LevelJob* jobs, u32 n) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    LevelJob* jp = &jobs[blockIdx.x];
    const LevelJob job = *jp;
    const u32 t = threadIdx.x;
    if (job.bit_width > 8) {
        if (t == 0) job_error(jp, ERR_BAD_BIT_WIDTH, job.bit_width);
        return;
    }
    const u8* base = (const u8*)job.src;
    u64 len = job.src_len;
    if (job.flags & LEVELS_V1_PREFIX) {
        if (len < 4) {
            if (t == 0) job_error(jp, ERR_OVERRUN, 0);
            return;
        }
        const u64 L = load_u32_le(base);
        if (L > len - 4) {
            if (t == 0) job_error(jp, ERR_OVERRUN, (u32)L);
            return;
        }
        base += 4;
        len = L;
    }
    u8* out = (u8*)job.out;
    const u32 count = job.count, max = job.max_level, bw = job.bit_width;
    const bool first_zero = (job.flags & LEVELS_FIRST_ZERO) != 0;
    __shared__ HybShared sh;
    u32 err_code = 0, err_at = 0;
    if (t == 0) {
        hyb_reset(sh);
        sh.done = count == 0;
    }
    __syncthreads();
    while (!sh.done) {
        hyb_next_window(sh, base, len, bw, count);
        const u32 ws = sh.win_start, we = sh.win_end;
        u32 lv[HYB_ITEMS];
#pragma unroll
        for (u32 j = 0; j < HYB_ITEMS; j++) {
            const u32 idx = ws + j * BLOCK + t;
            lv[j] = idx < we ? hyb_value(sh, base, len, bw, idx) : 0;
            if (idx < we && (lv[j] > max || (first_zero && idx == 0 && lv[j] != 0))) atomicMin(&sh.first_bad, idx);
        }
        __syncthreads();
        const u32 stop = sh.first_bad < we ? sh.first_bad : we;
#pragma unroll
        for (u32 j = 0; j < HYB_ITEMS; j++) {
            const u32 idx = ws + j * BLOCK + t;
            if (idx < stop) out[idx] = (u8)lv[j];
        }
        __syncthreads();
        if (t == 0) {
            if (sh.first_bad != NONE) {
                err_code = ERR_BAD_LEVEL;
                err_at = sh.first_bad;
                sh.done = 1;
            } else if (sh.st.ended) {
                err_code = ERR_OVERRUN;
                err_at = we;
                sh.done = 1;
            } else if (sh.st.produced >= count) {
                sh.done = 1;
            }
        }
        __syncthreads();
    }
    if (t == 0 && err_code) job_error(jp, err_code, err_at);
}

__device__ inline bool in_space(const u8* def, const u8* rep, u64 i, u32 r, u32 t) {
    const u32 d = def ? def[i] : 0, p = rep ? rep[i] : 0;
    return p <= r && d >= t;
}

// The slot scan (pos[i] = slots of (r, t) among entries before i, for i in [0, n]; pos[n] = their
// number) in three launches over tiles of SLOT_TILE entries: gp_slot_tile_counts (a block a tile, its
// slots), gp_slot_tile_bases (one block: the counts' exclusive prefix sums, in place) and
// gp_slot_tile_scan (a block a tile, from its base). Blocks of any multiple of 32 threads up to 1024
// (the host launches 256; a tile takes SLOT_TILE / blockDim passes). n == 0: no launch (the host
// writes pos[0] = 0).
#define SLOT_TILE 4096u

extern "C" __global__ void gp_slot_tile_counts(const u8* def, const u8* rep, u64 n, u32 r, u32 t, u32* counts) {
    if (blockDim.x % 32 != 0 || blockDim.x > 1024) __trap();
    __shared__ u32 count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    const u64 start = (u64)blockIdx.x * SLOT_TILE;
    const u64 end = start + SLOT_TILE < n ? start + SLOT_TILE : n;
    u32 mine = 0;
    for (u64 i = start + threadIdx.x; i < end; i += blockDim.x) mine += in_space(def, rep, i, r, t) ? 1 : 0;
    for (u32 o = 16; o > 0; o >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&count, mine);
    __syncthreads();
    if (threadIdx.x == 0) counts[blockIdx.x] = count;
}

// One block (grid 1): counts[0..ntiles) become their exclusive prefix sums, a block's width at a time.
extern "C" __global__ void gp_slot_tile_bases(u32* counts, u32 ntiles) {
    if (gridDim.x != 1 || blockDim.x % 32 != 0 || blockDim.x > 1024) __trap();
    __shared__ u32 warp_sums[32];
    __shared__ u32 carry;
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    if (tid == 0) carry = 0;
    __syncthreads();
    for (u32 base = 0; base < ntiles; base += blockDim.x) {
        const u32 i = base + tid;
        const u32 v = i < ntiles ? counts[i] : 0;
        u32 x = v;
        for (u32 o = 1; o < 32; o <<= 1) {
            const u32 y = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= o) x += y;
        }
        if (lane == 31) warp_sums[warp] = x;
        __syncthreads();
        if (warp == 0) {
            const u32 w = lane < nwarps ? warp_sums[lane] : 0;
            u32 z = w;
            for (u32 o = 1; o < 32; o <<= 1) {
                const u32 y = __shfl_up_sync(0xffffffffu, z, o);
                if (lane >= o) z += y;
            }
            if (lane < nwarps) warp_sums[lane] = z - w;  // exclusive, by warp
        }
        __syncthreads();
        const u32 c = carry;
        if (i < ntiles) counts[i] = c + warp_sums[warp] + x - v;
        __syncthreads();
        if (tid == blockDim.x - 1) carry = c + warp_sums[warp] + x;
        __syncthreads();
    }
}

// A block a tile: pos[i] for the tile's entries from its base (bases[tile]); the last tile's block
// writes pos[n].
extern "C" __global__ void gp_slot_tile_scan(const u8* def, const u8* rep, u64 n, u32 r, u32 t, const u32* bases,
                                             u32* pos) {
    if (blockDim.x % 32 != 0 || blockDim.x > 1024) __trap();
    __shared__ u32 warp_sums[32];
    __shared__ u32 carry;
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    if (tid == 0) carry = bases[blockIdx.x];
    __syncthreads();
    const u64 start = (u64)blockIdx.x * SLOT_TILE;
    const u64 end = start + SLOT_TILE < n ? start + SLOT_TILE : n;
    for (u64 base = start; base < end; base += blockDim.x) {
        const u64 i = base + tid;
        const bool m = i < end && in_space(def, rep, i, r, t);
        const u32 ballot = __ballot_sync(0xffffffffu, m);
        if (lane == 0) warp_sums[warp] = __popc(ballot);
        __syncthreads();
        if (warp == 0) {
            const u32 v = lane < nwarps ? warp_sums[lane] : 0;
            u32 x = v;
            for (u32 o = 1; o < 32; o <<= 1) {
                const u32 y = __shfl_up_sync(0xffffffffu, x, o);
                if (lane >= o) x += y;
            }
            if (lane < nwarps) warp_sums[lane] = x - v;  // exclusive
        }
        __syncthreads();
        const u32 c = carry;
        if (i < end) pos[i] = c + warp_sums[warp] + __popc(ballot & ((1u << lane) - 1));
        __syncthreads();
        if (tid == blockDim.x - 1) carry = c + warp_sums[warp] + __popc(ballot);
        __syncthreads();
    }
    if (tid == 0 && end == n) pos[n] = carry;
}

// Grid-stride over n entries: for each slot i of the parent space (pr, pt), offsets[parent_pos[i]] =
// child_pos[i] (i32, or i64 when wide); thread 0 writes offsets[parent_pos[n]] = child_pos[n].
extern "C" __global__ void gp_list_offsets(const u8* def, const u8* rep, u64 n, u32 pr, u32 pt, const u32* parent_pos,
                                           const u32* child_pos, u32 wide, u8* offsets) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (u64 i = first; i <= n; i += stride) {
        if (i < n && !in_space(def, rep, i, pr, pt)) continue;
        const u64 at = parent_pos[i];
        if (wide) ((i64*)offsets)[at] = (i64)child_pos[i];
        else ((i32*)offsets)[at] = (i32)child_pos[i];
    }
}

// Grid-stride over n entries: for each slot i of (r, t), out[pos[i]] = def[i] >= threshold.
extern "C" __global__ void gp_slot_flags(const u8* def, const u8* rep, u64 n, u32 r, u32 t, const u32* pos,
                                         u32 threshold, u8* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (!in_space(def, rep, i, r, t)) continue;
        const u32 d = def ? def[i] : 0;
        out[pos[i]] = d >= threshold ? 1 : 0;
    }
}

// Grid-stride over n entries: for each slot i of (r, t), the `width` bytes of src at i to dst at
// pos[i]; with with_end, entry n to pos[n] too.
extern "C" __global__ void gp_compact(const u8* def, const u8* rep, u64 n, u32 r, u32 t, const u32* pos,
                                      const u8* src, u32 width, u32 with_end, u8* dst) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 last = with_end ? n + 1 : n;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < last; i += stride) {
        if (i < n && !in_space(def, rep, i, r, t)) continue;
        const u8* s = src + i * width;
        u8* d = dst + (u64)pos[i] * width;
        for (u32 b = 0; b < width; b++) d[b] = s[b];
    }
}

// Fixed-size lists (FixedSizeList), from a list's 32-bit offsets. Grid-stride over `slots` lists (any
// grid): the lowest list whose item count is neither 0 nor `size` is atomicMin'ed into result[0] (the
// host sets it to ~0), and the lists of no item (null or empty) are counted into result[1] (set to 0).
// Twin: host_kernels/nested.rs fixed_size_check.
extern "C" __global__ void gp_fixed_size_check(const i32* offsets, u64 slots, u32 size, u64* result) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 bad = ~0ull, empty = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < slots; i += stride) {
        const i64 len = (i64)offsets[i + 1] - (i64)offsets[i];
        if (len == 0) {
            empty++;
        } else if (len != (i64)size && bad == ~0ull) {
            bad = i;  // later lists of this thread only come after it
        }
    }
    if (bad != ~0ull) atomicMin((unsigned long long*)&result[0], (unsigned long long)bad);
    if (empty) atomicAdd((unsigned long long*)&result[1], (unsigned long long)empty);
}

// Grid-stride over slots * size items (any grid): item k of list i, for a list of `size` items, is
// the `width` bytes of item offsets[i] + k of src and its validity bit (LSB-first bitmap src_validity,
// all valid when null); for a list of no item (arrow-rs pads null and empty lists so), or an item
// outside src's src_len, zeros and a null. One validity byte an item at dst_valid, for gp_pack_bits.
// Twin: host_kernels/nested.rs fixed_size_pad.
extern "C" __global__ void gp_fixed_size_pad(const i32* offsets, u64 slots, u32 size, const u8* src,
                                             const u8* src_validity, u64 src_len, u32 width, u8* dst,
                                             u8* dst_valid) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 n = slots * size;
    for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
        const u64 i = j / size, k = j % size;
        const i64 start = offsets[i], len = (i64)offsets[i + 1] - start;
        const i64 s = start + (i64)k;
        const bool from = len == (i64)size && s >= 0 && (u64)s < src_len;
        bool valid = false;
        u8* d = dst + j * width;
        if (from) {
            valid = src_validity == nullptr || ((src_validity[(u64)s >> 3] >> ((u64)s & 7)) & 1);
            const u8* p = src + (u64)s * width;
            for (u32 b = 0; b < width; b++) d[b] = p[b];
        } else {
            for (u32 b = 0; b < width; b++) d[b] = 0;
        }
        dst_valid[j] = valid ? 1 : 0;
    }
}
