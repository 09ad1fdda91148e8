// Helpers of the core decode kernels (levels.cu, values.cu, strings.cu): block constants, row-range
// checks, cooperative copies, block scans over u64, the RLE/bit-packed hybrid window decoder and the
// plain byte-array walker; and the warp reductions the body decoders share. Everything here lives in
// namespace gpcore so other kernel files can define helpers of their own without clashing.
//
// Conventions of every kernel built on these (the host references in host_kernels/core.rs follow them):
// - A kernel does nothing for a page whose `error` is already set when it starts (string offsets treat
//   such a page's rows as empty instead, so offsets stay monotone).
// - Errors are deterministic: where many threads can fail, the failing value (or row) with the lowest
//   index wins (a shared-memory atomicMin), and thread 0 records it after a barrier; where a page's
//   rows are shared by several blocks, the last of them records the lowest (page_slices_lowest).

namespace gpcore {

// Threads per block of every block-per-page kernel in these files (they check it: a block of another
// size traps, as a launch bug).
constexpr u32 BLOCK = 256;
constexpr u32 NWARPS = BLOCK / 32;
constexpr u32 NONE = 0xffffffffu;
constexpr u32 FULL_MASK = 0xffffffffu;

__device__ inline void require_block() {
    if (blockDim.x != BLOCK || blockDim.y != 1 || blockDim.z != 1) __trap();
}

// The sum and the OR of v over the whole warp: the warp reductions from sm_80, a shuffle tree before
// (and in the CPU emulation, which so runs the branch no GPU of ours does).
__device__ inline u32 warp_add(u32 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_add_sync(FULL_MASK, v);
#else
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
#endif
}

__device__ inline u32 warp_or(u32 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_or_sync(FULL_MASK, v);
#else
    for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(FULL_MASK, v, o);
    return v;
#endif
}

// The page's rows lie inside its column's output, and are fewer than 2^31 (so no u32 row index or
// loop counter of a kernel can wrap).
__device__ inline bool rows_ok(const PageDesc& p, const ColumnDesc& c) {
    return p.num_values <= 0x7fffffffu && (u64)p.row_start + (u64)p.num_values <= c.num_rows;
}

// Whether a page's values are dictionary indices (PLAIN_DICTIONARY, or RLE_DICTIONARY). Twin:
// layout::encoding::is_dictionary.
__device__ inline bool dictionary_encoding(u32 enc) {
    return enc == ENC_PLAIN_DICTIONARY || enc == ENC_RLE_DICTIONARY;
}

__device__ inline u32 load_u32_le(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

// The u32 at address a (any alignment) inside [lo, hi): one aligned load when aligned, else the two
// aligned words covering it shifted together when both lie in [lo, hi), else four bytes.
__device__ inline u32 load_u32_in(u64 a, u64 lo, u64 hi) {
    const u32 sh = (u32)(a & 3);
    if (sh == 0) return *(const u32*)a;
    const u64 b = a - sh;
    if (b >= lo && b + 8 <= hi) {
        const u32* w = (const u32*)b;
        return __funnelshift_r(w[0], w[1], 8 * sh);
    }
    return load_u32_le((const u8*)a);
}

// Copies a 4- or 8-byte value at src (any alignment, inside [lo, hi)) to dst, aligned for w.
__device__ inline void copy_word_value(u8* dst, u64 src, u32 w, u64 lo, u64 hi) {
    if (w == 4) {
        *(u32*)dst = load_u32_in(src, lo, hi);
    } else {
        *(u64*)dst = (u64)load_u32_in(src, lo, hi) | ((u64)load_u32_in(src + 4, lo, hi) << 32);
    }
}

// Whether a dictionary page's values go straight from gp_dict_indices to its rows, no u32 index passing
// through dense and gp_gather_fixed leaving the page alone: 4- or 8-byte values (INT32, INT64, FLOAT,
// DOUBLE, FIXED_LEN_BYTE_ARRAY) stored as they are (out_width the type's length, out_values aligned
// to it), every row present (so row i holds value i), and a dictionary holding all dict_count entries
// (so an index below dict_count, which gp_dict_indices checks, is a value inside it). Twin:
// layout::dictionary_values_direct.
__device__ inline bool dict_values_direct(const PageDesc& p, const ColumnDesc& c) {
    const u32 pt = p.physical, tl = p.type_len;
    const bool fixed = pt == PT_INT32 || pt == PT_INT64 || pt == PT_FLOAT || pt == PT_DOUBLE ||
                       pt == PT_FIXED_LEN_BYTE_ARRAY;
    return dictionary_encoding(p.encoding) && fixed && (tl == 4 || tl == 8) && c.out_width == tl && (c.out_values & (tl - 1)) == 0 &&
           p.num_non_null == p.num_values && p.dict != 0 && (u64)p.dict_count * tl <= p.dict_len;
}

// Records the first error of a dictionary (the twin of page_error).
__device__ inline void dict_error(DictDesc* d, u32 code, u32 detail) {
    if (atomicCAS(&d->error, 0u, code) == 0u) d->error_detail = detail;
}

// Key of a per-row error for a shared atomicMin: the lowest row wins, its code rides along.
__device__ inline u64 error_key(u32 index, u32 code) { return ((u64)index << 32) | code; }
constexpr u64 NO_ERROR_KEY = ~0ull;

// ---- pages shared by several blocks ----
//
// A kernel launched on pages × slices blocks (`slices` = gridDim.x / n, at least 1) gives block b the
// page b / slices and, of its rows, the slice b % slices. Its blocks still act on the error a page had
// when the kernel began: a failing row is not recorded in `error` until the page's last block ends.

struct PageSlice {
    u32 page, slice, slices;
};

__device__ inline PageSlice page_slice(u32 n) {
    const u32 slices = n == 0 || gridDim.x < n ? 1 : gridDim.x / n;
    return PageSlice{blockIdx.x / slices, blockIdx.x % slices, slices};
}

// Thread 0 of each block of a sliced page calls this once, after its block's barrier, with the lowest
// row its block found failing (NONE for none). It returns the page's lowest failing row in the block
// that ends last (NONE when no block found one), and NONE in the others. Meanwhile `error_detail`
// holds the complement of the lowest row so far (0: none) and `reserved` counts the blocks ended; the
// last block sets both back to 0. Needs both at 0 when the kernel begins, as they are in a page
// without error.
__device__ inline u32 page_slices_lowest(PageDesc* pg, u32 slices, u32 row) {
    if (slices <= 1) return row;
    if (row != NONE) atomicMax(&pg->error_detail, ~row);
    __threadfence();  // our row is seen before our count
    if (atomicAdd(&pg->reserved, 1u) != slices - 1) return NONE;
    __threadfence();  // every other block's row is seen after its count
    const u32 low = atomicMax(&pg->error_detail, 0u);
    pg->error_detail = 0;
    pg->reserved = 0;
    return low == 0 ? NONE : ~low;
}

// ---- cooperative copy ----

// 16 source bytes starting at address `s` (not 4-byte aligned) as one uint4, from the aligned words
// that cover them when those lie inside [lo, hi), else byte by byte. Never reads outside [lo, hi).
__device__ inline uint4 load16_unaligned(u64 s, u64 lo, u64 hi) {
    const u32 sh = (u32)(s & 3);
    const u64 a = s - sh;
    uint4 o;
    if (sh != 0 && a >= lo && a + 20 <= hi) {
        const u32* w = (const u32*)a;
        const u32 w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
        o.x = __funnelshift_r(w0, w1, 8 * sh);
        o.y = __funnelshift_r(w1, w2, 8 * sh);
        o.z = __funnelshift_r(w2, w3, 8 * sh);
        o.w = __funnelshift_r(w3, w4, 8 * sh);
    } else {
        const u8* b = (const u8*)s;
        o.x = load_u32_le(b);
        o.y = load_u32_le(b + 4);
        o.z = load_u32_le(b + 8);
        o.w = load_u32_le(b + 12);
    }
    return o;
}

// Copies n bytes from src to dst, `nlanes` threads cooperating (this one is `lane`). Reads only
// [src, src + n) and writes only [dst, dst + n). Stores 16 bytes at a time once dst is aligned; loads
// 16 bytes when src is then aligned too, 4-byte words when it is 4-aligned, else aligned words shifted
// into place (bytes at the edges). Four chunks per thread are loaded before any is stored.
__device__ inline void coop_copy(u8* __restrict__ dst, const u8* __restrict__ src, u64 n, u32 lane,
                                 u32 nlanes) {
    const u64 lo = (u64)src, hi = (u64)src + n;
    u64 head = (16 - ((u64)dst & 15)) & 15;
    if (head > n) head = n;
    for (u64 i = lane; i < head; i += nlanes) dst[i] = src[i];
    uint4* d = (uint4*)(dst + head);
    const u64 s = (u64)src + head;
    const u64 rest = n - head;
    const u64 nvec = rest >> 4;
    const u64 step = nlanes;
    u64 v = lane;
    if ((s & 15) == 0) {
        const uint4* s4 = (const uint4*)s;
        for (; v + 3 * step < nvec; v += 4 * step) {
            const uint4 a = s4[v], b = s4[v + step], c = s4[v + 2 * step], e = s4[v + 3 * step];
            d[v] = a; d[v + step] = b; d[v + 2 * step] = c; d[v + 3 * step] = e;
        }
        for (; v < nvec; v += step) d[v] = s4[v];
    } else if ((s & 3) == 0) {
        const u32* s1 = (const u32*)s;
        for (; v < nvec; v += step) {
            uint4 o;
            o.x = s1[4 * v]; o.y = s1[4 * v + 1]; o.z = s1[4 * v + 2]; o.w = s1[4 * v + 3];
            d[v] = o;
        }
    } else {
        for (; v + 3 * step < nvec; v += 4 * step) {
            const uint4 a = load16_unaligned(s + 16 * v, lo, hi);
            const uint4 b = load16_unaligned(s + 16 * (v + step), lo, hi);
            const uint4 c = load16_unaligned(s + 16 * (v + 2 * step), lo, hi);
            const uint4 e = load16_unaligned(s + 16 * (v + 3 * step), lo, hi);
            d[v] = a; d[v + step] = b; d[v + 2 * step] = c; d[v + 3 * step] = e;
        }
        for (; v < nvec; v += step) d[v] = load16_unaligned(s + 16 * v, lo, hi);
    }
    const u8* st = (const u8*)s;
    u8* dt = (u8*)d;
    for (u64 i = (nvec << 4) + lane; i < rest; i += nlanes) dt[i] = st[i];
}

// One thread copies n bytes (short values).
__device__ inline void copy_bytes(u8* dst, const u8* src, u64 n) {
    for (u64 i = 0; i < n; i++) dst[i] = src[i];
}

// ---- block scans over u64 ----

// Block-wide exclusive prefix sum of one u64 per thread (blockDim.x a multiple of 32). `scratch`
// needs 32 u64 of shared memory. Returns the thread's exclusive prefix; *total gets the sum.
__device__ inline u64 block_exclusive_scan_u64(u64 v, u64* scratch, u64* total) {
    return block_inclusive_scan<u64>(v, scratch, total) - v;
}

// ---- RLE / bit-packed hybrid, decoded a window at a time ----
//
// Each window: the block stages the stream's next HYB_STAGE bytes in shared memory (one coalesced load
// instead of a dependent global load per run header), where the last window read more than one header;
// thread 0 walks run headers (a varint and at most 4 value bytes per run, bit-packed bodies skipped),
// from the stage where they lie in it, and lists up to HYB_MAX_RUNS runs covering up to HYB_WINDOW
// values in shared memory; then every thread decodes HYB_ITEMS values of the window (value j*BLOCK +
// t), finding its run by binary search, its bits from the stage where they lie in it. A run longer
// than the window carries over to the next. `hyb_next_window` does all of that but the decode.
// Where the last window read more than HYB_MANY_HEADERS headers (level streams of lists alternate short
// RLE runs and one-group bit-packed runs: 130 and more a window, and one thread parsing them one after
// another took most of the decode), the block first parses a header at every staged offset at once
// (`hyb_tabulate`), and thread 0 only hops from header to header through that table while the runs lie
// whole inside the stage and the window; the walk above takes over where they do not.
// Semantics (the reference's `hybrid_prefix` is the same walk, sequential):
// - header: ULEB128; low bit 0 = RLE run of (h >> 1) copies of a ceil(width/8)-byte LE value (not
//   masked); low bit 1 = (h >> 1) groups of 8 bit-packed values, (h >> 1) * width bytes.
// - a header is read only while values are still wanted; a header of 0 ends the stream (as arrow-rs
//   and Arrow C++ read it: fastparquet pads pages with zeros), a bit-packed run of 0 groups is skipped.
// - a bit-packed value is decodable when all its bits lie inside the stream (a truncated last run is
//   fine as long as the wanted values are there); the stream "ends" (overrun) at the first wanted
//   value it cannot supply: no header, a short RLE value, or a bit-packed value past the end.

constexpr u32 HYB_ITEMS = 8;
constexpr u32 HYB_WINDOW = BLOCK * HYB_ITEMS;
constexpr u32 HYB_MAX_RUNS = 256;
constexpr u32 HYB_STAGE = 2048;
constexpr u32 HYB_MANY_HEADERS = 8;
static_assert(HYB_STAGE % (4 * BLOCK) == 0, "hyb_stage loads whole words, as many per thread");
// hop[o] of the header table: no run to hop over at o (see hyb_tabulate); else the offset after the run,
// with HOP_RLE set for an RLE run.
constexpr u16 HOP_NONE = 0xffff;
constexpr u16 HOP_RLE = 0x8000;
constexpr u64 RLE_RUN = ~0ull;

struct HybRun {
    u32 start;  // index of the run's first value in this window
    u32 value;  // RLE value
    u64 bit;    // bit-packed: bit offset of the value at `start`; RLE_RUN for an RLE run
};

struct HybState {
    u64 pos;        // byte offset of the next run header
    u64 run_bit;    // bit-packed: bit offset of the current run's next value
    u32 run_left;   // values of the current run still wanted
    u32 run_value;  // RLE value of the current run
    u32 run_rle;    // the current run is RLE
    u32 produced;   // values decoded so far (index of the next)
    u32 ended;      // the stream ended at `produced`, before the count wanted
    u32 headers;    // run headers the last window read
};

struct HybShared {
    HybRun runs[HYB_MAX_RUNS];
    HybState st;
    u64 stage_start;  // stream offset of stage[0]
    u32 stage_len;    // bytes staged (0: none this window)
    u32 nruns, win_start, win_end;
    u32 first_bad;  // lowest index in the window a caller rejects, NONE when none
    u32 done;
    u32 counts[HYB_ITEMS * NWARPS];
    u32 total;
    u32 present_base;
    alignas(8) u8 stage[HYB_STAGE];  // read and written as words too
    // The header table over the stage (hyb_tabulate): for a header at offset o, the offset after its
    // run (hop), its values (vals, saturated at 0xffff) and its RLE value or its body's offset (pay).
    u16 hop[HYB_STAGE];
    u16 vals[HYB_STAGE];
    u32 pay[HYB_STAGE];
};

__device__ inline void hyb_reset(HybShared& sh) {
    sh.st.pos = 0; sh.st.run_bit = 0;
    sh.st.run_left = 0; sh.st.run_value = 0; sh.st.run_rle = 0;
    sh.st.produced = 0; sh.st.ended = 0;
    sh.st.headers = 2;  // stage the first window
    sh.stage_len = 0;
}

// Byte `p` (< the stream's length) of the stream: from the stage where it lies there.
__device__ inline u32 hyb_byte(const HybShared& sh, const u8* base, u64 p) {
    const u64 o = p - sh.stage_start;  // wraps to a huge value below the stage
    return o < sh.stage_len ? sh.stage[o] : base[p];
}

// All threads (BLOCK of them): stages the bytes of the next window (from the carried bit-packed run's
// next value, or the next header) when the last window read more than one header; else no stage.
__device__ inline void hyb_stage(HybShared& sh, const u8* base, u64 len) {
    const HybState s = sh.st;
    u32 n = 0;
    u64 start = 0;
    if (s.headers > 1) {
        start = (s.run_left > 0 && !s.run_rle) ? s.run_bit >> 3 : s.pos;
        n = start < len ? (len - start < HYB_STAGE ? (u32)(len - start) : HYB_STAGE) : 0;
        // As words (aligned loads, shifted together where the stream is not aligned: load_u32_in),
        // every load issued before any store, then the last n % 4 bytes one by one. A thread's bytes
        // one at a time, each load waiting for the store before it, took a sixth of gp_dict_indices'
        // stall samples (run BF).
        constexpr u32 PER_THREAD = HYB_STAGE / 4 / BLOCK;
        const u64 lo = (u64)base, hi = lo + len, from = lo + start;
        const u32 words = n >> 2;
        u32 w[PER_THREAD];
#pragma unroll
        for (u32 j = 0; j < PER_THREAD; j++) {
            const u32 i = j * BLOCK + threadIdx.x;
            w[j] = i < words ? load_u32_in(from + 4 * (u64)i, lo, hi) : 0;
        }
#pragma unroll
        for (u32 j = 0; j < PER_THREAD; j++) {
            const u32 i = j * BLOCK + threadIdx.x;
            if (i < words) ((u32*)sh.stage)[i] = w[j];
        }
        for (u32 i = 4 * words + threadIdx.x; i < n; i += BLOCK) sh.stage[i] = base[start + i];
    }
    if (threadIdx.x == 0) {
        sh.stage_start = start;
        sh.stage_len = n;
    }
}

// All threads, after the stage's barrier: parses a header at every staged offset, as if one began
// there. hop[o] = HOP_NONE where no run whose header and body lie whole inside the stage begins there (no
// varint ending inside it, a zero header, a body or value past it, or an absurd group count): the
// walk decides those.
__device__ inline void hyb_tabulate(HybShared& sh, u32 bw) {
    const u32 L = sh.stage_len;
    const auto stage_at = [&sh](u64 q) { return (u32)sh.stage[q]; };
    for (u32 o = threadIdx.x; o < L; o += blockDim.x) {
        u16 hop = HOP_NONE, vals = 0xffff;
        u32 pay = 0;
        u64 h = 0, p = o;
        const bool ok = read_uleb128_at(stage_at, &p, L, &h);
        const u64 n = h >> 1;
        if (ok && h != 0 && n < (1ull << 32)) {
            if (h & 1) {
                const u64 end = p + n * bw;
                if (end <= L) {
                    hop = (u16)end;
                    vals = n * 8 < 0xffff ? (u16)(n * 8) : 0xffff;
                    pay = (u32)p;
                }
            } else {
                const u32 nb = (bw + 7) >> 3;
                if (p + nb <= L) {
                    hop = (u16)(p + nb) | HOP_RLE;
                    vals = n < 0xffff ? (u16)n : 0xffff;
                    pay = read_le_at(stage_at, p, nb);
                }
            }
        }
        sh.hop[o] = hop;
        sh.vals[o] = vals;
        sh.pay[o] = pay;
    }
}

// Thread 0 only: lists the runs of the next window (up to `count` values in all); `table`: the header
// table over the stage is there to hop through.
__device__ inline void hyb_fill(HybShared& sh, const u8* base, u64 len, u32 bw, u32 count, bool table) {
    HybState s = sh.st;
    const u32 limit = (count - s.produced > HYB_WINDOW) ? s.produced + HYB_WINDOW : count;
    u32 nruns = 0, headers = 0;
    sh.win_start = s.produced;
    while (s.produced < limit && nruns < HYB_MAX_RUNS && !s.ended) {
        if (s.run_left == 0 && table) {
            // Runs whole inside the stage and the window, as the walk below would list them: a run of
            // v values (v <= the window's rest, so none wanted past `count` either) starting here.
            u64 o = s.pos - sh.stage_start;
            while (o < sh.stage_len && nruns < HYB_MAX_RUNS) {
                const u32 hop = sh.hop[o], v = sh.vals[o], pay = sh.pay[o];
                if (hop == HOP_NONE || v > limit - s.produced) break;
                headers++;
                if (v > 0) {
                    HybRun r;
                    r.start = s.produced;
                    r.value = (hop & HOP_RLE) ? pay : 0;
                    r.bit = (hop & HOP_RLE) ? RLE_RUN : (sh.stage_start + pay) * 8;
                    sh.runs[nruns++] = r;
                    s.produced += v;
                }
                o = hop & ~(u32)HOP_RLE;
            }
            s.pos = sh.stage_start + o;
            if (s.produced >= limit || nruns >= HYB_MAX_RUNS) break;
        }
        if (s.run_left == 0) {
            u64 h;
            const auto byte_at = [&sh, base](u64 p) { return hyb_byte(sh, base, p); };
            if (!read_uleb128_at(byte_at, &s.pos, len, &h) || h == 0) {
                s.ended = 1;  // no header, or a zero one: the stream ends (see above)
                break;
            }
            headers++;
            const u64 n = h >> 1;
            const u32 want = count - s.produced;
            if (h & 1) {
                const u64 vals = n > (1ull << 32) ? (1ull << 35) : n * 8;
                s.run_left = vals < want ? (u32)vals : want;
                s.run_rle = 0;
                s.run_bit = s.pos * 8;
                const u64 bytes = n > (1ull << 40) ? ~0ull : n * bw;
                s.pos = bytes >= len - s.pos ? len : s.pos + bytes;
            } else {
                const u32 nb = (bw + 7) >> 3;
                if (len - s.pos < nb) { s.ended = 1; break; }
                s.run_value = read_le_at(byte_at, s.pos, nb);
                s.pos += nb;
                s.run_left = n < want ? (u32)n : want;
                s.run_rle = 1;
            }
        }
        u32 take = s.run_left < limit - s.produced ? s.run_left : limit - s.produced;
        HybRun r;
        r.start = s.produced;
        if (s.run_rle) {
            r.value = s.run_value;
            r.bit = RLE_RUN;
        } else {
            // The values whose bits lie inside the stream (take * bw < 2^17: no overflow); the
            // division only where the stream ends inside them.
            const u64 end_bit = len * 8;
            if (s.run_bit + (u64)take * bw > end_bit) {
                take = (u32)((end_bit - s.run_bit) / bw);
                s.ended = 1;
            }
            r.value = 0;
            r.bit = s.run_bit;
            s.run_bit += (u64)take * bw;
        }
        if (take > 0) {
            sh.runs[nruns++] = r;
            s.produced += take;
            s.run_left -= take;
        }
    }
    s.headers = headers;
    sh.st = s;
    sh.nruns = nruns;
    sh.win_end = s.produced;
}

// All threads (a barrier at the end): the next window's runs, in sh; first_bad reset to NONE.
__device__ inline void hyb_next_window(HybShared& sh, const u8* base, u64 len, u32 bw, u32 count) {
    const bool table = sh.st.headers > HYB_MANY_HEADERS;
    hyb_stage(sh, base, len);
    __syncthreads();
    if (table) {
        hyb_tabulate(sh, bw);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        hyb_fill(sh, base, len, bw, count, table);
        sh.first_bad = NONE;
    }
    __syncthreads();
}

// Value `idx` (in [win_start, win_end)) of the current window.
__device__ inline u32 hyb_value(const HybShared& sh, const u8* base, u64 len, u32 bw, u32 idx) {
    u32 lo = 0, hi = sh.nruns;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (sh.runs[mid].start <= idx) lo = mid; else hi = mid;
    }
    const HybRun r = sh.runs[lo];
    if (r.bit == RLE_RUN) return r.value;
    const u64 bit = r.bit + (u64)(idx - r.start) * bw;
    // From the stage where all the value's bytes lie there (bw <= 32: at most 5 bytes).
    const u64 o = (bit >> 3) - sh.stage_start;
    const u32 nbytes = ((u32)(bit & 7) + bw + 7) >> 3;
    if (bw <= 32 && o < sh.stage_len && sh.stage_len - o >= nbytes)
        return (u32)read_bits(sh.stage, sh.stage_len, bit - sh.stage_start * 8, bw);
    return (u32)read_bits(base, len, bit, bw);
}

// ---- plain BYTE_ARRAY walker ----
//
// Plain byte arrays (u32 LE length, then the bytes) can only be found one after another. The block
// stages WALK_CHUNK bytes of the stream in shared memory; thread 0 walks the length prefixes there
// (a prefix far past the chunk, after a long value, is read from global memory directly) and lists up
// to WALK_MAX values; then every thread hands them to `emit(k, offset, len)`. Stream offsets are u32:
// a stream longer than 4 GiB - 1 is walked as if it ended there. The walk stops at the first value
// whose prefix or bytes run past the end; its index is returned (NONE when all `count` were found).

constexpr u32 WALK_CHUNK = 4096;
constexpr u32 WALK_MAX = WALK_CHUNK / 4;

struct WalkShared {
    // The staged bytes, as words so a length prefix at any offset is two aligned loads and a funnel
    // shift (one word of slack: the second word of a prefix in the chunk's last four bytes).
    u32 words[WALK_CHUNK / 4 + 1];
    u32 off[WALK_MAX];
    u32 len[WALK_MAX];
    u32 cur, done_k, nent, kbase, fail, finished;
};

template <class Emit>
__device__ inline u32 walk_plain_byte_arrays(WalkShared& sh, const u8* base, u64 len64, u32 count,
                                             Emit emit) {
    const u32 t = threadIdx.x;
    const u32 len = len64 > 0xffffffffull ? 0xffffffffu : (u32)len64;
    if (t == 0) {
        sh.cur = 0; sh.done_k = 0; sh.nent = 0; sh.kbase = 0; sh.fail = NONE;
        sh.finished = count == 0;
    }
    __syncthreads();
    while (!sh.finished) {
        const u32 cs = sh.cur;  // <= len
        const u32 ce = len - cs > WALK_CHUNK ? cs + WALK_CHUNK : len;
        u8* staged = (u8*)sh.words;
        for (u32 i = t; i < ce - cs; i += blockDim.x) staged[i] = base[cs + i];
        __syncthreads();
        if (t == 0) {
            u32 p = cs, k = sh.done_k, ne = 0;
            sh.kbase = k;
            while (k < count && ne < WALK_MAX) {
                if (len - p < 4) { sh.fail = k; break; }
                u32 L;
                if ((u64)p + 4 <= ce) {
                    // Bytes q..q+3 are staged; the second word's other bytes are shifted out.
                    const u32 q = p - cs;
                    L = __funnelshift_r(sh.words[q >> 2], sh.words[(q >> 2) + 1], 8 * (q & 3));
                } else if (p - cs < 2 * WALK_CHUNK) {
                    break;  // close by: stage the chunk starting at this prefix
                } else {
                    L = load_u32_le(base + p);  // far, after a long value: read it where it is
                }
                if (L > len - p - 4) { sh.fail = k; break; }
                sh.off[ne] = p + 4;
                sh.len[ne] = L;
                ne++;
                k++;
                p += 4 + L;
            }
            sh.cur = p;
            sh.done_k = k;
            sh.nent = ne;
            sh.finished = k >= count || sh.fail != NONE;
        }
        __syncthreads();
        const u32 ne = sh.nent, kb = sh.kbase;
        for (u32 e = t; e < ne; e += blockDim.x) emit(kb + e, sh.off[e], sh.len[e]);
        __syncthreads();
    }
    return sh.fail;
}

}  // namespace gpcore
