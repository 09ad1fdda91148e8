// Checks compressed page bodies before nvCOMP sees them. nvCOMP's headers make corrupt input undefined
// behaviour (its Snappy kernel was seen reading gigabytes past its input on a flipped byte), so every
// body is checked here first. One warp per body, VALIDATE_WARPS a block: bodies of a step are checked in
// parallel on every SM; long Snappy bodies in segments, a lane each, before them (see "Long Snappy
// bodies in segments" below).
//   SNAPPY, LZ4_RAW: the whole stream is walked: every literal and match inside the input, every match
//     offset inside what was produced, the output exactly the declared size, the input used up. Snappy
//     is walked by the whole warp, 32 input bytes at a time (validate_snappy_warp; away from the end
//     64 at a time by a shorter interior walk, SNAPPY_INTERIOR): a walk by one
//     thread costs a dependent chain of loads and branches per element, and the longest page of a step
//     (some 40,000 elements) took about 35 ms on the H200, longer than the step's decode. LZ4's
//     run-length bytes make an element's start unknowable from its neighbours' bytes: its first lane walks.
//   ZSTD: the frame magic number, and the frame content size, which the frame header must give, equal
//     to the declared size.
//   GZIP: the member header (1f 8b 08), and ISIZE (the last 4 bytes) equal to the declared size modulo
//     2^32; a body of several members fails this check and goes to the host decompressor.
// Twin: host_kernels/validate.rs (validate_one). status[i]: 0 valid, otherwise a VALIDATE_* code.

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
// A Snappy body or declared size of 2^31 bytes or more: Parquet page sizes are 32-bit signed, so the
// host never sends one; the status keeps the walk's 32-bit arithmetic honest (also gp_unsnap's).
#define VALIDATE_TOO_LARGE 6u

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
// stream order decides the status, as in the serial walk of the reference (host_kernels/validate.rs). The
// window then moves past the chain's last element (at least 32 bytes on).
// The bytes come from a stage in shared memory, refilled SNAPPY_STAGE bytes at a time with 16-byte loads:
// read straight from global memory, each lane's element (a tag and up to 4 more bytes, read in branches
// that diverge by element kind) cost several dependent load latencies a window, about 1.3 us a window on
// the H200 (35 ms for a 1 MB page); here a window reads 5 bytes per lane from shared memory, branch-free.
#define SNAPPY_STAGE 2048u
// A stage's 16-byte words: SNAPPY_STAGE bytes and SNAPPY_STAGE_PAD zero bytes after the last one held,
// so that a lane reads its element's 5 bytes (as a byte and two aligned words) without a bound check.
#define SNAPPY_STAGE_PAD 48u
#define SNAPPY_STAGE_WORDS ((SNAPPY_STAGE + SNAPPY_STAGE_PAD) / 16)
// Bodies (warps) per block of gp_validate_compressed: Hopper runs at most 32 blocks on an SM, so a
// warp per block left half of its 64 warp slots empty. Measured on the H200 (ncu, the snappy benchmark
// file in one step, 56 registers a thread): 1 / 2 / 4 warps a block, 30 / 43 / 45 % of the SM's warps
// active, 12.38 / 12.14 / 12.01 ms; so occupancy was not what bounds the walk, and the gain is small.
// The host launches blocks of 32 * VALIDATE_WARPS threads (layout::VALIDATE_WARPS).
#define VALIDATE_WARPS 4u
// The window's element headers reach at most 32 + 4 bytes from its start.
#define SNAPPY_WINDOW_BYTES 36u

// Fills the stage with body bytes [b, b + have), have = min(SNAPPY_STAGE, n - b), b at most p and
// within 15 bytes of it so that s + b is 16-byte aligned where that stays inside the body (b = p
// otherwise: byte loads), then zeroes the 40 bytes after them (read past the body's end, they read as
// the serial walk's nothing). Every lane's loads are issued before any is stored, so a refill waits for
// one memory latency. Called by the whole warp.
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
    for (u32 j = lane; j < 40; j += 32) st[*have + j] = 0;
    __syncwarp();  // the new stage is visible to every lane
}

// One lane's view of a Snappy window: the element that would start at q = p + lane. `err` is
// TRUNCATED where the element runs past the input; `adv` is its size in the input, header and literal
// bytes. 32-bit: bodies are under 2^31 bytes (callers refuse larger ones), so a length that passes the
// input check fits, and one that does not is saturated and never used.
struct SnappyLane {
    u32 len, offset, adv;
    u32 head, err;
    bool copy, inside;
};

// The element whose tag is `tag` and whose next 4 bytes are `le4` (little-endian, 0 past the input),
// with `rem` input bytes left from its start; `inside`: whether an element may start there (rem > 0).
__device__ inline SnappyLane snappy_element(u32 tag, u32 le4, u32 rem, bool inside) {
    SnappyLane e;
    e.inside = inside;
    const u32 kind = tag & 3, high = tag >> 2;
    const u32 literal_len_bytes = (kind == 0 && high >= 60) ? high - 59 : 0;
    e.head = kind == 0 ? 1 + literal_len_bytes : (kind == 1 ? 2 : (kind == 2 ? 3 : 5));
    e.copy = kind != 0;
    // A literal's length less one (up to 2^32 - 1 with 4 length bytes).
    const u32 lit_m1 = literal_len_bytes ? le4 & (0xffffffffu >> (32 - 8 * literal_len_bytes)) : high;
    if (kind == 0) {
        e.len = lit_m1 + (lit_m1 != 0xffffffffu);
        e.offset = 0;
    } else if (kind == 1) {
        e.len = (high & 7) + 4;
        e.offset = ((tag >> 5) << 8) | (le4 & 0xff);
    } else {
        e.len = high + 1;
        e.offset = kind == 2 ? (le4 & 0xffff) : le4;
    }
    const bool truncated = e.head > rem || (!e.copy && lit_m1 >= rem - e.head);
    e.err = inside && truncated ? VALIDATE_TRUNCATED : VALIDATE_OK;
    e.adv = e.copy ? e.head : e.head + e.len;
    return e;
}

// This lane's element of the window that starts `at` bytes into the stage, `left` input bytes before
// the body's end (the stage covers the window's 36 bytes or the body's end, and is zero after it).
// Only the first `starts` bytes (at most `left`) may start one (`inside`); its bytes are checked
// against the body's end.
__device__ inline SnappyLane snappy_lane_element(const u8* st, u32 at, u32 left, u32 starts) {
    const u32 lane = threadIdx.x & 31;
    const u32 r = at + lane;
    const u32* words = (const u32*)st;
    const u32 w = (r + 1) >> 2;
    const u32 le4 = __funnelshift_r(words[w], words[w + 1], 8 * ((r + 1) & 3));
    const bool inside = lane < starts;
    return snappy_element(st[r], le4, inside ? left - lane : 0u, inside);
}

// The same where any byte before the body's end may start an element.
__device__ inline SnappyLane snappy_lane_element(const u8* st, u32 at, u32 left) {
    return snappy_lane_element(st, at, left, left);
}

// Each lane's chain: the lanes of this lane's element and the ones after it in the window, given each
// lane's next element's lane `jump` (itself where the chain ends there: a lane that points at itself
// adds nothing to a chain, so the rounds need no test). Doubling: `chain` is this lane's element and
// the ones after it, `jump` the lane 2^k on; an element takes at least 2 bytes, so 4 rounds reach the
// 16 a window of 32 bytes holds at most. Called by the whole warp.
__device__ inline u32 snappy_chains(u32 jump) {
    u32 chain = 1u << (threadIdx.x & 31);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        chain |= __shfl_sync(gpcore::FULL_MASK, chain, jump);
        jump = __shfl_sync(gpcore::FULL_MASK, jump, jump);
    }
    return chain;
}

// The lanes of the chain from lane 0 (snappy_chains). Called by the whole warp.
__device__ inline u32 snappy_chain_from_lane0(u32 jump) {
    return __shfl_sync(gpcore::FULL_MASK, snappy_chains(jump), 0);
}

// The lanes whose elements really start in the window: the chain from lane 0, by doubling. Called by
// the whole warp.
__device__ inline u32 snappy_window_members(const SnappyLane& e) {
    const u32 lane = threadIdx.x & 31;
    // The chain ends at an element whose next one is outside the window, past the input's end, or
    // that fails.
    const u32 jump0 = (e.inside && e.err == VALIDATE_OK && e.adv < 32 - lane) ? lane + e.adv : lane;
    // A chain that reaches the input's end marks a lane past it: no element there.
    return snappy_chain_from_lane0(jump0) & __ballot_sync(gpcore::FULL_MASK, e.inside);
}

// Inclusive prefix sum over the warp.
template <typename T>
__device__ inline T warp_inclusive_sum(T v) {
    const u32 lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(gpcore::FULL_MASK, v, o);
        if (lane >= (u32)o) v += y;
    }
    return v;
}

// Whether a window needs the exact check (snappy_first_failure) rather than the fast path, taken by
// almost every window: no member fails, every match offset is within the output before the window (so
// within the output before it), and the window's output fits the declared size. *produced: the
// members' output, exact on the fast path: its members are inside a body under 2^31 bytes (literals)
// or at most 64 bytes long (matches), so the 32-bit sum does not wrap. `out` is at most `want`, under
// 2^31.
__device__ inline bool snappy_window_doubtful(const SnappyLane& e, bool member, u64 out, u64 want, u64* produced) {
    const u32 sum = gpcore::warp_add(member ? e.len : 0u);
    *produced = sum;
    // offset - 1 >= out: a zero offset, or one past the output so far.
    const bool doubt = member && (e.err != VALIDATE_OK || (e.copy && e.offset - 1u >= (u32)out));
    return __ballot_sync(gpcore::FULL_MASK, doubt) != 0 || sum > want - out;
}

// The first failing member's status (the serial walk's), or VALIDATE_OK. `before` is the output
// before this lane's element.
__device__ inline u32 snappy_first_failure(const SnappyLane& e, bool member, u64 before, u64 want) {
    u32 mine = e.err;
    if (mine == VALIDATE_OK && e.copy && (e.offset == 0 || e.offset > before)) mine = VALIDATE_BAD_OFFSET;
    if (mine == VALIDATE_OK && e.len > want - before) mine = VALIDATE_WRONG_SIZE;
    const u32 failing = __ballot_sync(gpcore::FULL_MASK, member && mine != VALIDATE_OK);
    return failing == 0 ? VALIDATE_OK : __shfl_sync(gpcore::FULL_MASK, mine, __ffs(failing) - 1);
}

// The preamble: the declared size, which must be `want`. Sets *p past it. Called by the whole warp.
__device__ inline u32 snappy_preamble(const u8* s, u64 n, u64 want, u64* p) {
    u64 at = 0, total = 0;
    u32 status = VALIDATE_OK;
    if ((threadIdx.x & 31) == 0) {
        if (!read_uleb128(s, &at, n, &total)) status = VALIDATE_TRUNCATED;
        else if (total != want) status = VALIDATE_WRONG_SIZE;
    }
    *p = __shfl_sync(gpcore::FULL_MASK, at, 0);
    return __shfl_sync(gpcore::FULL_MASK, status, 0);
}

// The interior walk: windows that start at least SNAPPY_INTERIOR bytes before the body's end. There
// every lane's element header lies inside the body, and an element running past the body's end is a
// literal longer than the window, so it ends the window's chain: of a window's members only the last
// can run past the end, and it then moves the walk past the end (where the walk reports it). So the
// interior lane needs no bound checks, and reads what its tag says of its element from a table
// (SnappyTag, a lookup instead of branches by kind): its length, match offset and size in the input
// from the 4 bytes after the tag, each under a mask. An interior window spans SNAPPY_INTERIOR_SPAN = 64
// bytes, two positions a lane: the walk is a chain of dependent latencies a window (shared-memory
// loads, the doubling's shuffles, the sums), and the second half's loads and shuffles run beside the
// first's, so a window of 64 bytes costs little more time than one of 32. ncu, `read` of 12 row
// groups of the snappy benchmark file: 640 million warp instructions for the general walk alone (some
// 107 a window, a fifth of the read's), 377 million with an interior walk of 32-byte windows.
#define SNAPPY_INTERIOR 128u
#define SNAPPY_INTERIOR_SPAN 64u
// The stage an interior window reads: its 64 positions and the 4 bytes after the last.
#define SNAPPY_INTERIOR_WINDOW_BYTES (SNAPPY_INTERIOR_SPAN + 4u)

// What a Snappy tag says of its element, for the bytes after it (`le4`, little-endian):
//   length      = base + min(le4 & len_mask, 2^31 - 1)  (a literal's length bytes; 0 for the others)
//   offset      = offset_base + (le4 & offset_mask)      (a literal: 1, so it never looks doubtful
//                                                         once there is output)
//   input bytes = head + (length & body_mask)            (a literal's bytes follow its header)
// packed: base | head << 8 | offset_base << 16. A literal's length is capped below 2^31 (no body is that
// long, so the cap only keeps a length that runs past the body from wrapping).
struct SnappyTag {
    u32 len_mask, offset_mask, body_mask, packed;
};
// (4-byte aligned, so the compiler may read an entry as four 4-byte loads; a 16-byte alignment that
// would allow one load was not measured.)
static_assert(sizeof(SnappyTag) == 16, "SnappyTag must stay four words");

__device__ inline SnappyTag snappy_tag(u32 tag) {
    const u32 kind = tag & 3, high = tag >> 2;
    SnappyTag t;
    if (kind == 0) {
        const u32 extra = high >= 60 ? high - 59 : 0;
        t.len_mask = extra ? 0xffffffffu >> (32 - 8 * extra) : 0;
        t.offset_mask = 0;
        t.body_mask = 0xffffffffu;
        t.packed = (extra ? 1u : high + 1) | ((1 + extra) << 8) | (1u << 16);
    } else if (kind == 1) {
        t.len_mask = 0;
        t.offset_mask = 0xffu;
        t.body_mask = 0;
        t.packed = ((high & 7) + 4) | (2u << 8) | ((tag >> 5) << 24);
    } else {
        t.len_mask = 0;
        t.offset_mask = kind == 2 ? 0xffffu : 0xffffffffu;
        t.body_mask = 0;
        t.packed = (high + 1) | ((kind == 2 ? 3u : 5u) << 8);
    }
    return t;
}

// Fills a block's tag table. Called by every thread of the block before any returns.
__device__ inline void snappy_tags_fill(SnappyTag* tags) {
    for (u32 t = threadIdx.x; t < 256; t += blockDim.x) tags[t] = snappy_tag(t);
    __syncthreads();
}

// The element that would start `r` bytes into the stage, from the tag table: its length, match offset
// (1 for a literal) and size in the input.
__device__ inline void snappy_interior_element(const u8* st, u32 r, const SnappyTag* tags, u32* len, u32* offset, u32* adv) {
    const u32* words = (const u32*)st;
    const u32 w0 = words[r >> 2], w1 = words[(r >> 2) + 1];
    const u32 sh = 8 * (r & 3);
    const u32 tag = (w0 >> sh) & 0xff;
    const u32 le4 = __funnelshift_rc(w0, w1, sh + 8);  // bytes r + 1 .. r + 4 (sh + 8 may be 32: w1)
    const SnappyTag t = tags[tag];
    *len = (t.packed & 0xff) + min(le4 & t.len_mask, 0x7fffffffu);
    *offset = (t.packed >> 16) + (le4 & t.offset_mask);
    *adv = ((t.packed >> 8) & 0xff) + (*len & t.body_mask);
}

// What an interior window found: where the walk goes on (bytes after the window's start), its
// members' output, and whether a member's match may reach before the output so far (offset - 1 >= out:
// a zero offset, or one past the output before the window; exact checks then decide).
struct SnappyInteriorStep {
    u32 end, sum;
    bool doubt;
};

// One interior window, [at, at + SNAPPY_INTERIOR_SPAN) of the stage, `out` bytes of output before it.
// Each lane takes the elements that would start at at + lane (the low half) and at + 32 + lane (the
// high half); each half's chains are doubled within the half. The members are the low half's chain
// from lane 0 (its last element ends 32 bytes or more on, since a chain goes on while the next element
// starts in the half), then, where that last element ends inside the high half, the high half's chain
// from there. Called by the whole warp; the stage holds [at, at + SNAPPY_INTERIOR_WINDOW_BYTES).
__device__ inline SnappyInteriorStep snappy_interior_window(const u8* st, u32 at, const SnappyTag* tags, u32 out) {
    const u32 lane = threadIdx.x & 31;
    u32 len_lo, offset_lo, adv_lo, len_hi, offset_hi, adv_hi;
    snappy_interior_element(st, at + lane, tags, &len_lo, &offset_lo, &adv_lo);
    snappy_interior_element(st, at + 32 + lane, tags, &len_hi, &offset_hi, &adv_hi);
    // As snappy_window_members, every lane inside the body and none failing here.
    const u32 chain_lo = snappy_chains(adv_lo < 32 - lane ? lane + adv_lo : lane);
    const u32 chain_hi = snappy_chains(adv_hi < 32 - lane ? lane + adv_hi : lane);
    const u32 members_lo = __shfl_sync(gpcore::FULL_MASK, chain_lo, 0);
    const u32 last_lo = 31 - __clz(members_lo);
    const u32 end_lo = last_lo + __shfl_sync(gpcore::FULL_MASK, adv_lo, last_lo);
    const bool into_hi = end_lo < SNAPPY_INTERIOR_SPAN;
    const u32 from_hi = __shfl_sync(gpcore::FULL_MASK, chain_hi, (end_lo - 32) & 31);
    const u32 members_hi = into_hi ? from_hi : 0u;
    const u32 last_hi = (31 - __clz(members_hi)) & 31;  // unused without high members
    const u32 end_hi = 32 + last_hi + __shfl_sync(gpcore::FULL_MASK, adv_hi, last_hi);
    const bool member_lo = (members_lo >> lane) & 1u, member_hi = (members_hi >> lane) & 1u;
    SnappyInteriorStep step;
    // Members other than the last are under 32 input bytes (at most 64 output bytes each), and the
    // last under 2^31 + 5: neither a lane's two nor the warp's sum wraps.
    step.sum = gpcore::warp_add((member_lo ? len_lo : 0u) + (member_hi ? len_hi : 0u));
    const bool doubt = (member_lo && offset_lo - 1u >= out) || (member_hi && offset_hi - 1u >= out);
    step.doubt = __ballot_sync(gpcore::FULL_MASK, doubt) != 0;
    step.end = into_hi ? end_hi : end_lo;
    return step;
}

// Refills the stage where it does not hold [p, min(p + bytes, n)). p only grows, and a fill starts at
// most at p, so p >= b; a fill holds SNAPPY_STAGE bytes from within 15 of p, more than any window needs.
__device__ inline void snappy_stage_cover(const u8* s, u32 n, u32 p, u32 bytes, u8* st, u32* b, u32* have) {
    if (min(p + bytes, n) > *b + *have) {
        u64 b64 = *b;
        snappy_stage_fill(s, n, p, st, &b64, have);
        *b = (u32)b64;
    }
}

__device__ u32 validate_snappy_warp(const u8* s, u64 n64, u64 want64, const SnappyTag* tags) {
    // A stage per warp of the block: each walks its own body.
    __shared__ uint4 stage_words[VALIDATE_WARPS][SNAPPY_STAGE_WORDS];
    u8* st = (u8*)stage_words[(threadIdx.x >> 5) % VALIDATE_WARPS];  // the caller keeps warps in range
    const u32 lane = threadIdx.x & 31;
    if (n64 >= (1ull << 31) || want64 >= (1ull << 31)) return VALIDATE_TOO_LARGE;
    // Below 2^31: positions, lengths and their sums of two fit 32 bits.
    const u32 n = (u32)n64, want = (u32)want64;
    u64 p64 = 0;
    const u32 status = snappy_preamble(s, n, want, &p64);
    if (status != VALIDATE_OK) return status;
    u32 p = (u32)p64;
    u32 b = 0;     // the stage holds body bytes [b, b + have)
    u32 have = 0;
    u32 out = 0;
    while (p < n) {
        // Interior windows, until one is doubtful (a failure, or a match near the output's start) or
        // the end is near. A last member that runs past the end moves p past it and ends the loop;
        // p stays under 2^32: p + SNAPPY_INTERIOR <= n < 2^31, and a member's length that passes the
        // size check is under 2^31.
        while (p + SNAPPY_INTERIOR <= n) {
            snappy_stage_cover(s, n, p, SNAPPY_INTERIOR_WINDOW_BYTES, st, &b, &have);
            const SnappyInteriorStep w = snappy_interior_window(st, p - b, tags, out);
            if (w.doubt || w.sum > want - out) break;
            out += w.sum;
            p += w.end;
        }
        if (p >= n) break;
        // One window of the general walk: the doubtful one, or one near the end.
        snappy_stage_cover(s, n, p, SNAPPY_WINDOW_BYTES, st, &b, &have);
        const SnappyLane e = snappy_lane_element(st, p - b, n - p);
        const u32 members = snappy_window_members(e);
        const bool member = (members >> lane) & 1u;
        const u32 last = 31 - __clz(members);
        const u64 mlen = member ? e.len : 0;
        u64 produced;
        const bool doubtful = snappy_window_doubtful(e, member, out, want, &produced);
        const u32 last_adv = __shfl_sync(gpcore::FULL_MASK, e.adv, last);
        if (!doubtful) {
            out += (u32)produced;
            p += last + last_adv;
            continue;
        }
        // Exact path (a failing window, or a match near the start of the output): the output before
        // each element from a prefix sum, and the first failing element's status.
        const u64 sum = warp_inclusive_sum(mlen);
        const u32 failed = snappy_first_failure(e, member, out + sum - mlen, want);
        if (failed != VALIDATE_OK) return failed;
        out += (u32)__shfl_sync(gpcore::FULL_MASK, sum, last);
        p += last + last_adv;
    }
    // Past the end: an interior window's last member was a literal running past it (the members
    // before it passed), which the serial walk reports as truncated.
    if (p > n) return VALIDATE_TRUNCATED;
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

// Long Snappy bodies in segments, a lane each. A warp walks a body 64 bytes a window, a chain of
// dependent shared-memory loads and shuffles (some 85 instructions a window): a launch lasts as long as
// its longest walk (ncu: 7-8 % of the SM's warps active through the pre-check of a lineitem step, whose
// 550 kB dictionary pages took some 2-5 ms), and cutting bodies into segments a warp each did not
// shorten it (runs AW, AX: the windows' work bounds it, and the steps decoded at once share it). A lane
// walking a segment element by element issues a few instructions an element for 32 segments at once.
// So the host cuts long bodies (layout::validate_segments) into segments of seg_bytes, a lane each, in
// the same launch, and gives their items VALIDATE_SEGMENTED, which their own warps skip.
// Segment j (of count) counts the elements that start in [from_j, to_j): from_j = j * seg_bytes +
// overlap (from_0: the preamble's end), to_j = from_{j+1} (the last: the body's end). Its lane walks from
// j * seg_bytes as if an element began there: a guess, but chains that meet go on together, and a chain
// soon meets the true one. It keeps the first element it reaches at or after from_j (q_first) and at or
// after to_j (q_next), the counted elements' output (sum), and the largest "match offset less the
// segment's output before the match" (dmax). The last lane of the body to finish joins them in order:
// segment j is the true chain's where its q_first is the true element at from_j, which is segment
// j - 1's q_next (a chain is a function of its start); one that missed is walked again from that element
// (a repair). The body passes when no counted element fails, every dmax is at most the output before its
// segment, the outputs add to the declared size and the chain ends at the body's end. Any doubt walks
// the whole body, one element after another (validate_snappy_serial): a status other than OK is always
// the serial walk's, exactly. Run AY (an H100): one launch over a lineitem SF10 step's 7,280 bodies took
// 2.29 ms, against 3.69 with every body walked by a warp; decode alone 67.7 ms against 68.9 (means of 4).
#define VALIDATE_SEGMENTED 0xfffffffeu
// No element found (yet): a position no body reaches (bodies are under 2^31 bytes).
#define SEG_NONE 0xffffffffu
// SegmentOut.flags: a counted element fails (it runs past the body, or a match's offset is 0).
#define SEG_BAD 1u
// joins[first] after the join (for tests): joined, the whole body walked, and the repairs.
#define SEG_JOINED (1u << 31)
#define SEG_WALKED_WHOLE (1u << 30)

struct ValidateSegment {
    u32 item, index, count, first;  // the body's item, this segment's index, its segments, its first
};
static_assert(sizeof(ValidateSegment) == 16, "ValidateSegment must match layout.rs");

struct SegmentOut {
    u64 sum;
    i64 dmax;
    u32 q_first, q_next, flags, pad;
};
static_assert(sizeof(SegmentOut) == 32, "SegmentOut must match layout.rs");

// The element that would start at p (< n): its tag and the 4 bytes after it (0 past the body's end).
// Away from the body's ends, two aligned 4-byte loads: they lie inside [s + 1, s + n), so inside the
// body's allocation whatever its alignment.
__device__ inline SnappyLane snappy_serial_element(const u8* s, u32 n, u32 p) {
    u32 tag, le4;
    if (p >= 4 && n - p >= 8) {
        const u32 a = (u32)((u64)(s + p) & 3);
        const u32* w = (const u32*)(s + p - a);
        const u32 w0 = w[0], w1 = w[1];
        tag = (w0 >> (8 * a)) & 0xff;
        le4 = __funnelshift_rc(w0, w1, 8 * a + 8);  // bytes p + 1 .. p + 4 (a shift of 32: w1)
    } else {
        tag = s[p];
        le4 = 0;
        for (u32 k = 1; k <= 4 && k < n - p; k++) le4 |= (u32)s[p + k] << (8 * (k - 1));
    }
    return snappy_element(tag, le4, n - p, true);
}

// The whole body walked by this thread alone, as the reference walks it (host_kernels/validate.rs):
// the status of the first failing element in stream order. Only where segments leave a doubt, so only
// on bodies that are corrupt or whose chains never met.
__device__ u32 validate_snappy_serial(const u8* s, u64 n64, u64 want64) {
    if (n64 >= (1ull << 31) || want64 >= (1ull << 31)) return VALIDATE_TOO_LARGE;
    const u32 n = (u32)n64, want = (u32)want64;
    u64 at = 0, total = 0;
    if (!read_uleb128(s, &at, n, &total)) return VALIDATE_TRUNCATED;
    if (total != want) return VALIDATE_WRONG_SIZE;
    u32 p = (u32)at, out = 0;
    while (p < n) {
        const SnappyLane e = snappy_serial_element(s, n, p);
        if (e.err != VALIDATE_OK) return e.err;
        if (e.copy && (e.offset == 0 || e.offset > out)) return VALIDATE_BAD_OFFSET;
        if (e.len > want - out) return VALIDATE_WRONG_SIZE;
        out += e.len;
        p += e.adv;  // not truncated: e.adv <= n - p
    }
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

// Walks a segment from `start` (a guess, or in the join the true element), counting [from, to), until
// it reaches an element at or after `to`, the chain fails, or the body ends. `n` under 2^31. One thread.
__device__ SegmentOut snappy_segment_walk(const u8* s, u32 n, u32 start, u32 from, u32 to) {
    SegmentOut o{0, 0, SEG_NONE, SEG_NONE, 0, 0};
    u32 p = start;
    bool ended = true;  // the chain went on to the body's end (not stopped by a failure or by `to`)
    while (p < n) {
        const bool counted = p >= from;
        if (counted && o.q_first == SEG_NONE) o.q_first = p;
        if (p >= to) {
            o.q_next = p;
            ended = false;
            break;
        }
        const SnappyLane e = snappy_serial_element(s, n, p);
        const bool bad = e.err != VALIDATE_OK || (e.copy && e.offset == 0);
        if (bad && !counted) {
            // In the guess's warm-up no element of the true chain fails: a guess from the next byte.
            p++;
            continue;
        }
        if (bad) {
            // Counted: the body fails where this is the true chain (else the join walks it again).
            o.flags |= SEG_BAD;
            ended = false;
            break;
        }
        if (counted) {
            if (e.copy) o.dmax = max(o.dmax, (i64)e.offset - (i64)o.sum);
            o.sum += e.len;
        }
        p += e.adv;  // not truncated: e.adv <= n - p
    }
    if (ended) {
        // The chain ends at the body's end: the end is its next element.
        if (o.q_first == SEG_NONE && p >= from) o.q_first = p;
        if (p >= to) o.q_next = p;
    }
    return o;
}

// Segment j's range: [from_j, to_j) as above, p0 the preamble's end.
__device__ inline void snappy_segment_range(u32 j, u32 count, u32 n, u32 p0, u32 seg_bytes, u32 overlap, u32* from, u32* to) {
    *from = j == 0 ? p0 : j * seg_bytes + overlap;
    *to = j + 1 == count ? n : (j + 1) * seg_bytes + overlap;
}

// Joins a body's segments (`outs`, written by their lanes), repairing those whose chain missed: whether
// the body passes (false: only the serial walk can say). One thread.
__device__ bool snappy_segments_join(const u8* s, u32 n, u32 want, const volatile SegmentOut* outs, u32 count, u32 seg_bytes,
                                     u32 overlap, u32* repairs) {
    u64 p0 = 0, total = 0;
    if (!read_uleb128(s, &p0, n, &total) || total != want) return false;
    u32 expected = (u32)p0;
    u64 base = 0;
    for (u32 j = 0; j < count; j++) {
        u32 from, to;
        snappy_segment_range(j, count, n, (u32)p0, seg_bytes, overlap, &from, &to);
        SegmentOut o;
        o.sum = outs[j].sum;
        o.dmax = outs[j].dmax;
        o.q_first = outs[j].q_first;
        o.q_next = outs[j].q_next;
        o.flags = outs[j].flags;
        if (o.q_first != expected) {
            // Walked again from the true element (expected >= from: it is the first at or after
            // to_{j-1} = from_j).
            o = snappy_segment_walk(s, n, expected, from, to);
            *repairs += 1;
        }
        if ((o.flags & SEG_BAD) || o.q_first != expected || o.q_next == SEG_NONE || o.dmax > (i64)base) return false;
        base += o.sum;
        if (base > want) return false;
        expected = o.q_next;
    }
    return expected == n && base == want;
}

// Segment g's lane: walks its segment, and the body's last lane to finish joins them and sets the
// item's status. A plan the kernel does not expect (another codec, a body of 2^31 bytes or more) fails
// the body or walks it whole.
__device__ void validate_snappy_segment(ValidateItem* items, u32 n_items, const ValidateSegment sg, u32 g, SegmentOut* outs,
                                        u32* joins, u32 seg_bytes, u32 overlap) {
    if (sg.item >= n_items || sg.count == 0 || sg.index >= sg.count) return;  // the item keeps its status
    const ValidateItem it = items[sg.item];
    const u8* s = (const u8*)it.src;
    const bool walkable = it.codec == CODEC_SNAPPY && it.src_len < (1ull << 31) && it.dst_len < (1ull << 31);
    SegmentOut o{0, 0, SEG_NONE, SEG_NONE, SEG_BAD, 0};
    if (walkable) {
        const u32 n = (u32)it.src_len;
        u64 p0 = 0, total = 0;
        const bool pre = read_uleb128(s, &p0, n, &total) && total == it.dst_len;
        u32 from, to;
        snappy_segment_range(sg.index, sg.count, n, (u32)p0, seg_bytes, overlap, &from, &to);
        // A plan that does not fit the body (the host's never does) leaves its segments empty and
        // the join walks the body whole.
        if (from <= to && to <= n) {
            const u32 start = sg.index == 0 ? (u32)p0 : sg.index * seg_bytes;
            o = snappy_segment_walk(s, n, start, from, to);
        }
        if (!pre) o.flags |= SEG_BAD;
    }
    outs[g] = o;
    __threadfence();  // this segment's result before its count
    if (atomicAdd(&joins[sg.first], 1u) + 1 != sg.count) return;
    __threadfence();  // the other segments' results, counted before, are seen
    u32 repairs = 0;
    bool whole = true;
    u32 status = VALIDATE_BAD_HEADER;
    if (walkable) {
        whole = !snappy_segments_join(s, (u32)it.src_len, (u32)it.dst_len, outs + sg.first, sg.count, seg_bytes, overlap,
                                      &repairs);
        status = whole ? validate_snappy_serial(s, it.src_len, it.dst_len) : VALIDATE_OK;
    }
    items[sg.item].status = status;
    joins[sg.first] = SEG_JOINED | (whole ? SEG_WALKED_WHOLE : 0u) | repairs;
}

// First the segments, a lane each (the first ceil(nsegs / 32) warps: the long bodies start first), then
// a warp per body: warp blockIdx.x * warps + warp, for the block's warps (at most VALIDATE_WARPS, which
// have a stage each). Warps never wait for each other (no block barrier), so a warp without work just
// returns; a body nothing reaches keeps the status the host gave it (not OK). joins: nsegs words, zero.
extern "C" __global__ void gp_validate_compressed(ValidateItem* items, u32 n, const ValidateSegment* segs, u32 nsegs,
                                                  SegmentOut* outs, u32* joins, u32 seg_bytes, u32 overlap) {
    const u32 warps = min(blockDim.x >> 5, VALIDATE_WARPS);
    const u32 warp = threadIdx.x >> 5;
    const u32 lane = threadIdx.x & 31;
    const u64 gw = (u64)blockIdx.x * warps + warp;
    __shared__ SnappyTag tags[256];
    snappy_tags_fill(tags);
    if (warp >= warps) return;
    const u64 seg_warps = ((u64)nsegs + 31) / 32;
    if (gw < seg_warps) {
        const u64 g = gw * 32 + lane;
        if (g < nsegs) validate_snappy_segment(items, n, segs[g], (u32)g, outs, joins, seg_bytes, overlap);
        return;
    }
    const u64 i = gw - seg_warps;
    if (i >= n) return;
    const ValidateItem it = items[i];
    if (it.status == VALIDATE_SEGMENTED) return;  // its segments' lanes check it
    const u8* s = (const u8*)it.src;
    if (it.codec == CODEC_SNAPPY) {
        // The whole warp (the codec is the warp's, so every lane is here).
        const u32 st = validate_snappy_warp(s, it.src_len, it.dst_len, tags);
        if (lane == 0) items[i].status = st;
        return;
    }
    if (lane != 0) return;
    u32 st;
    switch (it.codec) {
    case CODEC_LZ4_RAW: st = validate_lz4_block(s, it.src_len, it.dst_len); break;
    case CODEC_ZSTD: st = validate_zstd(s, it.src_len, it.dst_len); break;
    case CODEC_GZIP: st = validate_gzip(s, it.src_len, it.dst_len); break;
    default: st = VALIDATE_BAD_HEADER; break;
    }
    items[i].status = st;
}
