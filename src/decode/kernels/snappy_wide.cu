// Snappy decompression of long page bodies by many warps each ("wide"), safe on any input. A Snappy
// stream is a chain: an element's start is known only once the one before it is parsed, and a match
// copies bytes produced before it. The pre-check, nvCOMP and gp_unsnap follow that chain with one warp
// or block per body, so a step lasts at least as long as its longest body takes them: on the snappy
// benchmark file the 1 MB dictionary pages (260,000 elements) took 19 ms to check and 16 ms in nvCOMP.
// Here both chains are cut into parallel work (but its total work is larger: measured on the H200 it
// is slower per byte than the pre-check and nvCOMP, so it takes only the bodies whose one-warp walk
// would bound their step; decode/snappy_route.rs chooses them):
//
//   1. gp_wsnap_tabulate: the stream (after its preamble) is cut into segments of WSNAP_SEG input
//      bytes, a warp per segment. For each of the segment's first WSNAP_CAND bytes taken as an element
//      start, it finds where that chain first leaves the segment and the output its elements produce,
//      32 input bytes at a time: the warp parses the element at every byte of a window and, by
//      doubling, where the chain from each byte leaves the window. The true chain enters a segment at
//      one of its first WSNAP_CAND bytes unless the element crossing into it is longer than that.
//   2. gp_wsnap_join: a warp per body follows the true chain from segment to segment through the table
//      (rows staged in shared memory 32 segments at a time; the warp walks a segment itself, 32
//      bytes at a time, when the chain enters it past the candidates), giving each segment its first
//      element and the output before it.
//   3. gp_wsnap_emit: a warp per segment walks its elements 32 input bytes at a time (the pre-check's
//      window walk, from a stage of the input in shared memory) and checks each as the pre-check does
//      (in the input, match offset inside the output so far, length inside the declared size). Then it
//      writes the window's output, a match byte copying its source byte when that lies in the
//      segment's own output (or its pointer, when that byte waits itself); a source before the segment
//      is another warp's, maybe not written yet: the byte gets a pointer to it (`ptr`) and waits
//      (`kind` 1). A window of at most WSNAP_BYTE_WINDOW output bytes without a long literal is
//      written a lane per output byte (wsnap_emit_bytes); others a literal per lane, then each match
//      by the whole warp in turn.
//   4. gp_wsnap_finish: a warp per body takes the first segment's failure in stream order (the
//      pre-check's status), or checks the total against the declared size.
//   5. gp_wsnap_jump, rounds, over the bytes left waiting: pointer jumping. A byte whose source has
//      been written (kind 0) takes it as final (WSNAP_TERM); otherwise it takes its source's pointer,
//      so each round at least doubles the hops behind it. Each hop goes back a segment or more, so
//      log2(segments) + 1 rounds suffice. A round that finds nothing waiting lets the next ones return
//      at once, and a block with nothing waiting skips the later rounds.
//   6. gp_wsnap_gather: each waiting byte copies the byte it ends at.
//   5'. gp_wsnap_resolve, in place of 5 and 6 where no body of the batch has more than 2,048
//      segments (layout.rs, wsnap::RESOLVE_MAX_SEGS): a block per body takes its segments in stream order. A waiting
//      byte's pointer names a byte before its own segment's output (emit followed the segment's own
//      bytes already), so once the segments before are final, each of the segment's waiting bytes
//      copies its byte in one step, and a barrier makes them final for the next segment. A body costs
//      a chain of segment steps (each a load from what was just written, the next segment's marks and
//      pointers loaded beside it), where the jump rounds cost every waiting byte of every body
//      log2(segments) + 1 passes over memory: on the snappy benchmark file's dictionary pages, whose
//      waiting bytes chain through every segment of a page, those were 44 launches of gp_wsnap_jump in
//      one step of the whole file, the costliest of the decoder's kernels with emit.
//
// Status (WsnapItem::status) is the pre-check's on the same body (host_kernels/validate.rs), and when 0
// the output is the stream's bytes (host_kernels/unsnap.rs: the `snap` crate); `unresolved` counts match
// bytes left pending (never, given enough rounds; the host refuses the body if not 0). Reads stay
// inside [src, src + src_len) and the scratch, writes inside [dst, dst + dst_len) and the scratch,
// whatever the bytes: an element is checked before any byte of it is written, and later kernels skip
// a body whose status is not 0. Positions are 32-bit: bodies and outputs are under 2^31 bytes.
// Launch geometry and scratch sizes: layout.rs (wsnap). Blocks: tabulate and emit WSNAP_SEG_WARPS
// warps, one per segment; jump and gather WSNAP_BYTE_THREADS threads of 16 * WSNAP_CHUNKS bytes;
// a body's blocks start at its seg_block0 / byte_block0; resolve WSNAP_RESOLVE_THREADS threads, a
// block per body.

#define WSNAP_SEG 2048u
#define WSNAP_CAND 32u
#define WSNAP_SEG_WARPS 4u
#define WSNAP_BYTE_THREADS 256u
// Output bytes a thread of the byte kernels takes, in chunks of 16.
#define WSNAP_CHUNKS 4u
#define WSNAP_BLOCK_BYTES (WSNAP_BYTE_THREADS * 16u * WSNAP_CHUNKS)
// Jump rounds at most (flags words before the blocks' own).
#define WSNAP_MAX_ROUNDS 32u
// A segment entry: no element starts in the segment. A table exit: the chain runs past the input.
#define WSNAP_NONE 0xffffffffu
// A pointer to an output byte written by gp_wsnap_emit (kind 0): final.
#define WSNAP_TERM 0x80000000u
// Literals longer than this are written by the whole warp (matches always are).
#define WSNAP_LONG 32u
// A window producing at most this many bytes, none in a long literal, is written a lane per byte
// (wsnap_emit_bytes) rather than a literal per lane and a match at a time.
#define WSNAP_BYTE_WINDOW 128u
// gp_wsnap_resolve: threads of its block, each taking 16 output bytes at a time; segment output bases
// staged in shared memory at a time. (The host uses it for bodies of at most 2,048 segments, layout.rs
// wsnap::RESOLVE_MAX_SEGS, so that its chain of segment steps, about 2 us each on the H200, stays short.)
#define WSNAP_RESOLVE_THREADS 256u
#define WSNAP_RESOLVE_BASES 512u

struct WsnapItem {
    u64 src;
    u64 src_len;
    u64 dst;
    u64 dst_len;
    u64 table;     // WSNAP_CAND {u32 exit, u32 output} per segment
    u64 segs;      // a WsnapSeg per segment
    u64 ptr;       // a u32 per output byte
    u64 kind;      // a u8 per output byte
    u64 produced;  // out (join): the chain's output in all, saturating
    u32 seg_block0;
    u32 byte_block0;
    u32 status;
    u32 unresolved;
};
static_assert(sizeof(WsnapItem) == 88, "WsnapItem must match layout.rs");

struct WsnapSeg {
    u32 entry;     // the first element's input position, or WSNAP_NONE
    u32 status;    // the first failing element's, or 0
    u64 out_base;  // the output before the first element
};

// The body whose blocks include `block`: the last with first block <= block (they increase).
__device__ inline u32 wsnap_body(const WsnapItem* items, u32 n, u32 block, bool bytes) {
    u32 lo = 0, hi = n;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) / 2;
        const u32 b0 = bytes ? items[mid].byte_block0 : items[mid].seg_block0;
        if (b0 <= block) lo = mid;
        else hi = mid;
    }
    return lo;
}

// The preamble (the declared size, which must be `want`) as the pre-check reads it; *p past it. A body
// or size of 2^31 bytes or more fails here, as in the pre-check: every kernel of the decoder starts
// with this check, so none meets one (positions are 32-bit).
__device__ inline u32 wsnap_preamble(const u8* s, u64 n, u64 want, u64* p) {
    if (n >= (1ull << 31) || want >= (1ull << 31)) return VALIDATE_TOO_LARGE;
    u64 at = 0, total = 0;
    if (!read_uleb128(s, &at, n, &total)) return VALIDATE_TRUNCATED;
    if (total != want) return VALIDATE_WRONG_SIZE;
    *p = at;
    return VALIDATE_OK;
}

// The number of segments of a body whose stream starts at p0.
__device__ inline u64 wsnap_segments(u64 n, u64 p0) { return (n - p0 + WSNAP_SEG - 1) / WSNAP_SEG; }

// The body and segment of this warp in a segment kernel (tabulate, emit), with the stream's start p0;
// false when the body's preamble fails or the warp has no segment (warp-uniform).
__device__ inline bool wsnap_this_segment(const WsnapItem* items, u32 n, WsnapItem* it, u64* p0, u64* k) {
    *it = items[wsnap_body(items, n, blockIdx.x, false)];
    if (wsnap_preamble((const u8*)it->src, it->src_len, it->dst_len, p0) != VALIDATE_OK) return false;
    *k = (u64)(blockIdx.x - it->seg_block0) * WSNAP_SEG_WARPS + threadIdx.x / 32;
    return *k < wsnap_segments(it->src_len, *p0);
}

// Minimum over the warp.
__device__ inline u32 wsnap_warp_min(u32 v) {
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(gpcore::FULL_MASK, v, o));
    return v;
}

extern "C" __global__ void __launch_bounds__(WSNAP_SEG_WARPS * 32) gp_wsnap_tabulate(const WsnapItem* items, u32 n) {
    if (blockDim.x != WSNAP_SEG_WARPS * 32) __trap();
    WsnapItem it;
    u64 p0, k;
    if (!wsnap_this_segment(items, n, &it, &p0, &k)) return;  // warp-uniform
    const u8* s = (const u8*)it.src;
    const u32 lane = threadIdx.x & 31;
    // Positions fit 32 bits: bodies are under 2^31 bytes.
    const u32 start = (u32)(p0 + k * WSNAP_SEG), end = (u32)min((u64)start + WSNAP_SEG, it.src_len);
    // This lane as a candidate: the chain from start + lane, its next element at `at` (past the segment,
    // or WSNAP_NONE once an element ran past the input) and the output before it.
    u32 at = start + lane;
    u64 out = 0;
    // Each warp's stage of the input: the stage holds body bytes [sb, sb + have).
    __shared__ uint4 stage_words[WSNAP_SEG_WARPS][SNAPPY_STAGE_WORDS];
    u8* st = (u8*)stage_words[threadIdx.x / 32];
    u32 sb = 0, have = 0;
    // Windows of 32 input bytes from the lowest candidate still inside: the whole warp parses the
    // element at each byte of the window and, by doubling, where the chain from each byte leaves the
    // window and the output on the way; each candidate inside the window takes its byte's result.
    // Every candidate in [b, b + 32) leaves it, so the lowest rises by 32 or more a window.
    u32 b = wsnap_warp_min(at < end ? at : WSNAP_NONE);
    while (b != WSNAP_NONE) {
        snappy_stage_cover(s, (u32)it.src_len, b, SNAPPY_WINDOW_BYTES, st, &sb, &have);  // b only grows
        const SnappyLane e = snappy_lane_element(st, b - sb, (u32)it.src_len - b, end - b);
        // To: the lane of the next element inside the window, or 32 once the chain has left it, at
        // `exit` (an input position; WSNAP_NONE when an element runs past the input).
        u32 to;
        u32 exit = b + lane;
        // The output of the chain's elements in the window: valid ones, whose literals lie inside the
        // input (under 2^31 bytes) and whose matches are at most 64 bytes, so 32 bits hold it.
        u32 acc = 0;
        if (!e.inside) {
            to = 32;  // at or past the segment's end: no element here, the chain stops
        } else if (e.err != VALIDATE_OK) {
            to = 32;
            exit = WSNAP_NONE;
        } else {
            acc = e.len;
            if (e.adv < 32 - lane) {
                to = lane + (u32)e.adv;
            } else {
                to = 32;
                exit = (u32)(b + lane + e.adv);  // at most the input's end
            }
        }
#pragma unroll
        for (int r = 0; r < 5; r++) {
            const u32 src = to & 31;
            const u32 their_to = __shfl_sync(gpcore::FULL_MASK, to, src);
            const u32 their_exit = __shfl_sync(gpcore::FULL_MASK, exit, src);
            const u32 their_acc = __shfl_sync(gpcore::FULL_MASK, acc, src);
            if (to < 32) {
                to = their_to;
                exit = their_exit;
                acc += their_acc;
            }
        }
        const bool mine = at != WSNAP_NONE && at >= b && at - b < 32 && at < end;
        const u32 from = mine ? at - b : 0;
        const u32 x = __shfl_sync(gpcore::FULL_MASK, exit, from);
        const u32 o = __shfl_sync(gpcore::FULL_MASK, acc, from);
        if (mine) {
            at = x;
            out += o;
        }
        b = wsnap_warp_min(at != WSNAP_NONE && at < end ? at : WSNAP_NONE);
    }
    u32* t = (u32*)it.table + 2 * (k * WSNAP_CAND + lane);
    t[0] = at;
    t[1] = (u32)min(out, (u64)0xffffffffu);
}

// Follows the chain from q to the first element starting at or past `end`, by the whole warp: *q there
// (UINT64_MAX when an element runs past the input), *out += the output of the elements passed. The
// join calls it where the chain enters a segment past its tabulated starts (a literal longer than
// WSNAP_CAND crossing into it). It walks as the pre-check does: 32 input bytes a window, from bytes
// staged in shared memory (`st`, a stage of validate.cu), since a walk by one thread waits on a load
// per element (some 500 in a segment of the benchmark file's `a` column: about 0.1 ms a segment on the
// H200) and a window read from global memory on one load. q < end <= n < 2^31 (the preamble's check).
__device__ inline void wsnap_follow_warp(const u8* s, u64 n, u64 end, u64* q, u64* out, u8* st) {
    const u32 lane = threadIdx.x & 31;
    u64 at = *q, produced = *out;
    u64 b = 0;  // the stage holds body bytes [b, b + have)
    u32 have = 0;
    while (at < end) {
        if (at < b || min(at + SNAPPY_WINDOW_BYTES, n) > b + have) snappy_stage_fill(s, n, at, st, &b, &have);
        // The element at this lane's byte: the segment's only before `end`, checked against the
        // input's end.
        const SnappyLane e = snappy_lane_element(st, (u32)(at - b), (u32)(n - at), (u32)(end - at));
        // Lane 0's element starts at `at` < end: it is a member, so `members` is not empty.
        const u32 members = snappy_window_members(e);
        const bool member = (members >> lane) & 1u;
        if (__ballot_sync(gpcore::FULL_MASK, member && e.err != VALIDATE_OK)) {
            at = ~0ull;
            break;
        }
        // The members are inside the input: their literals' lengths sum to under 2^31, their
        // matches' to at most 16 * 64.
        produced += gpcore::warp_add(member ? e.len : 0u);
        const u32 last = 31 - __clz(members);
        at += last + __shfl_sync(gpcore::FULL_MASK, e.adv, last);
    }
    *q = at;
    *out = produced;
}

extern "C" __global__ void gp_wsnap_join(WsnapItem* items, u32 n) {
    if (blockDim.x != 32) __trap();
    const u32 i = blockIdx.x, lane = threadIdx.x;
    if (i >= n) return;
    const WsnapItem it = items[i];
    const u8* s = (const u8*)it.src;
    u64 p0;
    if (wsnap_preamble(s, it.src_len, it.dst_len, &p0) != VALIDATE_OK) return;
    const u64 segs = wsnap_segments(it.src_len, p0);
    WsnapSeg* sg = (WsnapSeg*)it.segs;
    const uint2* table = (const uint2*)it.table;
    // The table rows of 32 segments at a time, loaded by the whole warp, so that the chain's walk from
    // row to row reads shared memory rather than waiting on global loads one after another.
    __shared__ uint2 rows[32 * WSNAP_CAND];
    // The stage of wsnap_follow_warp.
    __shared__ uint4 stage_words[SNAPPY_STAGE_WORDS];
    // q: the true chain's next element (UINT64_MAX once an element ran past the input); out: the
    // output before it (a sum of saturated 32-bit counts: no overflow, and over want if any saturated).
    // The same in every lane: each follows the chain through the rows, and lane 0 writes.
    u64 q = p0, out = 0;
    for (u64 k0 = 0; k0 < segs; k0 += 32) {
        const u64 rows_here = min((u64)32, segs - k0);
        __syncwarp();
        // Eight loads in flight at a time rather than one.
        for (u32 r0 = 0; r0 < rows_here; r0 += 8) {
            uint2 v[8];
#pragma unroll
            for (u32 j = 0; j < 8; j++) {
                if (r0 + j < rows_here) v[j] = table[(k0 + r0 + j) * WSNAP_CAND + lane];
            }
#pragma unroll
            for (u32 j = 0; j < 8; j++) {
                if (r0 + j < rows_here) rows[(r0 + j) * WSNAP_CAND + lane] = v[j];
            }
        }
        __syncwarp();
        for (u32 r = 0; r < rows_here; r++) {
            const u64 k = k0 + r;
            const u64 start = p0 + k * WSNAP_SEG, end = min(start + WSNAP_SEG, it.src_len);
            if (lane == 0) {
                WsnapSeg g;
                g.status = VALIDATE_OK;
                g.out_base = out;
                g.entry = q < end ? (u32)q : WSNAP_NONE;
                sg[k] = g;
            }
            if (q >= end) continue;  // a long literal covers the segment, or the chain has ended
            const u64 c = q - start;  // q >= start: the chain left the segment before at its end or later
            if (c < WSNAP_CAND) {
                const uint2 t = rows[r * WSNAP_CAND + c];
                out += t.y;
                q = t.x == WSNAP_NONE ? ~0ull : (u64)t.x;
            } else {
                wsnap_follow_warp(s, it.src_len, end, &q, &out, (u8*)stage_words);
            }
        }
    }
    if (lane == 0) items[i].produced = out;
}

// A window's output [w0, w0 + total) written a lane per byte, 32 bytes at a time in order, by the
// whole warp (the elements' checks passed). Each lane has its element's first output byte `start`
// (non-members: the next member's, so the owner of byte x is the last lane starting at or before x;
// members are at least a byte long), its match offset `off` (0 for a literal) and its literal's input
// position `lit`. A literal byte is read from the input. A match byte x copies x - off: a byte before
// these 32, from this segment's output (written, or waiting with its pointer) or from before the
// segment (a pointer to it, waiting); or a byte of these 32, a lower lane, whose result it takes by
// pointer jumping over the lanes (5 rounds: a chain crosses at most 31 lanes). On the benchmark file's
// dictionary pages (a window of 32 input bytes produces some 32-40 bytes in 8 elements) this replaces
// a pass of the whole warp per match and a loop per literal by one pass per 32 bytes.
__device__ inline void wsnap_emit_bytes(const u8* s, u8* d, u32* ptr, u8* kind, u32 base, u32 w0, u32 total,
                                        u32 start, u32 off, u32 lit) {
    const u32 lane = threadIdx.x & 31;
    for (u32 c = w0; c < w0 + total; c += 32) {
        const u32 x = c + lane;
        // The owner: the last lane whose start is at most x (lane 0's, w0, is).
        u32 owner = 0;
#pragma unroll
        for (u32 step = 16; step > 0; step >>= 1) {
            if (__shfl_sync(gpcore::FULL_MASK, start, owner + step) <= x) owner += step;
        }
        const u32 o_off = __shfl_sync(gpcore::FULL_MASK, off, owner);
        const u32 o_start = __shfl_sync(gpcore::FULL_MASK, start, owner);
        const u32 o_lit = __shfl_sync(gpcore::FULL_MASK, lit, owner);
        const bool valid = x < w0 + total;
        // tag 0: the byte `pay`; 1: waiting, with pointer `pay`; 2: the result of lane `pay` (lower).
        u32 tag = 0, pay = 0;
        if (valid) {
            if (o_off == 0) {
                pay = s[o_lit + (x - o_start)];
            } else {
                const u32 from = x - o_off;  // the offset is within the output before the element
                if (from >= c) {
                    tag = 2;
                    pay = from - c;
                } else if (from < base) {
                    tag = 1;
                    pay = from;
                } else if (kind[from]) {
                    tag = 1;
                    pay = ptr[from];
                } else {
                    pay = d[from];
                }
            }
        }
        // Rounds while a lane still names another (5 at most).
        for (u32 r = 0; r < 5 && __ballot_sync(gpcore::FULL_MASK, tag == 2) != 0; r++) {
            const u32 src = tag == 2 ? pay : lane;
            const u32 t = __shfl_sync(gpcore::FULL_MASK, tag, src);
            const u32 v = __shfl_sync(gpcore::FULL_MASK, pay, src);
            if (tag == 2) {
                tag = t;
                pay = v;
            }
        }
        if (valid) {
            kind[x] = (u8)tag;
            if (tag == 0) d[x] = (u8)pay;
            else ptr[x] = pay;
        }
        __syncwarp();
    }
}

// The elements of one segment from `entry` (a true element start) with `out` bytes before it, by the
// whole warp: checked, then written in order. A literal's bytes go to the output (`kind` 0). A match
// byte copies the byte its offset names, which comes before it: from this segment's output, written
// already, it takes that byte (or, if that byte is itself waiting, its pointer); from before the
// segment (another warp's, maybe not written yet) it takes a pointer to it, and waits (`kind` 1) for
// the jump rounds. Returns the first failing element's status, or 0. The windows' bytes are read from
// `st`, a stage of validate.cu (this warp's).
__device__ inline u32 wsnap_emit_segment(const u8* s, u64 n, u64 want, u64 q, u64 out, u64 limit, u8* d,
                                         u32* ptr, u8* kind, u8* st) {
    const u32 lane = threadIdx.x & 31;
    const u32 base = (u32)min(out, want);  // the segment's first output byte
    u32 b = 0, have = 0;  // the stage holds body bytes [b, b + have)
    while (q < limit) {
        snappy_stage_cover(s, (u32)n, (u32)q, SNAPPY_WINDOW_BYTES, st, &b, &have);  // q only grows
        // The element at this lane's byte: the segment's only before `limit` (at most n).
        const SnappyLane e = snappy_lane_element(st, (u32)(q - b), (u32)(n - q), (u32)(limit - q));
        const u32 members = snappy_window_members(e);
        const bool member = (members >> lane) & 1u;
        const u32 last = 31 - __clz(members);
        // 32-bit sums: up to the first failing member, the members' literals lie inside the input
        // (under 2^31 bytes in all) and their matches are at most 64 bytes each, so the sums before
        // it are exact; those after it are not used.
        const u32 mlen = member ? e.len : 0u;
        const u32 sum = warp_inclusive_sum(mlen);
        const u64 before = out + (sum - mlen);
        // The pre-check's checks, in its order (snappy_first_failure); `before` may exceed want only
        // after an element that already failed.
        u32 mine = VALIDATE_OK;
        if (member) {
            if (e.err != VALIDATE_OK) mine = e.err;
            else if (e.copy && (e.offset == 0 || e.offset > before)) mine = VALIDATE_BAD_OFFSET;
            else if (before > want || e.len > want - before) mine = VALIDATE_WRONG_SIZE;
        }
        const u32 failing = __ballot_sync(gpcore::FULL_MASK, mine != VALIDATE_OK);
        if (failing) return __shfl_sync(gpcore::FULL_MASK, mine, __ffs(failing) - 1);
        // Every member is inside the input and the declared output: positions fit 32 bits.
        const u32 o = (u32)before;
        const u32 total = __shfl_sync(gpcore::FULL_MASK, sum, 31);
        if (total <= WSNAP_BYTE_WINDOW && !__ballot_sync(gpcore::FULL_MASK, member && !e.copy && e.len > WSNAP_LONG)) {
            wsnap_emit_bytes(s, d, ptr, kind, base, (u32)out, total, o, member && e.copy ? e.offset : 0u,
                             (u32)q + lane + e.head);
            out += total;
            q += last + __shfl_sync(gpcore::FULL_MASK, e.adv, last);
            continue;
        }
        // Literals first, each by its own lane (a long one by the whole warp): they depend on nothing.
        if (member && !e.copy && e.len <= WSNAP_LONG) {
            const u8* lit = s + q + lane + e.head;
            for (u32 j = 0; j < (u32)e.len; j++) {
                d[o + j] = lit[j];
                kind[o + j] = 0;
            }
        }
        u32 longs = __ballot_sync(gpcore::FULL_MASK, member && !e.copy && e.len > WSNAP_LONG);
        while (longs) {
            const u32 src = __ffs(longs) - 1;
            longs &= longs - 1;
            const u32 at = __shfl_sync(gpcore::FULL_MASK, o, src);
            const u32 len = (u32)__shfl_sync(gpcore::FULL_MASK, e.len, src);
            const u8* lit = s + q + src + __shfl_sync(gpcore::FULL_MASK, e.head, src);
            for (u32 j = lane; j < len; j += 32) {
                d[at + j] = lit[j];
                kind[at + j] = 0;
            }
        }
        __syncwarp();
        // Matches in order, each by the whole warp: a byte j of a match of offset `off` copies the byte
        // j mod off of the off bytes before the match, all written before it.
        u32 matches = __ballot_sync(gpcore::FULL_MASK, member && e.copy);
        while (matches) {
            const u32 src = __ffs(matches) - 1;
            matches &= matches - 1;
            const u32 at = __shfl_sync(gpcore::FULL_MASK, o, src);
            const u32 len = (u32)__shfl_sync(gpcore::FULL_MASK, e.len, src);
            const u32 off = (u32)__shfl_sync(gpcore::FULL_MASK, e.offset, src);
            for (u32 j = lane; j < len; j += 32) {
                const u32 x = at + j, from = at - off + (j < off ? j : j % off);
                if (from < base) {
                    ptr[x] = from;
                    kind[x] = 1;
                } else if (kind[from]) {
                    ptr[x] = ptr[from];
                    kind[x] = 1;
                } else {
                    d[x] = d[from];
                    kind[x] = 0;
                }
            }
            __syncwarp();
        }
        out += total;
        q += last + __shfl_sync(gpcore::FULL_MASK, e.adv, last);
    }
    return VALIDATE_OK;
}

extern "C" __global__ void __launch_bounds__(WSNAP_SEG_WARPS * 32) gp_wsnap_emit(const WsnapItem* items, u32 n) {
    if (blockDim.x != WSNAP_SEG_WARPS * 32) __trap();
    WsnapItem it;
    u64 p0, k;
    if (!wsnap_this_segment(items, n, &it, &p0, &k)) return;  // warp-uniform
    const u8* s = (const u8*)it.src;
    WsnapSeg* g = (WsnapSeg*)it.segs + k;
    const u64 end = min(p0 + (k + 1) * WSNAP_SEG, it.src_len);
    const u32 entry = g->entry;
    // Each warp's stage of the input.
    __shared__ uint4 stage_words[WSNAP_SEG_WARPS][SNAPPY_STAGE_WORDS];
    u32 status = VALIDATE_OK;
    if (entry != WSNAP_NONE) {
        status = wsnap_emit_segment(s, it.src_len, it.dst_len, entry, g->out_base, end, (u8*)it.dst,
                                    (u32*)it.ptr, (u8*)it.kind, (u8*)stage_words[threadIdx.x / 32]);
    }
    if ((threadIdx.x & 31) == 0) g->status = status;
}

extern "C" __global__ void gp_wsnap_finish(WsnapItem* items, u32 n) {
    if (blockDim.x != 32) __trap();
    const u32 i = blockIdx.x, lane = threadIdx.x;
    if (i >= n) return;
    const WsnapItem it = items[i];
    u64 p0 = 0;
    u32 status = wsnap_preamble((const u8*)it.src, it.src_len, it.dst_len, &p0);
    if (status == VALIDATE_OK) {
        const u64 segs = wsnap_segments(it.src_len, p0);
        const WsnapSeg* sg = (const WsnapSeg*)it.segs;
        for (u64 base = 0; base < segs; base += 32) {
            const u32 mine = base + lane < segs ? sg[base + lane].status : VALIDATE_OK;
            const u32 failing = __ballot_sync(gpcore::FULL_MASK, mine != VALIDATE_OK);
            if (failing) {
                status = __shfl_sync(gpcore::FULL_MASK, mine, __ffs(failing) - 1);
                break;
            }
        }
        if (status == VALIDATE_OK && it.produced != it.dst_len) status = VALIDATE_WRONG_SIZE;
    }
    if (lane == 0) items[i].status = status;
}

// The 16 marks from x (x < want), 0 past want.
__device__ inline void wsnap_marks(const u8* kind, u64 x, u64 want, u8* m) {
    if (x + 16 <= want) {
        const uint4 v = *(const uint4*)(kind + x);
        const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (u32 j = 0; j < 16; j++) m[j] = (u8)(w[j / 4] >> (8 * (j % 4)));
    } else {
#pragma unroll
        for (u32 j = 0; j < 16; j++) m[j] = x + j < want ? kind[x + j] : 0;
    }
}

// The first byte of chunk c (of 16 bytes) of this thread: the block's chunks interleaved by thread, so
// that a warp's loads are contiguous.
__device__ inline u64 wsnap_chunk(const WsnapItem& it, u32 c) {
    return (u64)(blockIdx.x - it.byte_block0) * WSNAP_BLOCK_BYTES + ((u64)c * WSNAP_BYTE_THREADS + threadIdx.x) * 16;
}

// flags: WSNAP_MAX_ROUNDS words, one per round (set when a byte is still waiting after it), then one
// per block of the grid (set when a byte of that block is).
extern "C" __global__ void __launch_bounds__(WSNAP_BYTE_THREADS) gp_wsnap_jump(const WsnapItem* items, u32 n, u32* flags, u32 round) {
    if (blockDim.x != WSNAP_BYTE_THREADS || round >= WSNAP_MAX_ROUNDS) __trap();
    // Nothing was waiting after the round before, anywhere or in this block: done (block-uniform).
    if (round > 0 && *(volatile const u32*)&flags[round - 1] == 0) return;
    const WsnapItem it = items[wsnap_body(items, n, blockIdx.x, true)];
    if (it.status != VALIDATE_OK) return;
    u32* block_flag = &flags[WSNAP_MAX_ROUNDS + blockIdx.x];
    if (round > 0 && *(volatile const u32*)block_flag == 0) return;
    __shared__ u32 any;
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    u32* ptr = (u32*)it.ptr;
    const u8* kind = (const u8*)it.kind;
    bool pending = false;
    for (u32 c = 0; c < WSNAP_CHUNKS; c++) {
        const u64 x = wsnap_chunk(it, c);
        if (x >= it.dst_len) break;
        u8 m[16];
        wsnap_marks(kind, x, it.dst_len, m);
        for (u32 j = 0; j < 16; j++) {
            if (!m[j]) continue;
            const u32 v = ptr[x + j];
            if (v & WSNAP_TERM) continue;
            // v < x + j: a match copies from before itself. Another thread may be updating ptr[v]:
            // either value is a pointer along the same chain.
            if (kind[v] == 0) {
                ptr[x + j] = v | WSNAP_TERM;
            } else {
                const u32 w = ptr[v];
                ptr[x + j] = w;
                if (!(w & WSNAP_TERM)) pending = true;
            }
        }
    }
    if (pending) any = 1;
    __syncthreads();
    if (threadIdx.x == 0) {
        *block_flag = any;
        if (any) atomicOr(&flags[round], 1u);
    }
}

extern "C" __global__ void __launch_bounds__(WSNAP_BYTE_THREADS) gp_wsnap_gather(WsnapItem* items, u32 n) {
    if (blockDim.x != WSNAP_BYTE_THREADS) __trap();
    const u32 i = wsnap_body(items, n, blockIdx.x, true);
    const WsnapItem it = items[i];
    if (it.status != VALIDATE_OK) return;
    __shared__ u32 left;
    if (threadIdx.x == 0) left = 0;
    __syncthreads();
    const u32* ptr = (const u32*)it.ptr;
    u8* d = (u8*)it.dst;
    u32 mine = 0;
    for (u32 c = 0; c < WSNAP_CHUNKS; c++) {
        const u64 x = wsnap_chunk(it, c);
        if (x >= it.dst_len) break;
        u8 m[16];
        wsnap_marks((const u8*)it.kind, x, it.dst_len, m);
        for (u32 j = 0; j < 16; j++) {
            if (!m[j]) continue;
            const u32 v = ptr[x + j];
            // A final pointer names a byte written by gp_wsnap_emit (kind 0), never by this kernel.
            if (v & WSNAP_TERM) d[x + j] = d[v & ~WSNAP_TERM];
            else mine++;
        }
    }
    if (mine) atomicAdd(&left, mine);
    __syncthreads();
    if (threadIdx.x == 0 && left) atomicAdd(&items[i].unresolved, left);
}

// The waiting bytes among the 16 output bytes from a (a multiple of 16, under want) that lie in
// [lo, hi), as a mask, and their pointers.
struct WsnapWaiting {
    u32 mask;
    u32 v[16];
};

__device__ inline void wsnap_waiting_load(const u8* kind, const u32* ptr, u32 a, u32 lo, u32 hi, u32 want,
                                          WsnapWaiting* w) {
    w->mask = 0;
    if (a >= hi) return;
    u8 m[16];
    wsnap_marks(kind, a, want, m);
#pragma unroll
    for (u32 j = 0; j < 16; j++) {
        const u32 x = a + j;
        if (m[j] && x >= lo && x < hi) {
            w->mask |= 1u << j;
            w->v[j] = ptr[x];
        }
    }
}

// Copies each waiting byte of `w` (bytes from a) from the byte its pointer names, which must lie before
// `lo`, the segment's first output byte (final by then); returns how many did not (never, from emit).
// Every load is issued before any store.
__device__ inline u32 wsnap_waiting_copy(u8* d, u32 a, u32 lo, const WsnapWaiting& w) {
    u8 b[16];
    u32 ok = 0;
#pragma unroll
    for (u32 j = 0; j < 16; j++) {
        if (((w.mask >> j) & 1u) && w.v[j] < lo) {
            b[j] = d[w.v[j]];
            ok |= 1u << j;
        }
    }
#pragma unroll
    for (u32 j = 0; j < 16; j++) {
        if ((ok >> j) & 1u) d[a + j] = b[j];
    }
    return __popc(w.mask & ~ok);
}

extern "C" __global__ void __launch_bounds__(WSNAP_RESOLVE_THREADS) gp_wsnap_resolve(WsnapItem* items, u32 n) {
    if (blockDim.x != WSNAP_RESOLVE_THREADS) __trap();
    const u32 i = blockIdx.x;
    if (i >= n) return;  // block-uniform, as every return before the loop
    const WsnapItem it = items[i];
    u64 p0 = 0;
    if (it.status != VALIDATE_OK) return;
    if (wsnap_preamble((const u8*)it.src, it.src_len, it.dst_len, &p0) != VALIDATE_OK) return;
    const u64 segs = wsnap_segments(it.src_len, p0);
    const WsnapSeg* sg = (const WsnapSeg*)it.segs;
    const u8* kind = (const u8*)it.kind;
    const u32* ptr = (const u32*)it.ptr;
    u8* d = (u8*)it.dst;
    const u32 want = (u32)it.dst_len;  // under 2^31 (the preamble's check)
    const u32 step = 16 * WSNAP_RESOLVE_THREADS;
    // Output bases of segments k0 .. k0 + here (the last: the next segment's, or want).
    __shared__ u32 bases[WSNAP_RESOLVE_BASES + 1];
    __shared__ u32 left_in_block;
    if (threadIdx.x == 0) left_in_block = 0;
    u32 left = 0;
    // This thread's first 16 bytes of the next segment, loaded while this one's copy waits.
    WsnapWaiting next;
    bool have_next = false;
    for (u64 k0 = 0; k0 < segs; k0 += WSNAP_RESOLVE_BASES) {
        const u32 here = (u32)min((u64)WSNAP_RESOLVE_BASES, segs - k0);
        __syncthreads();  // every thread is done with the old bases
        for (u32 j = threadIdx.x; j <= here; j += WSNAP_RESOLVE_THREADS) {
            const u64 k = k0 + j;
            bases[j] = k < segs ? (u32)min(sg[k].out_base, (u64)want) : want;
        }
        __syncthreads();
        for (u32 r = 0; r < here; r++) {
            // Bases rise (the join's); max() keeps a range empty rather than wrapping, whatever.
            const u32 lo = bases[r], hi = max(bases[r + 1], lo);
            const u32 first = (lo & ~15u) + 16 * threadIdx.x;
            WsnapWaiting cur;
            if (have_next) cur = next;
            else wsnap_waiting_load(kind, ptr, first, lo, hi, want, &cur);
            have_next = r + 1 < here;
            if (have_next) {
                const u32 lo2 = bases[r + 1], hi2 = max(bases[r + 2], lo2);
                wsnap_waiting_load(kind, ptr, (lo2 & ~15u) + 16 * threadIdx.x, lo2, hi2, want, &next);
            }
            left += wsnap_waiting_copy(d, first, lo, cur);
            for (u32 a = first + step; a < hi; a += step) {
                WsnapWaiting more;
                wsnap_waiting_load(kind, ptr, a, lo, hi, want, &more);
                left += wsnap_waiting_copy(d, a, lo, more);
            }
            __syncthreads();  // the segment's bytes are final for the segments after it
        }
    }
    if (left) atomicAdd(&left_in_block, left);
    __syncthreads();
    if (threadIdx.x == 0 && left_in_block) atomicAdd(&items[i].unresolved, left_in_block);
}
