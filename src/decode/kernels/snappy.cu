// Snappy decompression of page bodies, safe on any input: the walk of the pre-check (validate.cu) that
// also writes the output, so a body is read once, checked as it goes, and needs no nvCOMP.
// One block of UNSNAP_THREADS per body (grid n). status: the pre-check's status on the same body
// (host_kernels/validate.rs, validate_one), and when 0 the output is exactly the stream's bytes
// (reference: the `snap` crate; host_kernels/unsnap.rs). On a failure the output so far is left as it is
// and the host decoder takes the page. Writes stay inside [dst, dst + dst_len) and reads inside
// [src, src + src_len) whatever the bytes: every element is checked (literal inside the input, match
// offset inside what was produced, length inside the declared size) before any byte of it is written.
//
// Warp 0 walks the stream in windows of 32 input bytes as the pre-check does (a lane per candidate
// element, the chain from lane 0 by doubling) and gathers windows into a batch of at most UNSNAP_BATCH
// output bytes, recording each element's length only, so that a window that cannot fail costs the walk
// what it costs the pre-check's fast path. The whole block then places the batch's elements (a scan)
// and resolves it, a thread per output byte: a literal byte comes from the input; a match byte from the
// output before the batch (the last UNSNAP_RING bytes kept in shared memory, older ones read back from
// the output) or from an earlier byte of the batch, found by pointer jumping (a page of 8-byte
// sequential values is a literal byte and a 7-byte match of the value before, itself a match: a chain
// as long as the batch's values, resolved in log2 rounds). A window producing more than a batch (a
// long literal) is written by warp 0 itself, its elements in order, each by the whole warp.
// Measured on the H200 (snappy benchmark file in one step, ncu): 41.2 ms, against 19.1 ms for the
// pre-check's walk and 15.7 ms for nvCOMP's Snappy kernel after it (42.2 ms when the walk placed each
// element itself). So nvCOMP, behind the pre-check, stays the default where it loads.

#define UNSNAP_RING 4096u
// Output bytes resolved together by the block, and its threads.
#define UNSNAP_BATCH 1024u
#define UNSNAP_THREADS 128u
#define UNSNAP_PER_THREAD (UNSNAP_BATCH / UNSNAP_THREADS)
// A body or declared size of 2^31 bytes or more (Parquet page sizes are 32-bit signed): not decoded
// here. The host never sends one; the status keeps the kernel's 32-bit window arithmetic honest.
#define UNSNAP_TOO_LARGE 6u
#define UNSNAP_DONE 0x80000000u

struct UnsnapItem {
    u64 src;
    u64 src_len;
    u64 dst;
    u64 dst_len;
    u32 status;
    u32 block0;  // gp_snappy_literals: the item's first block; gp_unsnap: unused
};
static_assert(sizeof(UnsnapItem) == 40, "UnsnapItem must match layout.rs");

// One output byte at position `at` (< out, where everything before is written: a batch's or an
// element's start), from the ring when recent enough.
__device__ inline u8 unsnap_earlier(const u8* ring, const u8* d, u64 out, u64 at) {
    return out - at <= UNSNAP_RING ? ring[at & (UNSNAP_RING - 1)] : d[at];
}

// The bytes [out, out + batch_len) of a batch of `count` elements, resolved by the whole block: a
// thread per output byte (UNSNAP_PER_THREAD each). `info_at` comes with each element's length
// (| UNSNAP_DONE for a match) and is turned into its first byte in the batch; `info_src` gives its input
// position (a literal) or offset (a match). `starts` gets a bit at each element's first byte.
__device__ inline void unsnap_execute(const u8* s, u8* d, u64 out, u32 batch_len, u32 count, u8* ring,
                                      u32* cells, u32* starts, u32* prefix, u32* info_at,
                                      const u32* info_src, u32* jump_flag, u32* scan_scratch) {
    const u32 tid = threadIdx.x, lane = tid & 31;
    if (tid < UNSNAP_BATCH / 32) starts[tid] = 0;
    // Each element's first byte: a scan of the lengths, UNSNAP_PER_THREAD elements a thread.
    u32 mine = 0;
#pragma unroll
    for (u32 k = 0; k < UNSNAP_PER_THREAD; k++) {
        const u32 r = tid * UNSNAP_PER_THREAD + k;
        if (r < count) mine += info_at[r] & ~UNSNAP_DONE;
    }
    u32 at = block_exclusive_scan(mine, scan_scratch, nullptr);
#pragma unroll
    for (u32 k = 0; k < UNSNAP_PER_THREAD; k++) {
        const u32 r = tid * UNSNAP_PER_THREAD + k;
        if (r < count) {
            const u32 l = info_at[r];
            info_at[r] = at | (l & UNSNAP_DONE);
            atomicOr(&starts[at >> 5], 1u << (at & 31));
            at += l & ~UNSNAP_DONE;
        }
    }
    __syncthreads();
    if (tid < 32) {
        // Elements starting before each 32-byte word of the batch.
        const u32 c = __popc(starts[lane]);
        prefix[lane] = warp_inclusive_sum(c) - c;
    }
    if (tid == 0) jump_flag[0] = jump_flag[1] = 0;
    __syncthreads();
    u32 cell[UNSNAP_PER_THREAD];
    bool pending = false;
#pragma unroll
    for (u32 k = 0; k < UNSNAP_PER_THREAD; k++) {
        cell[k] = UNSNAP_DONE;
        const u32 x = tid + UNSNAP_THREADS * k;
        if (x >= batch_len) continue;
        const u32 word = x >> 5;
        const u32 rank = prefix[word] + __popc(starts[word] & (0xffffffffu >> (31 - lane))) - 1;
        const u32 a = info_at[rank], src = info_src[rank];
        const u32 first = a & ~UNSNAP_DONE, dx = x - first;
        if (!(a & UNSNAP_DONE)) {
            cell[k] = UNSNAP_DONE | s[(u64)src + dx];
        } else {
            // The byte dx of a match copies the byte dx mod offset of the offset bytes before it.
            const u32 rel = dx < src ? dx : dx % src;
            const long long y = (long long)first - (long long)src + rel;
            if (y < 0) {
                cell[k] = UNSNAP_DONE | unsnap_earlier(ring, d, out, out + y);
            } else {
                cell[k] = (u32)y << 8;
                pending = true;
            }
        }
        cells[x] = cell[k];
    }
    // Pointer jumping: a pending byte takes its source's cell, a value or the source's own source,
    // until every byte has a value (each round doubles the hops behind a byte). jump_flag[r & 1] says
    // whether any byte is pending in round r; the other one is cleared for the next round.
    for (u32 r = 0;; r++) {
        if (pending) atomicOr(&jump_flag[r & 1], 1u);
        __syncthreads();
        if (!jump_flag[r & 1]) break;
        if (tid == 0) jump_flag[(r + 1) & 1] = 0;
        u32 next[UNSNAP_PER_THREAD];
#pragma unroll
        for (u32 k = 0; k < UNSNAP_PER_THREAD; k++) {
            next[k] = cell[k];
            if (!(cell[k] & UNSNAP_DONE)) next[k] = cells[cell[k] >> 8];
        }
        __syncthreads();
        pending = false;
#pragma unroll
        for (u32 k = 0; k < UNSNAP_PER_THREAD; k++) {
            if (!(cell[k] & UNSNAP_DONE)) {
                cell[k] = next[k];
                cells[tid + UNSNAP_THREADS * k] = next[k];
                pending |= !(next[k] & UNSNAP_DONE);
            }
        }
    }
    // Every ring read of the batch came before the barrier that ended the loop.
#pragma unroll
    for (u32 k = 0; k < UNSNAP_PER_THREAD; k++) {
        const u32 x = tid + UNSNAP_THREADS * k;
        if (x < batch_len) {
            const u8 v = (u8)cell[k];
            d[out + x] = v;
            ring[(out + x) & (UNSNAP_RING - 1)] = v;
        }
    }
}

// A window too long for a batch (a long literal), written by warp 0 alone, its elements in order.
__device__ inline void unsnap_long_window(const u8* s, u8* d, u8* ring, const SnappyLane& e, u32 members,
                                          u64 before, u64 lit_pos) {
    const u32 lane = threadIdx.x & 31;
    for (u32 todo = members; todo; todo &= todo - 1) {
        const u32 m = __ffs(todo) - 1;
        const bool copy = __shfl_sync(gpcore::FULL_MASK, e.copy, m);
        const u64 at = __shfl_sync(gpcore::FULL_MASK, before, m);
        const u64 len = __shfl_sync(gpcore::FULL_MASK, e.len, m);
        const u64 src = __shfl_sync(gpcore::FULL_MASK, copy ? e.offset : lit_pos, m);
        if (!copy) {
            // Only the literal's last UNSNAP_RING bytes can be read from the ring later; positions
            // equal modulo the ring fall to the same lane, in order.
            const u64 ring_from = len > UNSNAP_RING ? len - UNSNAP_RING : 0;
            u64 j = lane;
            for (; j + 32 * 7 < len; j += 32 * 8) {
                u8 v[8];
#pragma unroll
                for (u32 u = 0; u < 8; u++) v[u] = s[src + j + 32 * u];
#pragma unroll
                for (u32 u = 0; u < 8; u++) {
                    d[at + j + 32 * u] = v[u];
                    if (j + 32 * u >= ring_from) ring[(at + j + 32 * u) & (UNSNAP_RING - 1)] = v[u];
                }
            }
            for (; j < len; j += 32) {
                const u8 v = s[src + j];
                d[at + j] = v;
                if (j >= ring_from) ring[(at + j) & (UNSNAP_RING - 1)] = v;
            }
        } else {
            // A match (at most 64 bytes): its bytes read from before it, then written.
            const u32 off = (u32)src;
            for (u32 j0 = 0; j0 < (u32)len; j0 += 32) {
                const u32 j = j0 + lane;
                u8 v = 0;
                if (j < len) v = unsnap_earlier(ring, d, at, at - off + (j < off ? j : j % off));
                __syncwarp();
                if (j < len) {
                    d[at + j] = v;
                    ring[(at + j) & (UNSNAP_RING - 1)] = v;
                }
                __syncwarp();
            }
        }
        __syncwarp();  // the element's bytes are visible to the next one's reads
    }
}

// Warp 0's state between batches.
struct UnsnapWalk {
    u64 p, b, out;
    u32 have;
};

// Warp 0 walks windows from w->p, adding each to the batch that starts at w->out while it fits
// (writing a window too long for any batch itself, when the batch is still empty), and stops before
// the first window that does not fit (walked again for the next batch), at the input's end, or at a
// failing element. A batch's elements get their lengths here (info_at: length, | UNSNAP_DONE for a
// match) and their places in unsnap_execute. Returns the batch's length and *count its elements;
// *done and *status say whether the walk is over and how.
__device__ inline u32 unsnap_collect(const u8* s, u64 n, u8* d, u64 want, UnsnapWalk* w, u8* st, u8* ring,
                                     u32* info_at, u32* info_src, u64* batch_out, u32* count, bool* done,
                                     u32* status) {
    const u32 lane = threadIdx.x & 31;
    *batch_out = w->out;
    u32 batch_len = 0, elements = 0;
    *done = false;
    *status = VALIDATE_OK;
    while (w->p < n) {
        if (w->p < w->b || min(w->p + SNAPPY_WINDOW_BYTES, n) > w->b + w->have)
            snappy_stage_fill(s, n, w->p, st, &w->b, &w->have);
        const SnappyLane e = snappy_lane_element(st, (u32)(w->p - w->b), (u32)(n - w->p));
        const u32 members = snappy_window_members(e);
        const bool member = (members >> lane) & 1u;
        const u32 last = 31 - __clz(members);
        const u64 mlen = member ? e.len : 0;
        // As in the pre-check: a window whose members cannot fail needs no prefix sum.
        u64 produced;
        if (snappy_window_doubtful(e, member, w->out, want, &produced)) {
            const u64 sum = warp_inclusive_sum(mlen);
            const u32 failed = snappy_first_failure(e, member, w->out + sum - mlen, want);
            if (failed != VALIDATE_OK) {
                *done = true;
                *status = failed;
                return 0;
            }
        }
        // Every member is inside the input and the declared size from here on, every match offset at
        // most the output before it (so below 2^31, as are the lengths).
        const u64 advance = last + __shfl_sync(gpcore::FULL_MASK, e.adv, last);
        const u64 lit_pos = w->p + lane + e.head;
        if (produced <= UNSNAP_BATCH - batch_len) {
            if (member) {
                const u32 rank = elements + __popc(members & ((1u << lane) - 1));
                info_at[rank] = (u32)e.len | (e.copy ? UNSNAP_DONE : 0u);
                info_src[rank] = e.copy ? (u32)e.offset : (u32)lit_pos;
            }
            elements += __popc(members);
            batch_len += (u32)produced;
        } else if (batch_len == 0) {
            const u64 sum = warp_inclusive_sum(mlen);
            unsnap_long_window(s, d, ring, e, members, w->out + sum - mlen, lit_pos);
            *batch_out = w->out + produced;
        } else {
            break;
        }
        w->out += produced;
        w->p += advance;
    }
    if (w->p >= n) {
        *done = true;
        *status = w->out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
    }
    *count = elements;
    __syncwarp();
    return batch_len;
}

__device__ u32 unsnap_block(const u8* s, u64 n, u8* d, u64 want) {
    __shared__ uint4 stage_words[SNAPPY_STAGE_WORDS];
    __shared__ u8 ring[UNSNAP_RING];
    __shared__ u32 cells[UNSNAP_BATCH];  // a batch's bytes: UNSNAP_DONE | value, or an earlier byte's index << 8
    __shared__ u32 starts[UNSNAP_BATCH / 32], prefix[UNSNAP_BATCH / 32];
    __shared__ u32 info_at[UNSNAP_BATCH], info_src[UNSNAP_BATCH];
    __shared__ u32 jump_flag[2], scan_scratch[32];
    __shared__ u64 ctl_out;
    __shared__ u32 ctl_len, ctl_count, ctl_done, ctl_status;
    const u32 tid = threadIdx.x;
    if (n >= (1ull << 31) || want >= (1ull << 31)) return UNSNAP_TOO_LARGE;
    UnsnapWalk w = {0, 0, 0, 0};
    for (;;) {
        if (tid < 32) {
            u64 batch_out = 0;
            bool done = false;
            u32 status = VALIDATE_OK, len = 0, count = 0;
            if (w.p == 0) {
                status = snappy_preamble(s, n, want, &w.p);
                done = status != VALIDATE_OK;
            }
            if (!done) {
                len = unsnap_collect(s, n, d, want, &w, (u8*)stage_words, ring, info_at, info_src, &batch_out,
                                     &count, &done, &status);
            }
            if (tid == 0) {
                ctl_out = batch_out;
                ctl_len = status == VALIDATE_OK ? len : 0;
                ctl_count = count;
                ctl_done = done;
                ctl_status = status;
            }
        }
        __syncthreads();
        const u32 len = ctl_len;
        const u64 out = ctl_out;
        const bool done = ctl_done;
        if (len > 0) {
            unsnap_execute(s, d, out, len, ctl_count, ring, cells, starts, prefix, info_at, info_src, jump_flag,
                           scan_scratch);
        }
        __syncthreads();
        if (done) break;
    }
    return ctl_status;
}

extern "C" __global__ void __launch_bounds__(UNSNAP_THREADS) gp_unsnap(UnsnapItem* items, u32 n) {
    if (blockDim.x != UNSNAP_THREADS) __trap();
    const u32 i = blockIdx.x;
    if (i >= n) return;
    const UnsnapItem it = items[i];
    const u32 st = unsnap_block((const u8*)it.src, it.src_len, (u8*)it.dst, it.dst_len);
    if (threadIdx.x == 0) items[i].status = st;
}

// ---- Bodies of literals only ----
// A Snappy body whose elements are all literals is a copy: what a Snappy compressor writes for bytes it
// cannot compress (random doubles, bit-packed dictionary indices), a literal per 64 KiB block. nvCOMP's
// kernel copies such a body with one warp, at about 340 MB/s on the H200: a step of the snappy
// benchmark file's 1 MB dictionary pages of random doubles took it 3.1 ms. Here a body gets a block
// per SNAPPY_LITERALS_SLICE bytes of output (one at least; items[i].block0 is its first, the blocks of
// one body after another's, layout.rs snappy_literals::plan): each block walks the body's elements
// (SNAPPY_LITERALS_MAX at most, each checked inside the input and the declared size), then copies its
// slice of the output. Any other body (one with a match, with more literals, or that the walk refuses)
// gets a status other than 0 and has no byte written: the other decoders take it. status 0: the output
// is the stream's bytes. Twin: host_kernels/unsnap.rs (literals_one). Block SNAPPY_LITERALS_THREADS
// (another size traps).

#define SNAPPY_LITERALS_THREADS 256u
#define SNAPPY_LITERALS_MAX 64u
#define SNAPPY_LITERALS_SLICE 65536u
// The body holds a match, or more than SNAPPY_LITERALS_MAX literals.
#define VALIDATE_NOT_LITERALS 8u

// Blocks of a body declaring `dst_len` bytes (snappy_literals::blocks).
__host__ __device__ inline u64 snappy_literals_blocks(u64 dst_len) {
    const u64 b = (dst_len + SNAPPY_LITERALS_SLICE - 1) / SNAPPY_LITERALS_SLICE;
    return b ? b : 1;
}

// Walks a body of literals only: each literal's first input byte (from) and output byte (at), *count of
// them, and the status.
__device__ inline u32 snappy_literals_walk(const u8* s, u64 n, u64 want, u32* from, u32* at, u32* count) {
    *count = 0;
    if (n >= (1ull << 31) || want >= (1ull << 31)) return VALIDATE_TOO_LARGE;
    u64 p = 0, total = 0;
    if (!read_uleb128(s, &p, n, &total)) return VALIDATE_TRUNCATED;
    if (total != want) return VALIDATE_WRONG_SIZE;
    u64 out = 0;
    u32 k = 0;
    while (p < n) {
        const u32 tag = s[p++];
        if ((tag & 3u) != 0 || k == SNAPPY_LITERALS_MAX) return VALIDATE_NOT_LITERALS;
        const u32 high = tag >> 2;
        u64 len = (u64)high + 1;
        if (high >= 60) {
            const u32 extra = high - 59;
            if (extra > n - p) return VALIDATE_TRUNCATED;
            u64 v = 0;
            for (u32 j = 0; j < extra; j++) v |= (u64)s[p + j] << (8 * j);
            p += extra;
            len = v + 1;
        }
        if (len > n - p) return VALIDATE_TRUNCATED;
        if (len > want - out) return VALIDATE_WRONG_SIZE;
        from[k] = (u32)p;
        at[k] = (u32)out;
        k++;
        p += len;
        out += len;
    }
    *count = k;
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

extern "C" __global__ void __launch_bounds__(SNAPPY_LITERALS_THREADS) gp_snappy_literals(UnsnapItem* items, u32 n) {
    if (blockDim.x != SNAPPY_LITERALS_THREADS) __trap();
    __shared__ u32 from[SNAPPY_LITERALS_MAX], at[SNAPPY_LITERALS_MAX];
    __shared__ u32 count, status;
    if (n == 0) return;
    // The body whose blocks include this one: the last whose first block is at most this one (every
    // thread searches, the same loads for all).
    u32 body = 0, hi = n;
    while (hi - body > 1) {
        const u32 mid = (body + hi) / 2;
        if (items[mid].block0 <= blockIdx.x) body = mid;
        else hi = mid;
    }
    const u32 first = items[body].block0, next = body + 1 < n ? items[body + 1].block0 : gridDim.x;
    // A block outside its body's blocks (the host's plan gives none) does nothing.
    if (blockIdx.x < first || blockIdx.x >= next) return;
    const u32 slice = blockIdx.x - first, slices = next - first;
    // The fields read one by one: the body's first block writes the status.
    const u8* s = (const u8*)items[body].src;
    const u64 src_len = items[body].src_len, want = items[body].dst_len;
    u8* d = (u8*)items[body].dst;
    if (threadIdx.x == 0) {
        u32 k = 0;
        status = snappy_literals_walk(s, src_len, want, from, at, &k);
        count = k;
    }
    __syncthreads();
    if (status == VALIDATE_OK) {
        // This block's slice of the output: equal parts, multiples of 16 bytes (the last one shorter).
        const u64 per = ((want + slices - 1) / slices + 15) & ~15ull;
        const u64 lo = min(per * slice, want), hi_out = min(lo + per, want);
        for (u32 k = 0; k < count; k++) {
            const u64 end = k + 1 < count ? (u64)at[k + 1] : want;
            const u64 a = max((u64)at[k], lo), b = min(end, hi_out);
            if (a < b) gpcore::coop_copy(d + a, s + from[k] + (a - at[k]), b - a, threadIdx.x, SNAPPY_LITERALS_THREADS);
        }
    }
    if (slice == 0 && threadIdx.x == 0) items[body].status = status;
}
