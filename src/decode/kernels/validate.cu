// Checks compressed page bodies before nvCOMP sees them. nvCOMP's headers make corrupt input undefined
// behaviour (its Snappy kernel was seen reading gigabytes past its input on a flipped byte), so every
// body is checked here first. One warp per body (grid n, block 32): bodies of a step are checked in
// parallel on every SM.
//   SNAPPY, LZ4_RAW: the whole stream is walked: every literal and match inside the input, every match
//     offset inside what was produced, the output exactly the declared size, the input used up. Snappy
//     is walked by the whole warp, 32 input bytes at a time (validate_snappy_warp): a walk by one
//     thread costs a dependent chain of loads and branches per element, and the longest page of a step
//     (some 40,000 elements) took about 35 ms on the H200, longer than the step's decode. LZ4's
//     run-length bytes make an element's start unknowable from its neighbours' bytes: its first lane walks.
//   ZSTD: the frame magic number, and the frame content size, which the frame header must give, equal
//     to the declared size.
//   GZIP: the member header (1f 8b 08), and ISIZE (the last 4 bytes) equal to the declared size modulo
//     2^32; a body of several members fails this check and goes to the host decompressor.
// Twin: reference/validate.rs (validate_one). status[i]: 0 valid, otherwise a VALIDATE_* code.

#define CODEC_SNAPPY 1u
#define CODEC_ZSTD 2u
#define CODEC_LZ4_RAW 3u
#define CODEC_GZIP 4u

#define VALIDATE_OK 0u
#define VALIDATE_TRUNCATED 1u
#define VALIDATE_BAD_OFFSET 2u
#define VALIDATE_WRONG_SIZE 3u
#define VALIDATE_BAD_HEADER 4u
#define VALIDATE_TRAILING 5u

struct ValidateItem {
    u64 src;
    u64 src_len;
    u64 dst_len;
    u32 codec;
    u32 status;
};
static_assert(sizeof(ValidateItem) == 32, "ValidateItem must match layout.rs");

__device__ inline u32 validate_lz4_block(const u8* s, u64 n, u64 want) {
    u64 p = 0, out = 0;
    while (true) {
        if (p >= n) return VALIDATE_TRUNCATED;
        const u8 token = s[p++];
        u64 lit = token >> 4;
        if (lit == 15) {
            u8 b;
            do {
                if (p >= n) return VALIDATE_TRUNCATED;
                b = s[p++];
                lit += b;
                if (lit > n) return VALIDATE_TRUNCATED;
            } while (b == 255);
        }
        if (lit > n - p) return VALIDATE_TRUNCATED;
        if (lit > want - out) return VALIDATE_WRONG_SIZE;
        p += lit;
        out += lit;
        if (p == n) break;  // the last sequence has literals only
        if (p + 2 > n) return VALIDATE_TRUNCATED;
        const u64 offset = (u64)s[p] | ((u64)s[p + 1] << 8);
        p += 2;
        if (offset == 0 || offset > out) return VALIDATE_BAD_OFFSET;
        u64 m = token & 15;
        if (m == 15) {
            u8 b;
            do {
                if (p >= n) return VALIDATE_TRUNCATED;
                b = s[p++];
                m += b;
                if (m > want) return VALIDATE_WRONG_SIZE;
            } while (b == 255);
        }
        m += 4;
        if (m > want - out) return VALIDATE_WRONG_SIZE;
        out += m;
    }
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

__device__ inline u32 validate_zstd(const u8* s, u64 n, u64 want) {
    if (n < 6) return VALIDATE_TRUNCATED;
    const u32 magic = (u32)s[0] | ((u32)s[1] << 8) | ((u32)s[2] << 16) | ((u32)s[3] << 24);
    if (magic != 0xFD2FB528u) return VALIDATE_BAD_HEADER;
    const u8 fhd = s[4];
    const u32 fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, dict_flag = fhd & 3;
    if ((fhd >> 3) & 1) return VALIDATE_BAD_HEADER;  // reserved bit
    u64 p = 5 + (single ? 0 : 1);
    const u32 dict_bytes = dict_flag == 0 ? 0 : (dict_flag == 1 ? 1 : (dict_flag == 2 ? 2 : 4));
    p += dict_bytes;
    const u32 fcs_bytes = fcs_flag == 0 ? (single ? 1 : 0) : (fcs_flag == 1 ? 2 : (fcs_flag == 2 ? 4 : 8));
    if (p + fcs_bytes > n) return VALIDATE_TRUNCATED;
    // No content size in the header: nothing proves the output fits (nvCOMP's zstd decoder was seen
    // writing past a too-small output), so the host decompresses it.
    if (fcs_bytes == 0) return VALIDATE_WRONG_SIZE;
    u64 fcs = 0;
    for (u32 i = 0; i < fcs_bytes; i++) fcs |= (u64)s[p + i] << (8 * i);
    if (fcs_bytes == 2) fcs += 256;
    return fcs == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

__device__ inline u32 validate_gzip(const u8* s, u64 n, u64 want) {
    if (n < 18) return VALIDATE_TRUNCATED;
    if (s[0] != 0x1f || s[1] != 0x8b || s[2] != 8) return VALIDATE_BAD_HEADER;
    const u32 isize = (u32)s[n - 4] | ((u32)s[n - 3] << 8) | ((u32)s[n - 2] << 16) | ((u32)s[n - 1] << 24);
    return isize == (u32)want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

// Snappy walked by a warp: each lane decodes the element that would start at p + lane; the elements
// that really start in the window [p, p + 32) are the chain from lane 0, found by doubling (after round
// k each lane knows the next 2^k elements of its chain; an element takes at least 2 bytes, so at most 16
// start in a window and 4 rounds reach them all). Where a window could fail, a prefix sum of the
// elements' output lengths gives each match the output before it, and the first failing element in
// stream order decides the status, as in the serial walk of the reference (reference/validate.rs). The
// window then moves past the chain's last element (at least 32 bytes on).
// The bytes come from a stage in shared memory, refilled SNAPPY_STAGE bytes at a time with 16-byte loads:
// read straight from global memory, each lane's element (a tag and up to 4 more bytes, read in branches
// that diverge by element kind) cost several dependent load latencies a window, about 1.3 us a window on
// the H200 (35 ms for a 1 MB page); here a window reads 5 bytes per lane from shared memory, branch-free.
#define SNAPPY_STAGE 2048u
// The window's element headers reach at most 32 + 4 bytes from its start.
#define SNAPPY_WINDOW_BYTES 36u

__device__ inline u32 warp_or(u32 v) {
#if __CUDA_ARCH__ >= 800
    return __reduce_or_sync(gpcore::FULL_MASK, v);
#else
    for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(gpcore::FULL_MASK, v, o);
    return v;
#endif
}

__device__ inline u32 warp_add(u32 v) {
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(gpcore::FULL_MASK, v);
#else
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(gpcore::FULL_MASK, v, o);
    return v;
#endif
}

// Fills the stage with body bytes [b, b + have), have = min(SNAPPY_STAGE, n - b), b at most p and
// within 15 bytes of it so that s + b is 16-byte aligned where that stays inside the body (b = p
// otherwise: byte loads). Every lane's loads are issued before any is stored, so a refill waits for one
// memory latency. Called by the whole warp.
__device__ inline void snappy_stage_fill(const u8* s, u64 n, u64 p, u8* st, u64* b, u32* have) {
    const u32 lane = threadIdx.x & 31;
    const u32 mis = (u32)((u64)(s + p) & 15);
    __syncwarp();  // every lane is done with the old stage
    if (p >= mis) {
        const u64 from = p - mis;
        const u32 cnt = (u32)min((u64)SNAPPY_STAGE, n - from);
        const uint4* src = (const uint4*)(s + from);
        const u32 vecs = cnt / 16;
        uint4 v[SNAPPY_STAGE / 16 / 32];
#pragma unroll
        for (u32 k = 0; k < SNAPPY_STAGE / 16 / 32; k++) {
            const u32 j = lane + 32 * k;
            if (j < vecs) v[k] = src[j];
        }
#pragma unroll
        for (u32 k = 0; k < SNAPPY_STAGE / 16 / 32; k++) {
            const u32 j = lane + 32 * k;
            if (j < vecs) ((uint4*)st)[j] = v[k];
        }
        for (u32 j = vecs * 16 + lane; j < cnt; j += 32) st[j] = s[from + j];
        *b = from;
        *have = cnt;
    } else {
        const u32 cnt = (u32)min((u64)SNAPPY_STAGE, n - p);
        for (u32 j = lane; j < cnt; j += 32) st[j] = s[p + j];
        *b = p;
        *have = cnt;
    }
    __syncwarp();  // the new stage is visible to every lane
}

// The element that would start at q (one lane's guess in a window at p): its output length, match
// offset, bytes taken, and whether it fits the input. Read from the stage (bytes [b, b + have)), which
// covers the window's SNAPPY_WINDOW_BYTES or the body's end.
struct SnappyElement {
    u64 len;
    u64 offset;
    u64 adv;
    u32 err;
    bool copy;
    bool inside;
};

__device__ inline SnappyElement snappy_element_at(u64 q, u64 n, u64 b, const u8* st) {
    SnappyElement e;
    e.inside = q < n;
    u32 t[5];
#pragma unroll
    for (u32 k = 0; k < 5; k++) {
        // Below b + have whenever below n (see above); the clamp keeps the index inside the stage.
        const u32 at = (u32)min(q + k - b, (u64)SNAPPY_STAGE - 1);
        t[k] = q + k < n ? st[at] : 0u;
    }
    const u32 tag = t[0], kind = tag & 3;
    const u32 literal_len_bytes = (kind == 0 && (tag >> 2) >= 60) ? (tag >> 2) - 59 : 0;
    const u32 head = kind == 0 ? 1 + literal_len_bytes : (kind == 1 ? 2 : (kind == 2 ? 3 : 5));
    const u64 le4 = (u64)t[1] | ((u64)t[2] << 8) | ((u64)t[3] << 16) | ((u64)t[4] << 24);
    e.copy = kind != 0;
    if (kind == 0) {
        e.len = literal_len_bytes ? (le4 & ((1ull << (8 * literal_len_bytes)) - 1)) + 1 : (tag >> 2) + 1;
        e.offset = 0;
    } else if (kind == 1) {
        e.len = ((tag >> 2) & 7) + 4;
        e.offset = ((u64)(tag >> 5) << 8) | t[1];
    } else {
        e.len = (tag >> 2) + 1;
        e.offset = kind == 2 ? (le4 & 0xffff) : le4;
    }
    e.err = VALIDATE_OK;
    if (e.inside && head > n - q) e.err = VALIDATE_TRUNCATED;
    else if (e.inside && !e.copy && e.len > n - q - head) e.err = VALIDATE_TRUNCATED;
    e.adv = e.copy ? head : head + e.len;
    return e;
}

// The lanes at which elements start in the window, following the chain from lane 0 by doubling: each
// lane knows its element and the ones after it, `jump` the lane 2^k elements on.
__device__ inline u32 snappy_chain(const SnappyElement& e, u32 lane) {
    u32 jump = (!e.inside || e.err != VALIDATE_OK || e.adv >= 32 - lane) ? 32u : lane + (u32)e.adv;
    u32 chain = 1u << lane;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const u32 src = jump & 31u;
        const u32 their_chain = __shfl_sync(gpcore::FULL_MASK, chain, src);
        const u32 their_jump = __shfl_sync(gpcore::FULL_MASK, jump, src);
        if (jump < 32) {
            chain |= their_chain;
            jump = their_jump;
        }
    }
    // A chain that reaches the input's end marks a lane past it: no element there.
    return __shfl_sync(gpcore::FULL_MASK, chain, 0) & __ballot_sync(gpcore::FULL_MASK, e.inside);
}

// The sum over the warp of a value below 2^31 per lane (as two 32-bit sums of 16-bit halves).
__device__ inline u64 warp_sum_small(u64 v) {
    return ((u64)warp_add((u32)(v >> 16)) << 16) + warp_add((u32)(v & 0xffff));
}

// The whole stream walked by one warp, exactly as the reference walks it (status included). `st` is
// the block's stage (SNAPPY_STAGE bytes of shared memory).
__device__ u32 validate_snappy_warp(const u8* s, u64 n, u64 want, u8* st) {
    const u32 lane = threadIdx.x & 31;
    u64 p = 0, total = 0;
    u32 status = VALIDATE_OK;
    if (lane == 0) {
        if (!read_uleb128(s, &p, n, &total)) status = VALIDATE_TRUNCATED;
        else if (total != want) status = VALIDATE_WRONG_SIZE;
    }
    status = __shfl_sync(gpcore::FULL_MASK, status, 0);
    if (status != VALIDATE_OK) return status;
    p = __shfl_sync(gpcore::FULL_MASK, p, 0);
    u64 b = 0;     // the stage holds body bytes [b, b + have)
    u32 have = 0;
    u64 out = 0;
    while (p < n) {
        if (p < b || min(p + SNAPPY_WINDOW_BYTES, n) > b + have) snappy_stage_fill(s, n, p, st, &b, &have);
        const SnappyElement e = snappy_element_at(p + lane, n, b, st);
        const u32 members = snappy_chain(e, lane);
        const bool member = (members >> lane) & 1u;
        const u32 last = 31 - __clz(members);
        // Fast path, almost every window: no member fails, every match offset is within the output
        // before the window (so within the output before it), and the window's output fits the
        // declared size. Member lengths are below 2^31 here (a literal within the input, a match of at
        // most 64).
        const u64 mlen = member ? e.len : 0;
        const bool doubt = member && (e.err != VALIDATE_OK || e.len >= (1ull << 31) ||
                                      (e.copy && (e.offset == 0 || e.offset > out)));
        const u64 last_adv = __shfl_sync(gpcore::FULL_MASK, e.adv, last);
        if (__ballot_sync(gpcore::FULL_MASK, doubt) == 0) {
            const u64 produced = warp_sum_small(mlen);
            if (produced <= want - out) {
                out += produced;
                p += last + last_adv;
                continue;
            }
        }
        // Exact path (a failing window, or a match near the start of the output): the output before
        // each element from a prefix sum, and the first failing element's status.
        u64 sum = mlen;
        for (int o = 1; o < 32; o <<= 1) {
            const u64 y = __shfl_up_sync(gpcore::FULL_MASK, sum, o);
            if (lane >= (u32)o) sum += y;
        }
        const u64 before = out + sum - mlen;
        u32 mine = e.err;
        if (mine == VALIDATE_OK && e.copy && (e.offset == 0 || e.offset > before)) mine = VALIDATE_BAD_OFFSET;
        if (mine == VALIDATE_OK && e.len > want - before) mine = VALIDATE_WRONG_SIZE;
        const u32 failing = __ballot_sync(gpcore::FULL_MASK, member && mine != VALIDATE_OK);
        if (failing != 0) return __shfl_sync(gpcore::FULL_MASK, mine, __ffs(failing) - 1);
        out += __shfl_sync(gpcore::FULL_MASK, sum, last);
        p += last + last_adv;
    }
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

// ---- One Snappy body split across warps ----
// A warp walks a 1 MB page in about 25 ms on the H200: a chain of dependent steps, longer than the rest
// of a step's decode. So a long body is cut into segments of `segment_bytes`, each walked by a warp of
// its own at the same time. Only segment 0 knows where its first element starts; warp w > 0 starts at
// its segment's first byte and walks on as if an element started there, noting, for every element
// start it meets in its first SNAPPY_SYNC_BYTES, the output before it and the largest
// (offset - output before it) of the matches from there on. A parse that meets the true one follows it
// from then on (both are the same deterministic walk), and parses from nearby starts meet within a few
// elements. The last warp of a body to finish joins the segments in order: the true parse leaves
// segment w - 1 at the first element start at or past segment w's first byte, which must be one the
// walk of segment w met; from there its output and its matches' reach are known, and every match must
// reach no further back than the output before it. Anything else (a segment's walk that failed, a
// start it did not meet, a match reaching too far, an output or end not as declared) sends the body to
// the exact walk above, which gives the reference's status; a body passes only when the joined walk
// proves what the exact walk checks.
#define SNAPPY_SYNC_BYTES 256u
#define SNAPPY_NO_REACH ((i64)(-9223372036854775807ll - 1))

struct SnappySplitBody {
    u32 first_segment;  // its first segment's index
    u32 segments;
    u32 arrived;  // segments walked (atomic; zero from the host)
    u32 outcome;  // out: 0 or the SNAPPY_UNPROVEN_* reason it went to the exact walk, | segments walked again << 8
};
static_assert(sizeof(SnappySplitBody) == 16, "SnappySplitBody must match layout.rs");

struct SnappySegment {
    u64 exit;      // the first element start at or past the segment's end
    u64 produced;  // output of the walk
    u32 broken;    // the walk met an element it cannot pass (outside the input, offset 0, too long)
    u32 produced_at[SNAPPY_SYNC_BYTES];  // 1 + the output before an element start there, 0 when none
    i64 reach_from[SNAPPY_SYNC_BYTES];   // the largest (offset - output before it) of the matches from
                                         // there on (SNAPPY_NO_REACH when none)
};
static_assert(sizeof(SnappySegment) == 3096, "SnappySegment must match layout.rs");

__device__ inline i64 warp_max_i64(i64 v) {
    for (int o = 16; o > 0; o >>= 1) {
        const i64 y = __shfl_xor_sync(gpcore::FULL_MASK, v, o);
        v = y > v ? y : v;
    }
    return v;
}

// The walk of [start, end) of a body, as if an element started at `start`, into `out`.
__device__ void snappy_walk_segment(const u8* s, u64 n, u64 want, u64 start, u64 end, SnappySegment* out, u8* st,
                                    i64* reach_sh, u32* at_sh) {
    const u32 lane = threadIdx.x & 31;
    for (u32 j = lane; j < SNAPPY_SYNC_BYTES; j += 32) {
        reach_sh[j] = SNAPPY_NO_REACH;
        at_sh[j] = 0;
    }
    __syncwarp();
    u64 p = start, produced = 0, b = 0;
    u32 have = 0, broken = 0;
    i64 reach_after = SNAPPY_NO_REACH;  // this lane's, for elements past the sync bytes
    while (p < end) {
        if (p < b || min(p + SNAPPY_WINDOW_BYTES, n) > b + have) snappy_stage_fill(s, n, p, st, &b, &have);
        const u64 q = p + lane;
        const SnappyElement e = snappy_element_at(q, n, b, st);
        const u32 members = snappy_chain(e, lane) & __ballot_sync(gpcore::FULL_MASK, q < end);
        const bool member = (members >> lane) & 1u;
        const u32 last = 31 - __clz(members);
        const bool bad = member && (e.err != VALIDATE_OK || e.len >= (1ull << 31) || (e.copy && e.offset == 0));
        if (__ballot_sync(gpcore::FULL_MASK, bad) != 0) {
            broken = 1;
            break;
        }
        const u64 mlen = member ? e.len : 0;
        const bool in_sync = member && q - start < SNAPPY_SYNC_BYTES;
        const bool near = member && e.copy && e.offset > produced;
        if (__ballot_sync(gpcore::FULL_MASK, in_sync || near) != 0) {
            // Exact: the output before each element, from a prefix sum.
            u64 sum = mlen;
            for (int o = 1; o < 32; o <<= 1) {
                const u64 y = __shfl_up_sync(gpcore::FULL_MASK, sum, o);
                if (lane >= (u32)o) sum += y;
            }
            const u64 before = produced + sum - mlen;
            const i64 reach = e.copy ? (i64)e.offset - (i64)before : SNAPPY_NO_REACH;
            if (in_sync) {
                at_sh[q - start] = (u32)before + 1;  // before <= want < 2^31
                reach_sh[q - start] = reach;
            } else if (member && reach > reach_after) {
                reach_after = reach;
            }
        } else if (member && e.copy) {
            // The output before the window bounds the output before the match from below.
            const i64 reach = (i64)e.offset - (i64)produced;
            if (reach > reach_after) reach_after = reach;
        }
        produced += warp_sum_small(mlen);
        if (produced > want) {
            broken = 1;
            break;
        }
        p += last + __shfl_sync(gpcore::FULL_MASK, e.adv, last);
    }
    __syncwarp();
    // reach_from: a suffix maximum over the sync bytes (8 per lane), folded with the reach past them.
    const i64 after_all = warp_max_i64(reach_after);
    i64 local[SNAPPY_SYNC_BYTES / 32];
    i64 lane_max = SNAPPY_NO_REACH;
#pragma unroll
    for (u32 k = 0; k < SNAPPY_SYNC_BYTES / 32; k++) {
        local[k] = reach_sh[lane * (SNAPPY_SYNC_BYTES / 32) + k];
        if (local[k] > lane_max) lane_max = local[k];
    }
    i64 suffix = lane_max;  // over this lane and the ones after it
    for (int o = 1; o < 32; o <<= 1) {
        const i64 y = __shfl_down_sync(gpcore::FULL_MASK, suffix, o);
        if (lane + (u32)o < 32 && y > suffix) suffix = y;
    }
    i64 run = __shfl_down_sync(gpcore::FULL_MASK, suffix, 1);
    if (lane == 31) run = SNAPPY_NO_REACH;
    if (after_all > run) run = after_all;
#pragma unroll
    for (int k = SNAPPY_SYNC_BYTES / 32 - 1; k >= 0; k--) {
        if (local[k] > run) run = local[k];
        out->reach_from[lane * (SNAPPY_SYNC_BYTES / 32) + k] = run;
    }
    for (u32 j = lane; j < SNAPPY_SYNC_BYTES; j += 32) out->produced_at[j] = at_sh[j];
    if (lane == 0) {
        out->exit = p;
        out->produced = produced;
        out->broken = broken;
    }
}

// Joins the segments' walks, by the whole of the body's last warp. Where the true parse enters a
// segment at a start that segment's walk did not meet (or past its sync bytes: a long literal across
// the boundary), this warp walks the segment again from there. SNAPPY_PROVEN when the walks prove the
// body valid, else why not (the body then goes to the exact walk); `*rewalked` counts the walks again.
#define SNAPPY_PROVEN 0u
#define SNAPPY_UNPROVEN_BROKEN 1u  // a walk met an element it cannot pass
#define SNAPPY_UNPROVEN_REACH 2u   // a match reaches further back than the output before it
#define SNAPPY_UNPROVEN_END 3u     // the walk does not end at the input's end with the declared size
__device__ u32 snappy_join(const u8* s, SnappySegment* segs, u32 count, u64 p0, u64 segment_bytes, u64 n, u64 want,
                           u8* st, i64* reach_sh, u32* at_sh, u32* rewalked) {
    u64 at = p0, base = 0;
    for (u32 w = 0; w < count; w++) {
        SnappySegment* g = &segs[w];
        u64 start = w == 0 ? p0 : w * segment_bytes;
        const u64 end = w + 1 == count ? n : min((u64)(w + 1) * segment_bytes, n);
        if (at >= end) continue;  // an element from before covers the whole segment
        const bool met = __ldcg(&g->broken) == 0 && at >= start && at - start < SNAPPY_SYNC_BYTES &&
                         __ldcg(&g->produced_at[at - start]) != 0;
        if (!met) {
            snappy_walk_segment(s, n, want, at, end, g, st, reach_sh, at_sh);
            __syncwarp();
            start = at;
            *rewalked += 1;
        }
        if (__ldcg(&g->broken) != 0) return SNAPPY_UNPROVEN_BROKEN;
        const u64 before = __ldcg(&g->produced_at[at - start]) - 1;
        const i64 reach = __ldcg(&g->reach_from[at - start]);
        if (reach != SNAPPY_NO_REACH && reach + (i64)before > (i64)base) return SNAPPY_UNPROVEN_REACH;
        base += __ldcg(&g->produced) - before;
        at = __ldcg(&g->exit);
    }
    return at == n && base == want ? SNAPPY_PROVEN : SNAPPY_UNPROVEN_END;
}

// Snappy bodies, each split into segments (`segment_item[g]` is segment g's body; the segments of a
// body are consecutive, bodies[i].first_segment the first). Grid: one block of 32 per segment.
extern "C" __global__ void gp_validate_snappy_split(ValidateItem* items, const u32* segment_item,
                                                    SnappySplitBody* bodies, SnappySegment* segs,
                                                    u64 segment_bytes) {
    __shared__ uint4 stage_words[SNAPPY_STAGE / 16];
    __shared__ i64 reach_sh[SNAPPY_SYNC_BYTES];
    __shared__ u32 at_sh[SNAPPY_SYNC_BYTES];
    u8* st = (u8*)stage_words;
    const u32 lane = threadIdx.x & 31;
    const u32 g = blockIdx.x;
    const u32 i = segment_item[g];
    const ValidateItem it = items[i];
    const u8* s = (const u8*)it.src;
    const u64 n = it.src_len, want = it.dst_len;
    const u32 first = bodies[i].first_segment, count = bodies[i].segments;
    const u32 w = g - first;
    if (count <= 1) {
        const u32 status = validate_snappy_warp(s, n, want, st);
        if (lane == 0) items[i].status = status;
        return;
    }
    u64 p0 = 0, total = 0;
    u32 header_ok = 0;
    if (lane == 0) header_ok = read_uleb128(s, &p0, n, &total) && total == want ? 1u : 0u;
    header_ok = __shfl_sync(gpcore::FULL_MASK, header_ok, 0);
    p0 = __shfl_sync(gpcore::FULL_MASK, p0, 0);
    const u64 start = w == 0 ? p0 : w * segment_bytes;
    const u64 end = w + 1 == count ? n : min((u64)(w + 1) * segment_bytes, n);
    SnappySegment* mine = &segs[g];
    if (header_ok && start < end) {
        snappy_walk_segment(s, n, want, start, end, mine, st, reach_sh, at_sh);
    } else if (lane == 0) {
        mine->broken = 1;
    }
    // The last segment of the body to finish joins them (the writes above are made visible first).
    __threadfence();
    u32 last = 0;
    if (lane == 0) last = atomicAdd(&bodies[i].arrived, 1u) + 1 == count ? 1u : 0u;
    last = __shfl_sync(gpcore::FULL_MASK, last, 0);
    if (!last) return;
    __threadfence();
    u32 rewalked = 0;
    // A header that does not declare the page's size fails whatever the elements say: the exact walk
    // names it.
    const u32 why = header_ok ? snappy_join(s, &segs[first], count, p0, segment_bytes, n, want, st, reach_sh,
                                            at_sh, &rewalked)
                              : SNAPPY_UNPROVEN_END;
    const u32 status = why == SNAPPY_PROVEN ? VALIDATE_OK : validate_snappy_warp(s, n, want, st);
    if (lane == 0) {
        items[i].status = status;
        bodies[i].outcome = why | (min(rewalked, 0xffffffu) << 8);
    }
}

extern "C" __global__ void gp_validate_compressed(ValidateItem* items, u32 n) {
    const u32 i = blockIdx.x;
    if (i >= n) return;
    const ValidateItem it = items[i];
    const u8* s = (const u8*)it.src;
    if (it.codec == CODEC_SNAPPY) {
        // The whole warp (the codec is the block's, so every lane is here).
        __shared__ uint4 stage_words[SNAPPY_STAGE / 16];
        const u32 st = validate_snappy_warp(s, it.src_len, it.dst_len, (u8*)stage_words);
        if (threadIdx.x == 0) items[i].status = st;
        return;
    }
    if (threadIdx.x != 0) return;
    u32 st;
    switch (it.codec) {
    case CODEC_LZ4_RAW: st = validate_lz4_block(s, it.src_len, it.dst_len); break;
    case CODEC_ZSTD: st = validate_zstd(s, it.src_len, it.dst_len); break;
    case CODEC_GZIP: st = validate_gzip(s, it.src_len, it.dst_len); break;
    default: st = VALIDATE_BAD_HEADER; break;
    }
    items[i].status = st;
}
