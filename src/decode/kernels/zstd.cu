// Zstandard decompression of page bodies (RFC 8878), safe on any input: the Zstd decoder where nvCOMP
// is absent (or chosen: GPU_PARQUET_ZSTD). nvCOMP's stays the default: on TPC-H lineitem SF10 zstd
// (47,600 pages of about 80 kB, a block or two each) this kernel's decode alone took 185.3 ms against
// nvCOMP's 99.0 (run AQ, H100). ncu (run AP) puts it at 6.7 threads active a warp (the sequences are
// decoded by one lane, the Huffman streams by four) and at the warps an SM holds by shared memory.
// Decoding the sequences a lane a body instead, after a kernel that decodes the literals and builds the
// tables into global memory (branch zstd-planned), was slower still (runs AR-AS: 223 ms at best, nvCOMP
// 105.8 in the same run): each body's batches stay one after another, and its table lookups went to L2.
//
// One warp per body (grid n, block UNZSTD_THREADS), its state in shared memory. A body is one or more
// frames (skippable frames skipped); each frame's blocks are decoded in order:
//   - raw and RLE blocks are copied or filled by the warp;
//   - a compressed block's literals are decoded first, into the tail of the body's output buffer (the
//     bytes its later blocks will overwrite): Huffman streams a lane each, RLE literals filled by the
//     warp; raw literals are read where they are, in the input. Writing the block's output from the
//     front never reaches a literal not yet read: every sequence is checked to leave room for the
//     literals after it (its end plus the literals left at most the declared size);
//   - its sequences are decoded by lane 0 (three FSE states over one backward bitstream, as libzstd's
//     ZSTD_decodeSequence), 32 at a time into shared memory, and each batch is then written by the
//     whole warp: when its output fits the stage (ZSTD_STAGE bytes), a lane per output byte (its
//     sequence found by a vote over the batch's starts, not a walk; with the reloads by words, run BE:
//     gp_unzstd alone 617.0 ms over lineitem SF10 zstd against 654.7) puts each
//     literal and each match byte whose source lies before the batch into the stage, then the
//     matches whose source lies in the batch take their bytes in order, each match by the whole warp
//     (a match byte k copies byte start - offset + k mod offset: always before the match, so the bytes
//     of one match never wait for each other); a larger batch is written a sequence at a time.
// Every length, offset and table is checked before it is used: reads stay in [src, src + src_len),
// writes in [dst, dst + dst_len), table indices in their tables, whatever the bytes.
//
// status: 0 when the body decodes to exactly dst_len bytes, and then the output equals libzstd's
// (ZSTD_decompressDCtx; its checks are kept or made stricter, never looser); otherwise a VALIDATE_*
// code or ZSTD_UNSUPPORTED (a dictionary, a content checksum: the other decoders take the body) or
// ZSTD_CORRUPT (a table or bitstream libzstd would refuse, or this decoder does). A failed body's output
// is left partly written. Reference: libzstd through the `zstd` crate (host_kernels/unzstd.rs).

#define UNZSTD_THREADS 32u
#define ZSTD_UNSUPPORTED 9u
#define ZSTD_CORRUPT 10u
#define ZSTD_BLOCK_MAX 131072u
// The bytes of a batch of sequences written through the stage.
#define ZSTD_STAGE 1024u
#define ZSTD_HUF_LOG_MAX 11u
#define ZSTD_LL_LOG 9u
#define ZSTD_ML_LOG 9u
#define ZSTD_OF_LOG 8u

// A decoding table's state: its symbol, and how the next state is read (4 bytes, so that a warp's
// tables and stages leave room for more warps an SM).
struct alignas(4) ZFse {
    u16 next;
    u8 sym;
    u8 bits;
};

// What lane 0 works out alone and hands the warp: a status and values.
struct ZHand {
    u32 status;
    u32 v[5];
    u64 w[2];
};

struct ZstdShared {
    // The decoding tables. gp_unzstd_blocks keeps a round's literal and match lengths in their room
    // once every block's literals are decoded and its tables copied to scratch (ZRound): 8 kB less a
    // warp, so more warps an SM.
    union {
        struct {
            u16 huf[1u << ZSTD_HUF_LOG_MAX];  // symbol | bits << 8, indexed by the next huf_log bits
            ZFse ll[1u << ZSTD_LL_LOG], ml[1u << ZSTD_ML_LOG], of[1u << ZSTD_OF_LOG];
        } dec;
        u32 lengths[2 * 1024];
    };
    ZFse wt[64];  // the Huffman weights' table (accuracy log 6 at most)
    u32 code[2][53];  // each literal-length and match-length code's baseline | extra bits << 24
    short norm[64];
    u16 next_state[64];
    u8 weights[256];
    u16 sym_start[256];
    u32 seq_ll[32], seq_ml[32], seq_off[32];
    u8 stage[ZSTD_STAGE];
    u8 lit_stage[ZSTD_STAGE];
    ZHand hand;
};

// Hands lane 0's `mine` to the whole warp (the other lanes' `mine` is not read).
__device__ inline ZHand zstd_hand_over(ZstdShared& sh, const ZHand& mine, u32 lane) {
    if (lane == 0) sh.hand = mine;
    __syncwarp();
    const ZHand got = sh.hand;
    __syncwarp();
    return got;
}

// ---- a backward bitstream (libzstd's BIT_DStream_t): bits read from the end, after the sentinel ----
struct ZBits {
    const u8* s;  // the stream's first byte
    u64 c;        // bytes [ptr, ptr + 8) as a little-endian word (zero above a stream under 8 bytes)
    u32 ptr;
    u32 used;  // bits consumed from the top of c
    u32 len;   // the stream's bytes (reloads read none outside them)
};

#define ZB_UNFINISHED 0u
#define ZB_END_OF_BUFFER 1u
#define ZB_COMPLETED 2u
#define ZB_OVERFLOW 3u

// Bytes [b.ptr, b.ptr + 8) of the stream (inside it) as a little-endian word. A byte load each is a
// long chain of loads on the decoder's path: the two aligned words around them are read instead where
// both lie inside the stream (one word where the first byte is aligned), else the bytes one by one.
__device__ inline u64 zb_load8(const ZBits& b) {
    const u8* at = b.s + b.ptr;
    const u32 mis = (u32)((unsigned long long)at & 7);
    if (mis <= b.ptr && b.ptr - mis + (mis ? 16 : 8) <= b.len) {
        const u64* w = (const u64*)(at - mis);
        const u64 lo = w[0], up = w[mis != 0];
        // Shifted left in two steps, so that an aligned word (mis 0) takes nothing from up.
        return (lo >> (8 * mis)) | ((up << (63 - 8 * mis)) << 1);
    }
    u64 v = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) v |= (u64)at[i] << (8 * i);
    return v;
}

// False for an empty stream or one whose last byte holds no sentinel.
__device__ inline bool zb_init(ZBits& b, const u8* s, u32 len) {
    b.s = s;
    b.len = len;
    if (len == 0 || s[len - 1] == 0) return false;
    const u32 high = 31 - __clz((int)s[len - 1]);
    if (len >= 8) {
        b.ptr = len - 8;
        b.c = zb_load8(b);
        b.used = 8 - high;
    } else {
        b.ptr = 0;
        b.c = 0;
        for (u32 i = 0; i < len; i++) b.c |= (u64)s[i] << (8 * i);
        b.used = 8 - high + (8 - len) * 8;
    }
    return true;
}

__device__ inline u32 zb_reload(ZBits& b) {
    if (b.used > 64) return ZB_OVERFLOW;
    if (b.ptr >= 8) {
        b.ptr -= b.used >> 3;
        b.used &= 7;
        b.c = zb_load8(b);
        return ZB_UNFINISHED;
    }
    if (b.ptr == 0) return b.used < 64 ? ZB_END_OF_BUFFER : ZB_COMPLETED;
    u32 nb = b.used >> 3;
    u32 r = ZB_UNFINISHED;
    if (nb > b.ptr) {
        nb = b.ptr;
        r = ZB_END_OF_BUFFER;
    }
    b.ptr -= nb;
    b.used -= nb * 8;
    b.c = zb_load8(b);
    return r;
}

// Makes n more bits readable where the stream has them (reads past its start give zeros, and the
// overflow shows in zb_end or zb_reload).
__device__ inline void zb_need(ZBits& b, u32 n) {
    if (b.used + n > 64 && b.ptr > 0) zb_reload(b);
}

__device__ inline u32 zb_peek(const ZBits& b, u32 n) {
    if (n == 0 || b.used >= 64) return 0;
    return (u32)((b.c << b.used) >> (64 - n));
}

__device__ inline u32 zb_read(ZBits& b, u32 n) {
    const u32 v = zb_peek(b, n);
    b.used += n;
    return v;
}

// Every bit read, none past the start.
__device__ inline bool zb_end(ZBits& b) {
    zb_reload(b);
    return b.ptr == 0 && b.used == 64;
}

// ---- FSE tables (libzstd's FSE_readNCount and ZSTD_buildFSETable) ----

// Reads a table description at s[0, len) into sh.norm (max_sym + 1 entries at most): its byte length,
// or 0 when invalid; *log gets the accuracy log, *nsym the symbols described. Lane 0.
__device__ inline u32 zstd_read_ncount(ZstdShared& sh, const u8* s, u32 len, u32 max_sym, u32 max_log,
                                       u32* log, u32* nsym) {
    u32 bitpos = 0;
    // Bits [bitpos, bitpos + n) (n <= 16) of the header, zeros past its end.
    auto bits = [&](u32 n) -> u32 {
        u32 v = 0;
        const u32 first = bitpos >> 3;
        for (u32 i = 0; i < 4; i++) {
            const u32 at = first + i;
            if (at < len) v |= (u32)s[at] << (8 * i);
        }
        return (v >> (bitpos & 7)) & ((1u << n) - 1);
    };
    for (u32 i = 0; i < 64; i++) sh.norm[i] = 0;
    const u32 al = bits(4) + 5;
    bitpos = 4;
    if (al > max_log) return 0;
    i32 remaining = (1 << al) + 1;
    i32 threshold = 1 << al;
    u32 nbits = al + 1;
    u32 sym = 0;
    bool prev0 = false;
    while (remaining > 1 && sym <= max_sym) {
        if (prev0) {
            u32 n0 = sym;
            for (;;) {
                const u32 r = bits(2);
                bitpos += 2;
                n0 += r;
                if (r != 3) break;
                if (n0 > max_sym + 1) return 0;
            }
            if (n0 > max_sym + 1) return 0;
            sym = n0;  // the symbols skipped keep 0
            if (sym > max_sym) break;
        }
        const i32 max = (2 * threshold - 1) - remaining;
        i32 count;
        const u32 low = bits(nbits);
        if ((i32)(low & (threshold - 1)) < max) {
            count = (i32)(low & (threshold - 1));
            bitpos += nbits - 1;
        } else {
            count = (i32)(low & (2 * threshold - 1));
            if (count >= threshold) count -= max;
            bitpos += nbits;
        }
        count--;
        remaining -= count < 0 ? -count : count;
        sh.norm[sym++] = (short)count;
        prev0 = count == 0;
        while (remaining < threshold && threshold > 1) {
            nbits--;
            threshold >>= 1;
        }
    }
    if (remaining != 1 || sym > max_sym + 1) return 0;
    const u32 used = (bitpos + 7) >> 3;
    if (used > len) return 0;
    *log = al;
    *nsym = sym;
    return used;
}

// A length code's baseline value and extra bits (RFC 8878 3.1.1.3.2.1.1), kind 0 literal lengths
// or 1 match lengths, as baseline | extra << 24.
__device__ inline u32 zstd_code(u32 kind, u32 s) {
    u32 base = s, extra = 0;
    if (kind == 0 && s >= 16) {
        // Literal-length codes 16-24, then powers of two.
        const u32 i = s - 16;
        base = s >= 25 ? 1u << (s - 19) : (i < 4 ? 16 + 2 * i : (i < 6 ? 24 + 4 * (i - 4) : (i < 8 ? 32 + 8 * (i - 6) : 48)));
        extra = s >= 25 ? s - 19 : (i < 4 ? 1 : (i < 6 ? 2 : (i < 8 ? 3 : 4)));
    } else if (kind == 1) {
        // Match-length codes 32-42, then powers of two, all plus 3.
        const u32 i = s - 32;
        base = s < 32 ? s + 3
                      : (s >= 43 ? (1u << (s - 36)) + 3
                                 : (i < 4 ? 35 + 2 * i
                                          : (i < 6 ? 43 + 4 * (i - 4)
                                                   : (i < 8 ? 51 + 8 * (i - 6) : (i < 10 ? 67 + 16 * (i - 8) : 99)))));
        extra = s < 32 ? 0 : (s >= 43 ? s - 36 : (i < 4 ? 1 : (i < 6 ? 2 : (i < 8 ? 3 : (i < 10 ? 4 : 5)))));
    }
    return base | (extra << 24);
}

// Builds a decoding table of 2^log states from sh.norm's nsym counts (checked by zstd_read_ncount or
// predefined). Lane 0.
__device__ inline void zstd_build_fse(ZstdShared& sh, ZFse* t, u32 log, u32 nsym) {
    const u32 size = 1u << log;
    u32 high = size - 1;
    for (u32 s = 0; s < nsym; s++) {
        if (sh.norm[s] == -1) {
            t[high--].sym = (u8)s;
            sh.next_state[s] = 1;
        } else {
            sh.next_state[s] = (u16)sh.norm[s];
        }
    }
    const u32 step = (size >> 1) + (size >> 3) + 3, mask = size - 1;
    u32 pos = 0;
    for (u32 s = 0; s < nsym; s++) {
        for (i32 i = 0; i < sh.norm[s]; i++) {
            t[pos].sym = (u8)s;
            do {
                pos = (pos + step) & mask;
            } while (pos > high);
        }
    }
    for (u32 u = 0; u < size; u++) {
        const u32 s = t[u].sym;
        const u32 ns = sh.next_state[s]++;
        const u32 nb = log - (31 - __clz((int)ns));
        t[u].bits = (u8)nb;
        t[u].next = (u16)((ns << nb) - size);
    }
}

// The predefined distributions (RFC 8878 3.1.1.3.2.2).
__device__ inline void zstd_default_norm(ZstdShared& sh, u32 kind, u32* log, u32* nsym) {
    const short ll[36] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2,
                        2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
    const short ml[53] = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
    const short of[29] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};
    const short* src = kind == 0 ? ll : (kind == 1 ? ml : of);
    *nsym = kind == 0 ? 36 : (kind == 1 ? 53 : 29);
    *log = kind == 2 ? 5 : 6;
    for (u32 i = 0; i < 64; i++) sh.norm[i] = i < *nsym ? src[i] : 0;
}

// One of a block's three sequence tables, described at s[0, len) in mode `mode`: the bytes its
// description takes, or ~0u when invalid. *log keeps the table's log (unchanged on Repeat). Lane 0.
__device__ inline u32 zstd_seq_table(ZstdShared& sh, u32 kind, u32 mode, const u8* s, u32 len, bool repeat_ok,
                                     u32* log) {
    ZFse* t = kind == 0 ? sh.dec.ll : (kind == 1 ? sh.dec.ml : sh.dec.of);
    const u32 max_sym = kind == 0 ? 35 : (kind == 1 ? 52 : 31);
    const u32 max_log = kind == 0 ? ZSTD_LL_LOG : (kind == 1 ? ZSTD_ML_LOG : ZSTD_OF_LOG);
    u32 nsym = 0;
    switch (mode) {
        case 0:
            zstd_default_norm(sh, kind, log, &nsym);
            zstd_build_fse(sh, t, *log, nsym);
            return 0;
        case 1: {
            if (len < 1 || s[0] > max_sym) return ~0u;
            for (u32 i = 0; i < 64; i++) sh.norm[i] = 0;
            // One state of 0 bits.
            sh.norm[s[0]] = 1;
            zstd_build_fse(sh, t, 0, s[0] + 1);
            *log = 0;
            return 1;
        }
        case 2: {
            const u32 used = zstd_read_ncount(sh, s, len, max_sym, max_log, log, &nsym);
            if (used == 0) return ~0u;
            zstd_build_fse(sh, t, *log, nsym);
            return used;
        }
        default:
            return repeat_ok ? 0 : ~0u;
    }
}

// ---- Huffman tables (libzstd's HUF_readStats and HUF_readDTableX1) ----

// Reads the tree description at s[0, len) and builds sh.dec.huf: the description's byte length, or 0 when
// invalid. *log gets the table's log. The whole warp.
__device__ inline u32 zstd_read_huffman(ZstdShared& sh, const u8* s, u32 len, u32* log, u32 lane) {
    ZHand h = {};
    if (lane == 0) {
        u32 used = 0, nw = 0;
        do {
            if (len < 1) break;
            const u32 hb = s[0];
            if (hb >= 128) {
                nw = hb - 127;
                const u32 bytes = (nw + 1) / 2;
                if (bytes + 1 > len) break;
                for (u32 n = 0; n < nw; n++) {
                    const u8 v = s[1 + n / 2];
                    sh.weights[n] = (n & 1) ? (v & 15) : (v >> 4);
                }
                used = bytes + 1;
            } else {
                if (hb + 1 > len) break;
                u32 al = 0, nsym = 0;
                const u32 desc = zstd_read_ncount(sh, s + 1, hb, 63, 6, &al, &nsym);
                if (desc == 0) break;
                zstd_build_fse(sh, sh.wt, al, nsym);
                ZBits b;
                if (!zb_init(b, s + 1 + desc, hb - desc)) break;
                // Two states take turns, each read after the other's (libzstd's FSE_decompress): when a
                // read runs past the stream's start, the other state's symbol is the last.
                u32 st[2];
                st[0] = zb_read(b, al);
                zb_reload(b);
                st[1] = zb_read(b, al);
                zb_reload(b);
                bool bad = false;
                nw = 0;
                for (u32 cur = 0;; cur ^= 1) {
                    if (nw > 253) {
                        bad = true;
                        break;
                    }
                    const ZFse e = sh.wt[st[cur]];
                    sh.weights[nw++] = e.sym;
                    st[cur] = e.next + zb_read(b, e.bits);
                    if (zb_reload(b) == ZB_OVERFLOW) {
                        sh.weights[nw++] = sh.wt[st[cur ^ 1]].sym;
                        break;
                    }
                }
                if (bad) break;
                used = hb + 1;
            }
            // The weights' total fixes the table's log and the last symbol's weight.
            u32 total = 0, rank_count[ZSTD_HUF_LOG_MAX + 1] = {};
            bool bad = false;
            for (u32 n = 0; n < nw; n++) {
                const u32 w = sh.weights[n];
                if (w > ZSTD_HUF_LOG_MAX) {
                    bad = true;
                    break;
                }
                if (w > 0) total += (1u << w) >> 1;
                rank_count[w]++;
            }
            if (bad || total == 0) {
                used = 0;
                break;
            }
            const u32 tl = (31 - __clz((int)total)) + 1;
            if (tl > ZSTD_HUF_LOG_MAX) {
                used = 0;
                break;
            }
            const u32 rest = (1u << tl) - total;
            const u32 hr = 31 - __clz((int)rest);
            if ((1u << hr) != rest) {
                used = 0;
                break;
            }
            sh.weights[nw++] = (u8)(hr + 1);
            rank_count[hr + 1]++;
            if (rank_count[1] < 2 || (rank_count[1] & 1)) {
                used = 0;
                break;
            }
            // Each symbol's first entry: symbols of weight w (codes of tl + 1 - w bits) in order of
            // weight, then of symbol.
            u32 rank_start[ZSTD_HUF_LOG_MAX + 1];
            u32 at = 0;
            for (u32 w = 1; w <= tl; w++) {
                rank_start[w] = at;
                at += rank_count[w] * ((1u << w) >> 1);
            }
            for (u32 n = 0; n < nw; n++) {
                const u32 w = sh.weights[n];
                sh.sym_start[n] = (u16)(w ? rank_start[w] : 0);
                if (w) rank_start[w] += (1u << w) >> 1;
            }
            h.v[0] = nw;
            h.v[1] = tl;
        } while (false);
        h.status = used;
    }
    const ZHand got = zstd_hand_over(sh, h, lane);
    const u32 used = got.status;
    if (used == 0) return 0;
    const u32 nw = got.v[0], tl = got.v[1];
    for (u32 n = lane; n < nw; n += 32) {
        const u32 w = sh.weights[n];
        if (w == 0) continue;
        const u32 first = sh.sym_start[n], count = (1u << w) >> 1;
        const u16 e = (u16)(n | ((tl + 1 - w) << 8));
        for (u32 k = 0; k < count; k++) sh.dec.huf[first + k] = e;
    }
    __syncwarp();
    *log = tl;
    return used;
}

// Decodes one Huffman stream s[0, len) into count bytes at out: false when the stream is invalid or
// not used up exactly.
__device__ inline bool zstd_huffman_stream(const ZstdShared& sh, const u8* s, u32 len, u8* out, u32 count,
                                           u32 log) {
    ZBits b;
    if (!zb_init(b, s, len)) return false;
    for (u32 k = 0; k < count; k++) {
        zb_need(b, log);
        const u16 e = sh.dec.huf[zb_peek(b, log)];
        out[k] = (u8)e;
        b.used += e >> 8;
    }
    return zb_end(b);
}

// ---- writing output ----

// Copies n bytes from `from` to `to` (to <= from where both are in the output: a block's literals
// after its front), 128 bytes a round, each round read before it is written.
__device__ inline void zstd_copy_forward(u8* to, const u8* from, u64 n, u32 lane) {
    for (u64 base = 0; base < n; base += 128) {
        u8 v[4];
        const u64 at = base + lane * 4;
#pragma unroll
        for (u32 i = 0; i < 4; i++) v[i] = at + i < n ? from[at + i] : 0;
        __syncwarp();
#pragma unroll
        for (u32 i = 0; i < 4; i++)
            if (at + i < n) to[at + i] = v[i];
        __syncwarp();
    }
}

// Match bytes [0, len) at `at`: byte k copies at - off + k mod off, written before `at`.
__device__ inline void zstd_match(u8* d, u64 at, u32 len, u32 off, u32 lane) {
    if (off >= len) {
        for (u32 k = lane; k < len; k += 32) d[at + k] = d[at - off + k];
    } else {
        u32 m = lane % off;
        const u32 step = 32 % off;
        for (u32 k = lane; k < len; k += 32) {
            d[at + k] = d[at - off + m];
            m += step;
            if (m >= off) m -= off;
        }
    }
    __syncwarp();
}

// ---- a compressed block ----

// The literals section header at b[0, bs) (RFC 8878 3.1.1.3.1.1): its type (0 raw, 1 RLE, 2 Huffman,
// 3 treeless: the previous Huffman table, refused where there is none, !huf_ok), header bytes,
// regenerated size, compressed size and Huffman streams. Returns a status.
__device__ inline u32 zstd_lit_header(const u8* b, u32 bs, bool huf_ok, u32* type_o, u32* lh_o, u32* rs_o, u32* cs_o,
                                      u32* streams_o) {
    if (bs < 3) return VALIDATE_TRUNCATED;
    const u32 type = b[0] & 3, sf = (b[0] >> 2) & 3;
    u32 lh = 0, rs = 0, cs = 0, streams = 1;
    if (type < 2) {
        lh = (sf & 1) == 0 ? 1 : (sf == 1 ? 2 : 3);
        rs = lh == 1 ? (b[0] >> 3)
                     : (lh == 2 ? ((b[0] >> 4) | ((u32)b[1] << 4)) : ((b[0] >> 4) | ((u32)b[1] << 4) | ((u32)b[2] << 12)));
        cs = type == 0 ? rs : 1;
    } else {
        if (bs < 5) return VALIDATE_TRUNCATED;
        lh = sf < 2 ? 3 : (sf == 2 ? 4 : 5);
        streams = sf == 0 ? 1 : 4;
        const u32 v = (u32)b[0] | ((u32)b[1] << 8) | ((u32)b[2] << 16) | ((u32)b[3] << 24);
        if (lh == 3) {
            rs = (v >> 4) & 0x3FF;
            cs = (v >> 14) & 0x3FF;
        } else if (lh == 4) {
            rs = (v >> 4) & 0x3FFF;
            cs = v >> 18;
        } else {
            rs = (v >> 4) & 0x3FFFF;
            cs = (v >> 22) | ((u32)b[4] << 10);
        }
        if (streams == 4 && rs < 6) return ZSTD_CORRUPT;
        if (type == 3 && !huf_ok) return ZSTD_CORRUPT;
    }
    if ((u64)lh + cs > bs) return VALIDATE_TRUNCATED;
    *type_o = type;
    *lh_o = lh;
    *rs_o = rs;
    *cs_o = cs;
    *streams_o = streams;
    return VALIDATE_OK;
}

// What a compressed block's headers say: its literals' type, header bytes and regenerated size; its
// sequences' count, and where their bitstream starts in the block.
struct ZHead {
    u32 lit_type, lh, rs, nseq, q;
};

// Decodes the literals section of the compressed block b[0, bs) (raw literals stay in the input; RLE
// and Huffman ones go to the output's tail, d[dst_len - rs, dst_len)) and reads its sequences section
// header, building its sequence tables in sh. room: the output bytes the block may still fill (so the
// tail starts after what is written). Lane 0 carries the tables' state (huf_ok, fse_ok, huf_log, logs)
// from block to block. Returns a status; *hd, the headers.
__device__ inline u32 zstd_block_head(ZstdShared& sh, const u8* b, u32 bs, u8* d, u64 dst_len, u64 room, u32 block_max,
                                      bool* huf_ok, bool* fse_ok, u32* huf_log, u32* logs, u32 lane, ZHead* hd) {
    // ---- literals section header (lane 0) ----
    ZHand h = {};
    if (lane == 0) {
        u32 type = 0, lh = 0, rs = 0, cs = 0, streams = 1;
        u32 st = zstd_lit_header(b, bs, *huf_ok, &type, &lh, &rs, &cs, &streams);
        if (st == VALIDATE_OK && (rs > block_max || rs > room)) st = VALIDATE_WRONG_SIZE;
        h = {st, {type, lh, rs, cs, streams}, {0, 0}};
    }
    const ZHand lit = zstd_hand_over(sh, h, lane);
    if (lit.status != VALIDATE_OK) return lit.status;
    const u32 type = lit.v[0], lh = lit.v[1], rs = lit.v[2], cs = lit.v[3], streams = lit.v[4];
    if (type == 1) {
        u8* tail = d + (dst_len - rs);
        const u8 v = b[lh];
        for (u32 k = lane; k < rs; k += 32) tail[k] = v;
    } else if (type >= 2) {
        u8* tail = d + (dst_len - rs);
        u32 hsize = 0;
        if (type == 2) {
            u32 log = 0;
            hsize = zstd_read_huffman(sh, b + lh, cs, &log, lane);
            if (hsize == 0 || hsize >= cs) return ZSTD_CORRUPT;
            if (lane == 0) {
                *huf_ok = true;
                *huf_log = log;
            }
        }
        const u32 log = __shfl_sync(0xffffffffu, *huf_log, 0);
        const u8* hs = b + lh + hsize;
        const u32 hl = cs - hsize;
        bool ok = true;
        if (streams == 1) {
            if (lane == 0) ok = zstd_huffman_stream(sh, hs, hl, tail, rs, log);
        } else {
            if (hl < 10) return ZSTD_CORRUPT;
            const u32 l1 = hs[0] | ((u32)hs[1] << 8), l2 = hs[2] | ((u32)hs[3] << 8), l3 = hs[4] | ((u32)hs[5] << 8);
            if ((u64)l1 + l2 + l3 + 6 > hl) return ZSTD_CORRUPT;
            const u32 l4 = hl - 6 - l1 - l2 - l3;
            const u32 seg = (rs + 3) / 4;
            if (3 * seg > rs) return ZSTD_CORRUPT;
            if (lane < 4) {
                const u32 from = 6 + (lane > 0 ? l1 : 0) + (lane > 1 ? l2 : 0) + (lane > 2 ? l3 : 0);
                const u32 len = lane == 0 ? l1 : (lane == 1 ? l2 : (lane == 2 ? l3 : l4));
                const u32 count = lane < 3 ? seg : rs - 3 * seg;
                ok = zstd_huffman_stream(sh, hs + from, len, tail + lane * seg, count, log);
            }
        }
        if (__ballot_sync(0xffffffffu, !ok)) return ZSTD_CORRUPT;
    }
    __syncwarp();
    // ---- sequences section header (lane 0) ----
    if (lane == 0) {
        u32 q = lh + cs;
        u32 st = VALIDATE_OK, nseq = 0;
        do {
            if (q >= bs) {
                st = VALIDATE_TRUNCATED;
                break;
            }
            nseq = b[q++];
            if (nseq >= 128) {
                if (nseq == 255) {
                    if (q + 2 > bs) {
                        st = VALIDATE_TRUNCATED;
                        break;
                    }
                    nseq = (b[q] | ((u32)b[q + 1] << 8)) + 0x7F00;
                    q += 2;
                } else {
                    if (q >= bs) {
                        st = VALIDATE_TRUNCATED;
                        break;
                    }
                    nseq = ((nseq - 128) << 8) + b[q++];
                }
            }
            if (nseq == 0) {
                if (q != bs) st = ZSTD_CORRUPT;
                break;
            }
            if (q >= bs) {
                st = VALIDATE_TRUNCATED;
                break;
            }
            const u32 modes = b[q++];
            if (modes & 3) {
                st = ZSTD_CORRUPT;
                break;
            }
            const u32 mode[3] = {modes >> 6, (modes >> 2) & 3, (modes >> 4) & 3};  // LL, ML, OF
            // Descriptions come in the order LL, OF, ML.
            const u32 order[3] = {0, 2, 1};
            for (u32 i = 0; i < 3 && st == VALIDATE_OK; i++) {
                const u32 k = order[i];
                const u32 used = zstd_seq_table(sh, k, mode[k], b + q, bs - q, *fse_ok, &logs[k]);
                if (used == ~0u) st = ZSTD_CORRUPT;
                else q += used;
            }
            if (st == VALIDATE_OK) *fse_ok = true;
        } while (false);
        h = {st, {nseq, q, 0, 0, 0}, {0, 0}};
    }
    const ZHand seq = zstd_hand_over(sh, h, lane);
    if (seq.status != VALIDATE_OK) return seq.status;
    *hd = {type, lh, rs, seq.v[0], seq.v[1]};
    return VALIDATE_OK;
}

// A block's sequence decoder (libzstd's ZSTD_decodeSequence): three FSE states over one backward
// bitstream, their tables, and the length codes' baselines.
struct ZSeqs {
    ZBits bits;
    const ZFse *ll, *ml, *of;
    const u32 *code_ll, *code_ml;
    u32 s_ll, s_ml, s_of;
    u32 mask_ll, mask_ml, mask_of;
};

// Gives z its tables (LL, ML, OF, of logs[0..3)) and sh's length codes.
__device__ inline void zstd_seqs_tables(ZSeqs& z, const ZstdShared& sh, const ZFse* ll, const ZFse* ml, const ZFse* of,
                                        const u32* logs) {
    z.ll = ll;
    z.ml = ml;
    z.of = of;
    z.code_ll = sh.code[0];
    z.code_ml = sh.code[1];
    z.mask_ll = (1u << logs[0]) - 1;
    z.mask_ml = (1u << logs[1]) - 1;
    z.mask_of = (1u << logs[2]) - 1;
}

// Starts z (its tables given, logs[0..3) their logs) over the bitstream s[0, len): false when the
// stream has no sentinel.
__device__ inline bool zstd_seqs_init(ZSeqs& z, const u8* s, u32 len, const u32* logs) {
    if (!zb_init(z.bits, s, len)) return false;
    z.s_ll = zb_read(z.bits, logs[0]);
    zb_reload(z.bits);
    z.s_of = zb_read(z.bits, logs[2]);
    zb_reload(z.bits);
    z.s_ml = zb_read(z.bits, logs[1]);
    zb_reload(z.bits);
    return true;
}

// The repeat offsets (fields, not an array, so that they stay in registers).
struct ZRep {
    u32 r0, r1, r2;
};

// The next sequence's literal length, match length and offset (rep: the repeat offsets, updated);
// `more`: whether a sequence follows (the states are updated only then).
__device__ inline void zstd_next_sequence(ZSeqs& z, ZRep& rep, bool more, u32* ll_o, u32* ml_o, u32* off_o) {
    const ZFse L = z.ll[z.s_ll & z.mask_ll], M = z.ml[z.s_ml & z.mask_ml], O = z.of[z.s_of & z.mask_of];
    const u32 lc = z.code_ll[L.sym], mc = z.code_ml[M.sym];
    // An offset code's extra bits are the code; its baseline, libzstd's OF_base.
    const u32 o_extra = O.sym, o_base = O.sym < 2 ? O.sym : (1u << O.sym) - 3;
    const u32 l_extra = lc >> 24, m_extra = mc >> 24;
    u32 ll = lc & 0xFFFFFF, ml = mc & 0xFFFFFF, off;
    ZBits& bits = z.bits;
    zb_need(bits, o_extra);
    if (o_extra > 1) {
        off = o_base + zb_read(bits, o_extra);
        rep.r2 = rep.r1;
        rep.r1 = rep.r0;
        rep.r0 = off;
    } else {
        const u32 ll0 = ll == 0;
        if (o_extra == 0) {
            // Repeat offset 1, or 2 after no literals (which then swaps the two).
            off = ll0 ? rep.r1 : rep.r0;
            if (ll0) {
                rep.r1 = rep.r0;
                rep.r0 = off;
            }
        } else {
            // Repeat offset v + 1 (v 1 or 2), or the first less 1 (v 3).
            const u32 v = o_base + ll0 + zb_read(bits, 1);
            const u32 t = v == 3 ? rep.r0 - 1 : (v == 1 ? rep.r1 : rep.r2);
            // 0 (from an offset of 1 less 1) is refused when the sequence is checked.
            if (v != 1) rep.r2 = rep.r1;
            rep.r1 = rep.r0;
            rep.r0 = t;
            off = t;
        }
    }
    zb_need(bits, m_extra + l_extra);
    ml += zb_read(bits, m_extra);
    ll += zb_read(bits, l_extra);
    if (more) {
        zb_need(bits, L.bits + M.bits + O.bits);
        z.s_ll = L.next + zb_read(bits, L.bits);
        z.s_ml = M.next + zb_read(bits, M.bits);
        z.s_of = O.next + zb_read(bits, O.bits);
    }
    *ll_o = ll;
    *ml_o = ml;
    *off_o = off;
}

// A batch of k (<= 32) sequences (literal lengths, match lengths, offsets) and the shared memory it is
// written through.
struct ZBatch {
    const u32 *ll, *ml, *off;
    u8* stage;  // ZSTD_STAGE bytes
    u8* lit_stage;
};

// Writes the batch's k sequences to d[*out_io, ...), their literals from lits[*lit_used_io, rs),
// advancing both: false when a sequence is invalid (its literals past rs, its offset 0 or before
// frame_start, or its end plus the block's literals after it past dst_len, so that no write reaches a
// literal not yet read; or empty, which no Zstd sequence is: a match is 3 bytes at least). The whole
// warp, with the same arguments.
__device__ inline bool zstd_run_batch(const ZBatch& bt, u32 k, u8* d, u64* out_io, const u8* lits, u32* lit_used_io,
                                      u32 rs, u64 frame_start, u64 dst_len, u32 lane) {
    const u64 out = *out_io;
    const u32 lit_used = *lit_used_io;
    // Each lane's sequence: where its output and its literals start.
    const u32 ll = lane < k ? bt.ll[lane] : 0, ml = lane < k ? bt.ml[lane] : 0;
    const u32 off = lane < k ? bt.off[lane] : 0;
    u32 len_before = ll + ml, lit_before = ll;
#pragma unroll
    for (u32 sft = 1; sft < 32; sft <<= 1) {
        const u32 a = __shfl_up_sync(0xffffffffu, len_before, sft);
        const u32 c = __shfl_up_sync(0xffffffffu, lit_before, sft);
        if (lane >= sft) {
            len_before += a;
            lit_before += c;
        }
    }
    const u32 total = __shfl_sync(0xffffffffu, len_before, 31);
    const u32 lits_total = __shfl_sync(0xffffffffu, lit_before, 31);
    len_before -= ll + ml;
    lit_before -= ll;
    bool bad = false;
    if (lane < k) {
        const u64 lit_end = (u64)lit_used + lit_before + ll;
        const u64 mstart = out + len_before + ll;
        bad = lit_end > rs || off == 0 || off > mstart - frame_start || mstart + ml + (rs - lit_end) > dst_len ||
              ll + ml == 0;
    }
    if (__ballot_sync(0xffffffffu, bad)) return false;
    if (total <= ZSTD_STAGE) {
        // The batch's literals, staged (they follow each other in the block's).
        for (u32 p0 = lane; p0 < lits_total; p0 += 128) {
            u8 v[4];
#pragma unroll
            for (u32 i = 0; i < 4; i++) v[i] = p0 + 32 * i < lits_total ? lits[lit_used + p0 + 32 * i] : 0;
#pragma unroll
            for (u32 i = 0; i < 4; i++)
                if (p0 + 32 * i < lits_total) bt.lit_stage[p0 + 32 * i] = v[i];
        }
        __syncwarp();
        // Each lane's sequence as its bytes look it up: where its match starts in the batch, and the
        // match bytes before it (so that its literal byte p is staged literal p less those).
        const u32 mst = len_before + ll, mb = len_before - lit_before;
        // Literal bytes, and match bytes whose source is before the batch: four windows of 32 bytes a
        // round, byte base + lane in each, their loads from the output issued together. A byte's
        // sequence is the last to start at or before it, found for the whole window at once (no walk
        // through the starts): the last starting at or before base (a ballot; sequence 0 starts at 0),
        // then one more for each start in (base, byte] (a bit at each start in the window: the starts
        // differ, every sequence being checked above to be non-empty).
        for (u32 r0 = 0; r0 < total; r0 += 128) {
            const u32 p0 = r0 + lane;
            u64 from[4];
            u32 kind[4];  // 0: waits for the batch, 1: a literal, 2: an earlier output byte
#pragma unroll
            for (u32 i = 0; i < 4; i++) {
                const u32 base = r0 + 32 * i, p = base + lane;
                kind[i] = 0;
                from[i] = 0;
                if (base < total) {  // the same for the whole warp, which the shuffles need
                    const u32 before = __ballot_sync(0xffffffffu, lane < k && len_before <= base);
                    // len_before - base - 1 < 31: base < len_before < base + 32.
                    const u32 inside =
                        gpcore::warp_or(lane < k && len_before - base - 1 < 31 ? 1u << (len_before - base) : 0);
                    const u32 j = __popc(before) - 1 + __popc(inside & (0xffffffffu >> (31 - lane)));
                    const u32 jm = __shfl_sync(0xffffffffu, mst, j), jb = __shfl_sync(0xffffffffu, mb, j);
                    const u32 o = __shfl_sync(0xffffffffu, off, j);
                    if (p < total) {
                        if (p < jm) {
                            kind[i] = 1;
                            from[i] = p - jb;
                        } else {
                            const u32 kk = p - jm;
                            const u32 m = kk < o ? kk : kk % o;
                            const u64 src = out + jm + m - o;
                            if (src < out) {
                                kind[i] = 2;
                                from[i] = src;
                            }
                        }
                    }
                }
            }
            u8 v[4];
#pragma unroll
            for (u32 i = 0; i < 4; i++) v[i] = kind[i] == 2 ? d[from[i]] : (kind[i] == 1 ? bt.lit_stage[from[i]] : 0);
#pragma unroll
            for (u32 i = 0; i < 4; i++)
                if (kind[i]) bt.stage[p0 + 32 * i] = v[i];
        }
        __syncwarp();
        // Matches reaching into the batch, in order (waiting is the warp's, and so are the shuffles).
        u32 waiting = __ballot_sync(0xffffffffu, lane < k && ml > 0 && (u64)len_before + ll + min(ml, off) > off);
        while (waiting) {
            const u32 j = __ffs((int)waiting) - 1;
            waiting &= waiting - 1;
            const u32 jm = __shfl_sync(0xffffffffu, mst, j), o = __shfl_sync(0xffffffffu, off, j);
            const u32 mlen = __shfl_sync(0xffffffffu, ml, j);
            for (u32 kk = lane; kk < mlen; kk += 32) {
                const u32 m = kk < o ? kk : kk % o;
                if (jm + m >= o) bt.stage[jm + kk] = bt.stage[jm + m - o];
            }
            __syncwarp();
        }
        for (u32 p = lane; p < total; p += 32) d[out + p] = bt.stage[p];
        __syncwarp();
    } else {
        for (u32 j = 0; j < k; j++) {
            const u32 jll = __shfl_sync(0xffffffffu, ll, j), jml = __shfl_sync(0xffffffffu, ml, j);
            const u32 joff = __shfl_sync(0xffffffffu, off, j);
            const u32 jb = __shfl_sync(0xffffffffu, len_before, j);
            const u32 jl = __shfl_sync(0xffffffffu, lit_before, j);
            zstd_copy_forward(d + out + jb, lits + lit_used + jl, jll, lane);
            zstd_match(d, out + jb + jll, jml, joff, lane);
        }
    }
    *out_io = out + total;
    *lit_used_io = lit_used + lits_total;
    return true;
}

// Decodes the compressed block b[0, bs) to d[*out_io, ...), one block at a time: its literals at the
// output's tail, its sequences decoded by lane 0 and written by the warp a batch at a time.
// frame_start: its frame's first output byte; block_max: the frame's largest block. Lane 0 carries the
// repeat offsets and the tables' state from block to block. Returns a status.
__device__ inline u32 zstd_block(ZstdShared& sh, const u8* b, u32 bs, u8* d, u64 dst_len, u64* out_io,
                                 u64 frame_start, u32 block_max, ZRep& rep, bool* huf_ok, bool* fse_ok,
                                 u32* huf_log, u32* logs, u32 lane) {
    const u64 out0 = *out_io;
    ZHead hd;
    const u32 head = zstd_block_head(sh, b, bs, d, dst_len, dst_len - out0, block_max, huf_ok, fse_ok, huf_log, logs,
                                     lane, &hd);
    if (head != VALIDATE_OK) return head;
    const u32 rs = hd.rs, nseq = hd.nseq;
    // The block's literals: in the input (raw), else at the output's tail.
    const u8* lits = hd.lit_type == 0 ? b + hd.lh : d + (dst_len - rs);
    u64 out = out0;
    u32 lit_used = 0;
    if (nseq > 0) {
        // Lane 0's decoder.
        ZSeqs z;
        ZHand h = {};
        if (lane == 0) {
            zstd_seqs_tables(z, sh, sh.dec.ll, sh.dec.ml, sh.dec.of, logs);
            h.status = zstd_seqs_init(z, b + hd.q, bs - hd.q, logs) ? VALIDATE_OK : ZSTD_CORRUPT;
        }
        const u32 init = zstd_hand_over(sh, h, lane).status;
        if (init != VALIDATE_OK) return init;
        const ZBatch bt = {sh.seq_ll, sh.seq_ml, sh.seq_off, sh.stage, sh.lit_stage};
        for (u32 done = 0; done < nseq; done += 32) {
            const u32 k = min(32u, nseq - done);
            if (lane == 0) {
                for (u32 j = 0; j < k; j++)
                    zstd_next_sequence(z, rep, done + j + 1 < nseq, &sh.seq_ll[j], &sh.seq_ml[j], &sh.seq_off[j]);
            }
            __syncwarp();
            if (!zstd_run_batch(bt, k, d, &out, lits, &lit_used, rs, frame_start, dst_len, lane)) return ZSTD_CORRUPT;
        }
        if (lane == 0) h.status = zb_end(z.bits) ? VALIDATE_OK : ZSTD_CORRUPT;
        const u32 end = zstd_hand_over(sh, h, lane).status;
        if (end != VALIDATE_OK) return end;
    }
    // The literals after the last sequence (checked to fit with the last sequence, or by the header).
    zstd_copy_forward(d + out, lits + lit_used, rs - lit_used, lane);
    out += rs - lit_used;
    if (out - out0 > block_max) return VALIDATE_WRONG_SIZE;
    *out_io = out;
    return VALIDATE_OK;
}

// ---- a body ----

// The frame header at s[p, n) (lane 0): a status; v[0] 1 for a skippable frame, v[1] the frame's largest
// block, v[2] whether it declares its content size; w[0] that size, w[1] where its blocks (or the next
// frame, after a skippable one) start.
__device__ inline ZHand zstd_frame_header(const u8* s, u64 n, u64 p) {
    u32 st = VALIDATE_OK, skip = 0, block_max = 0, has_fcs = 0;
    u64 fcs = 0, at = p;
    do {
        if (n - p < 5) {
            st = VALIDATE_TRUNCATED;
            break;
        }
        const u32 magic = (u32)s[p] | ((u32)s[p + 1] << 8) | ((u32)s[p + 2] << 16) | ((u32)s[p + 3] << 24);
        if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) {
            if (n - p < 8) {
                st = VALIDATE_TRUNCATED;
                break;
            }
            const u64 size = (u32)s[p + 4] | ((u32)s[p + 5] << 8) | ((u32)s[p + 6] << 16) | ((u32)s[p + 7] << 24);
            if (size > n - p - 8) {
                st = VALIDATE_TRUNCATED;
                break;
            }
            skip = 1;
            at = p + 8 + size;
            break;
        }
        if (magic != 0xFD2FB528u) {
            st = VALIDATE_BAD_HEADER;
            break;
        }
        const u32 fhd = s[p + 4];
        const u32 fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, dict_flag = fhd & 3;
        if (fhd & 8) {
            st = VALIDATE_BAD_HEADER;
            break;
        }
        if (fhd & 4) {
            st = ZSTD_UNSUPPORTED;  // a content checksum
            break;
        }
        const u32 dict_bytes = dict_flag == 0 ? 0 : (dict_flag == 1 ? 1 : (dict_flag == 2 ? 2 : 4));
        const u32 fcs_bytes = fcs_flag == 0 ? single : (fcs_flag == 1 ? 2 : (fcs_flag == 2 ? 4 : 8));
        const u64 hsize = 5 + (single ? 0 : 1) + dict_bytes + fcs_bytes;
        if (n - p < hsize) {
            st = VALIDATE_TRUNCATED;
            break;
        }
        u64 q = p + 5;
        u64 window = 0;
        if (!single) {
            const u32 wb = s[q++];
            const u32 wlog = (wb >> 3) + 10;
            if (wlog > 31) {
                st = ZSTD_CORRUPT;
                break;
            }
            window = 1ull << wlog;
            window += (window >> 3) * (wb & 7);
        }
        u32 dict = 0;
        for (u32 i = 0; i < dict_bytes; i++) dict |= (u32)s[q + i] << (8 * i);
        q += dict_bytes;
        if (dict != 0) {
            st = ZSTD_UNSUPPORTED;  // a dictionary
            break;
        }
        for (u32 i = 0; i < fcs_bytes; i++) fcs |= (u64)s[q + i] << (8 * i);
        if (fcs_bytes == 2) fcs += 256;
        q += fcs_bytes;
        has_fcs = fcs_bytes > 0;
        if (single) window = fcs;
        block_max = (u32)(window < ZSTD_BLOCK_MAX ? window : ZSTD_BLOCK_MAX);
        at = q;
    } while (false);
    return {st, {skip, block_max, has_fcs, 0, 0}, {fcs, at}};
}

// The block header at s[p, n) (lane 0), for a block of at most block_max bytes and at most `room` output
// bytes when raw or RLE: a status; v[0] whether it is the frame's last, v[1] its type, v[2] its size.
__device__ inline ZHand zstd_block_header(const u8* s, u64 n, u64 p, u32 block_max, u64 room) {
    u32 st = VALIDATE_OK, last = 0, type = 0, size = 0;
    if (n - p < 3) {
        st = VALIDATE_TRUNCATED;
    } else {
        const u32 h = (u32)s[p] | ((u32)s[p + 1] << 8) | ((u32)s[p + 2] << 16);
        last = h & 1;
        type = (h >> 1) & 3;
        size = h >> 3;
        const u64 body = type == 1 ? 1 : size;
        if (type == 3) st = ZSTD_CORRUPT;
        else if (size > block_max) st = ZSTD_CORRUPT;
        else if (body > n - p - 3) st = VALIDATE_TRUNCATED;
        else if (type != 2 && size > room) st = VALIDATE_WRONG_SIZE;
    }
    return {st, {last, type, size, 0, 0}, {0, 0}};
}

__device__ inline u32 zstd_body(ZstdShared& sh, const u8* s, u64 n, u8* d, u64 dst_len, u32 lane) {
    if (n >= (1ull << 31) || dst_len >= (1ull << 31)) return VALIDATE_TOO_LARGE;
    u64 p = 0, out = 0;
    // Lane 0's frame state.
    ZRep rep = {1, 4, 8};
    bool huf_ok = false, fse_ok = false;
    u32 huf_log = 0;
    u32 logs[3] = {0, 0, 0};
    while (p < n) {
        ZHand fh = {};
        if (lane == 0) fh = zstd_frame_header(s, n, p);
        const ZHand frame = zstd_hand_over(sh, fh, lane);
        if (frame.status != VALIDATE_OK) return frame.status;
        const u32 skip = frame.v[0], block_max = frame.v[1], has_fcs = frame.v[2];
        const u64 fcs = frame.w[0];
        p = frame.w[1];
        if (skip) continue;
        const u64 frame_start = out;
        rep = {1, 4, 8};
        huf_ok = fse_ok = false;
        // ---- blocks ----
        for (;;) {
            ZHand bh = {};
            if (lane == 0) bh = zstd_block_header(s, n, p, block_max, dst_len - out);
            const ZHand block = zstd_hand_over(sh, bh, lane);
            if (block.status != VALIDATE_OK) return block.status;
            const u32 last = block.v[0], type = block.v[1], size = block.v[2];
            p += 3;
            if (type == 0) {
                for (u32 k = lane; k < size; k += 32) d[out + k] = s[p + k];
                out += size;
                p += size;
            } else if (type == 1) {
                const u8 v = s[p];
                for (u32 k = lane; k < size; k += 32) d[out + k] = v;
                out += size;
                p += 1;
            } else {
                const u32 st = zstd_block(sh, s + p, size, d, dst_len, &out, frame_start, block_max, rep, &huf_ok,
                                          &fse_ok, &huf_log, logs, lane);
                if (st != VALIDATE_OK) return st;
                p += size;
            }
            __syncwarp();
            if (last) break;
        }
        if (has_fcs && out - frame_start != fcs) return VALIDATE_WRONG_SIZE;
    }
    return out == dst_len ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

// The length codes' baselines and extra bits, in sh.code (the whole warp).
__device__ inline void zstd_init_codes(ZstdShared& sh, u32 lane) {
    for (u32 c = lane; c < 53; c += 32) {
        sh.code[0][c] = c < 36 ? zstd_code(0, c) : 0;
        sh.code[1][c] = zstd_code(1, c);
    }
    __syncwarp();
}

extern "C" __global__ void __launch_bounds__(UNZSTD_THREADS) gp_unzstd(UnsnapItem* items, u32 n) {
    if (blockDim.x != UNZSTD_THREADS) __trap();
    __shared__ ZstdShared sh;
    const u32 lane = threadIdx.x;
    zstd_init_codes(sh, lane);
    for (u32 i = blockIdx.x; i < n; i += gridDim.x) {
        const UnsnapItem it = items[i];
        const u32 st = zstd_body(sh, (const u8*)it.src, it.src_len, (u8*)it.dst, it.dst_len, lane);
        __syncwarp();
        if (lane == 0) items[i].status = st;
    }
}

// ---- long bodies, their blocks in parallel (gp_unzstd_blocks) ----
//
// A warp of gp_unzstd takes a body as one chain: on TPC-H lineitem the 1 MB pages of l_comment hold up
// to 131,780 sequences. A compressed block's sequences depend on the blocks before it only through the
// three repeat offsets, and its bitstream not at all, so here a body's chain is cut (measured, run BB
// on an H100: lineitem SF10 zstd decode alone 140.3 ms with the bodies of 256 kB or more here, beside
// nvCOMP on the rest, against 94.6 with nvCOMP alone; nvCOMP's launches, sharing the GPU with this
// kernel's warps, ended later, not sooner, so a step's decompression is bound by the GPU's work, and
// this kernel's work a byte is nvCOMP's and more; GPU_PARQUET_ZSTD=blocks:N. Where nvCOMP did not
// load it takes the bodies of 256 kB or more by default: run BC, decode alone 165.4 ms against 230.3
// with gp_unzstd for every body):
//   1. plan (lane 0): the frame's block headers and literal headers; each block's literals get a
//      place in the output's tail, one block's after another's (the writes from the front never reach
//      a literal not yet read: every block writes at least its literals, and every sequence is checked
//      to stop before the unread ones);
//   2. literals and tables (the warp, a block after another): the literals decoded into their place,
//      the block's three sequence tables copied to the body's scratch;
//   3. checkpoints (a lane a block): each block's bitstream walked once, the decoder's state kept
//      every ZBL_CHECK_SEQS sequences;
//   4. execution (the warp, a block after another): rounds of 32 checkpoints, a lane decoding the
//      sequences after each one with its repeat offsets symbolic (ZBL_SYM: "the round's first value
//      of slot i, less m"), resolved once the lanes before are; then the batches are written as
//      gp_unzstd writes them (zstd_run_batch).
// So a body's longest chain is a block's bitstream (16,383 sequences at most in lineitem) plus its
// batches, and a chain of 32 sequences a round. A body this does not plan (several frames; more blocks,
// table entries or checkpoints than its scratch holds) or finds invalid anywhere is decoded again, whole, by
// zstd_body: the statuses are gp_unzstd's, and where this returns 0 its checks were at least
// zstd_body's. Scratch per body (layout.rs zstd_blocks, the same sizes): zbl_plans(dst_len) block
// plans, zbl_entries(dst_len) table entries (each block's three tables at their sizes), then
// zbl_checks(dst_len) checkpoints.

// The output a block plan stands for (libzstd's block splitter writes blocks well under 128 kB), and
// the table entries a body holds: a full set (LL, ML, OF at their largest) for every 32 kB.
#define ZBL_PLAN_OUT 4096u
#define ZBL_TABLE_OUT 32768u
#define ZBL_TABLE_SET 1280u
#define ZBL_CHECK_SEQS 32u
// The output a checkpoint stands for when a body's checkpoints fill its scratch: 6 bytes a sequence
// (lineitem's worst page has 8).
#define ZBL_CHECK_OUT 192u
#define ZBL_ROUND (32u * ZBL_CHECK_SEQS)
// A symbolic repeat offset: bit 31, the slot in bits 29-30, and 0x1FFFFFFF less the times 1 was
// taken from it. A decoded offset never has bit 31 (offset codes past 30 are refused).
#define ZBL_SYM(i) (0x80000000u | ((u32)(i) << 29) | 0x1FFFFFFFu)

struct ZBlockPlan {
    u64 at;       // the block's data in the body (after its header)
    u64 lit_end;  // where its literals end in the output: dst_len less the later blocks' literals
    u32 type;     // 0 raw, 1 RLE, 2 compressed
    u32 size;     // the header's block size
    u32 rs;       // its literals' regenerated size (compressed blocks)
    u32 lit_type;
    u32 lh;
    u32 nseq;
    u32 q;  // its bitstream's start in the block
    u32 ck0;
    u32 logs[3];
    u32 tab;  // its tables' first entry in the body's table entries: LL, then ML, then OF
};
static_assert(sizeof(ZBlockPlan) == 64, "ZBlockPlan must match layout.rs zstd_blocks");


struct ZCheck {
    u64 c;
    u32 ptr, used;
    u16 s_ll, s_ml, s_of, pad;
};
static_assert(sizeof(ZCheck) == 24, "ZCheck must match layout.rs zstd_blocks");

__device__ inline u64 zbl_plans(u64 dst_len) { return dst_len / ZBL_PLAN_OUT + 2; }
__device__ inline u64 zbl_entries(u64 dst_len) { return (dst_len / ZBL_TABLE_OUT + 2) * ZBL_TABLE_SET; }
__device__ inline u64 zbl_checks(u64 dst_len) { return dst_len / ZBL_CHECK_OUT + zbl_plans(dst_len); }

// A round's sequences, a lane's batch after another's, and the repeat offsets around each batch. Their
// literal and match lengths are in ZstdShared::lengths (the decoding tables' room), idle by then.
struct ZRound {
    u32 off[ZBL_ROUND];
    ZRep exit[32], entry[33];
};
static_assert(sizeof(ZstdShared::lengths) == 2 * ZBL_ROUND * sizeof(u32), "a round's lengths fill ZstdShared::lengths");

__device__ inline u32 zbl_resolve(u32 v, const ZRep& e) {
    if (!(v & 0x80000000u)) return v;
    const u32 slot = (v >> 29) & 3, m = 0x1FFFFFFFu - (v & 0x1FFFFFFFu);
    return (slot == 0 ? e.r0 : (slot == 1 ? e.r1 : e.r2)) - m;
}

// Gives z a block's tables, kept one after another from t.
__device__ inline void zbl_tables(ZSeqs& z, const ZstdShared& sh, const ZFse* t, const u32* logs) {
    const ZFse* ml = t + (1u << logs[0]);
    zstd_seqs_tables(z, sh, t, ml, ml + (1u << logs[1]), logs);
}

// Decodes the body as above: false where it did not (the output is then partly written).
__device__ inline bool zbl_body(ZstdShared& sh, ZRound& rd, const u8* s, u64 n, u8* d, u64 dst_len, u8* scratch,
                                u32 lane) {
    if (n >= (1ull << 31) || dst_len >= (1ull << 31)) return false;
    const u64 slots = zbl_plans(dst_len), entries = zbl_entries(dst_len), checks = zbl_checks(dst_len);
    ZBlockPlan* plan = (ZBlockPlan*)scratch;
    ZFse* tabs = (ZFse*)(plan + slots);
    ZCheck* cks = (ZCheck*)(tabs + entries);
    // ---- 1. plan ----
    ZHand h = {};
    if (lane == 0) {
        bool ok = false;
        u32 nb = 0, block_max = 0;
        do {
            const ZHand fh = zstd_frame_header(s, n, 0);
            if (fh.status != VALIDATE_OK || fh.v[0]) break;
            block_max = fh.v[1];
            if (fh.v[2] && fh.w[0] != dst_len) break;
            u64 p = fh.w[1], lits = 0;
            bool last = false, bad = false;
            while (!last) {
                const ZHand bh = zstd_block_header(s, n, p, block_max, dst_len);
                if (bh.status != VALIDATE_OK || nb == slots) {
                    bad = true;
                    break;
                }
                last = bh.v[0];
                ZBlockPlan r = {};
                r.type = bh.v[1];
                r.size = bh.v[2];
                r.at = p + 3;
                if (r.type == 2) {
                    u32 type = 0, lh = 0, rs = 0, cs = 0, streams = 1;
                    if (zstd_lit_header(s + r.at, r.size, true, &type, &lh, &rs, &cs, &streams) != VALIDATE_OK) {
                        bad = true;
                        break;
                    }
                    r.rs = rs;
                    lits += rs;
                }
                p = r.at + (r.type == 1 ? 1 : r.size);
                plan[nb++] = r;
            }
            if (bad || p != n || lits > dst_len) break;
            u64 end = dst_len;
            for (u32 k = nb; k-- > 0;) {
                plan[k].lit_end = end;
                end -= plan[k].rs;
            }
            ok = true;
        } while (false);
        h = {ok ? VALIDATE_OK : ZSTD_CORRUPT, {nb, block_max, 0, 0, 0}, {0, 0}};
    }
    const ZHand planned = zstd_hand_over(sh, h, lane);
    if (planned.status != VALIDATE_OK) return false;
    const u32 nb = planned.v[0], block_max = planned.v[1];
    // ---- 2. literals and tables ----
    bool huf_ok = false, fse_ok = false;
    u32 huf_log = 0, logs[3] = {0, 0, 0};
    u64 ck = 0, tab = 0;
    for (u32 k = 0; k < nb; k++) {
        const ZBlockPlan r = plan[k];
        if (r.type != 2) continue;
        ZHead hd;
        if (zstd_block_head(sh, s + r.at, r.size, d, r.lit_end, r.lit_end, block_max, &huf_ok, &fse_ok, &huf_log, logs,
                            lane, &hd) != VALIDATE_OK)
            return false;
        // The logs are lane 0's.
        const u32 n_ll = 1u << __shfl_sync(0xffffffffu, logs[0], 0), n_ml = 1u << __shfl_sync(0xffffffffu, logs[1], 0);
        const u32 n_of = 1u << __shfl_sync(0xffffffffu, logs[2], 0);
        const u64 at = tab;
        if (hd.nseq > 0) {
            tab += n_ll + n_ml + n_of;
            if (tab > entries) return false;
            ZFse* to = tabs + at;
            for (u32 e = lane; e < n_ll; e += 32) to[e] = sh.dec.ll[e];
            for (u32 e = lane; e < n_ml; e += 32) to[n_ll + e] = sh.dec.ml[e];
            for (u32 e = lane; e < n_of; e += 32) to[n_ll + n_ml + e] = sh.dec.of[e];
        }
        if (lane == 0) {
            plan[k].tab = (u32)at;
            plan[k].lit_type = hd.lit_type;
            plan[k].lh = hd.lh;
            plan[k].nseq = hd.nseq;
            plan[k].q = hd.q;
            plan[k].ck0 = (u32)ck;
            for (u32 t = 0; t < 3; t++) plan[k].logs[t] = logs[t];
        }
        ck += (hd.nseq + ZBL_CHECK_SEQS - 1) / ZBL_CHECK_SEQS;
        if (ck > checks) return false;
    }
    __syncwarp();
    // ---- 3. checkpoints, a lane a block ----
    bool bad = false;
    for (u32 k = lane; k < nb; k += 32) {
        const ZBlockPlan r = plan[k];
        if (r.type != 2 || r.nseq == 0) continue;
        ZSeqs z;
        zbl_tables(z, sh, tabs + r.tab, r.logs);
        if (!zstd_seqs_init(z, s + r.at + r.q, r.size - r.q, r.logs)) {
            bad = true;
            continue;
        }
        ZRep rep = {1, 4, 8};
        for (u32 j = 0; j < r.nseq; j++) {
            if (j % ZBL_CHECK_SEQS == 0) {
                ZCheck c;
                c.c = z.bits.c;
                c.ptr = z.bits.ptr;
                c.used = z.bits.used;
                c.s_ll = (u16)z.s_ll;
                c.s_ml = (u16)z.s_ml;
                c.s_of = (u16)z.s_of;
                c.pad = 0;
                cks[r.ck0 + j / ZBL_CHECK_SEQS] = c;
            }
            u32 ll, ml, off;
            zstd_next_sequence(z, rep, j + 1 < r.nseq, &ll, &ml, &off);
        }
        if (!zb_end(z.bits)) bad = true;
    }
    if (__ballot_sync(0xffffffffu, bad)) return false;
    // The checkpoints one lane wrote, other lanes read (a vote orders no memory).
    __syncwarp();
    // ---- 4. execution ----
    u64 out = 0;
    ZRep rep = {1, 4, 8};  // every lane's copy alike
    const ZBatch bt0 = {nullptr, nullptr, nullptr, sh.stage, sh.lit_stage};
    // The decoding tables are idle from here (every block's are in scratch): a round's lengths go there.
    u32* const round_ll = sh.lengths;
    u32* const round_ml = sh.lengths + ZBL_ROUND;
    for (u32 k = 0; k < nb; k++) {
        const ZBlockPlan r = plan[k];
        const u64 limit = r.lit_end;
        if (r.type != 2) {
            if (out + r.size > limit) return false;
            for (u32 e = lane; e < r.size; e += 32) d[out + e] = r.type == 0 ? s[r.at + e] : s[r.at];
            out += r.size;
            __syncwarp();
            continue;
        }
        if (r.rs > dst_len - out) return false;
        const u8* lits = r.lit_type == 0 ? s + r.at + r.lh : d + (r.lit_end - r.rs);
        const u64 out0 = out;
        u32 lit_used = 0;
        for (u32 first = 0; first < r.nseq; first += ZBL_ROUND) {
            const u32 mine = first + lane * ZBL_CHECK_SEQS;
            const u32 cnt = mine < r.nseq ? min(ZBL_CHECK_SEQS, r.nseq - mine) : 0;
            bool wrong = false;
            if (cnt > 0) {
                const ZCheck c = cks[r.ck0 + mine / ZBL_CHECK_SEQS];
                ZSeqs z;
                zbl_tables(z, sh, tabs + r.tab, r.logs);
                z.bits.s = s + r.at + r.q;
                z.bits.len = r.size - r.q;
                z.bits.c = c.c;
                z.bits.ptr = c.ptr;
                z.bits.used = c.used;
                z.s_ll = c.s_ll;
                z.s_ml = c.s_ml;
                z.s_of = c.s_of;
                ZRep sym = {ZBL_SYM(0), ZBL_SYM(1), ZBL_SYM(2)};
                for (u32 t = 0; t < cnt; t++) {
                    if (z.of[z.s_of & z.mask_of].sym > 30) wrong = true;
                    const u32 at = lane * ZBL_CHECK_SEQS + t;
                    zstd_next_sequence(z, sym, mine + t + 1 < r.nseq, &round_ll[at], &round_ml[at], &rd.off[at]);
                }
                rd.exit[lane] = sym;
            }
            if (__ballot_sync(0xffffffffu, wrong)) return false;
            // A vote orders no memory: lane 0 reads every lane's rd.exit below (racecheck, run BD).
            __syncwarp();
            const u32 batches = min(32u, (r.nseq - first + ZBL_CHECK_SEQS - 1) / ZBL_CHECK_SEQS);
            if (lane == 0) {
                ZRep e = rep;
                for (u32 j = 0; j < batches; j++) {
                    rd.entry[j] = e;
                    const ZRep x = rd.exit[j];
                    e = {zbl_resolve(x.r0, e), zbl_resolve(x.r1, e), zbl_resolve(x.r2, e)};
                }
                rd.entry[batches] = e;
            }
            __syncwarp();
            if (cnt > 0) {
                const ZRep e = rd.entry[lane];
                for (u32 t = 0; t < cnt; t++) {
                    const u32 at = lane * ZBL_CHECK_SEQS + t;
                    rd.off[at] = zbl_resolve(rd.off[at], e);
                }
            }
            rep = rd.entry[batches];
            __syncwarp();
            for (u32 j = 0; j < batches; j++) {
                const u32 k2 = min(ZBL_CHECK_SEQS, r.nseq - (first + j * ZBL_CHECK_SEQS));
                ZBatch bt = bt0;
                bt.ll = round_ll + j * ZBL_CHECK_SEQS;
                bt.ml = round_ml + j * ZBL_CHECK_SEQS;
                bt.off = rd.off + j * ZBL_CHECK_SEQS;
                if (!zstd_run_batch(bt, k2, d, &out, lits, &lit_used, r.rs, 0, limit, lane)) return false;
            }
            __syncwarp();
        }
        // The literals after the last sequence.
        if (out + (r.rs - lit_used) > limit) return false;
        zstd_copy_forward(d + out, lits + lit_used, r.rs - lit_used, lane);
        out += r.rs - lit_used;
        if (out - out0 > block_max) return false;
        __syncwarp();
    }
    return out == dst_len;
}

// A body the blocks' decode did not take, where the kernel is told not to decode it whole (tests).
#define ZSTD_NOT_PLANNED 11u

// scratch[i]: body i's scratch (layout.rs zstd_blocks::scratch_bytes). One warp a body, as gp_unzstd.
// whole: decode a body the blocks' decode did not take whole (else its status is ZSTD_NOT_PLANNED).
extern "C" __global__ void __launch_bounds__(UNZSTD_THREADS)
    gp_unzstd_blocks(UnsnapItem* items, u32 n, const u64* scratch, u32 whole) {
    if (blockDim.x != UNZSTD_THREADS) __trap();
    __shared__ ZstdShared sh;
    __shared__ ZRound rd;
    const u32 lane = threadIdx.x;
    zstd_init_codes(sh, lane);
    for (u32 i = blockIdx.x; i < n; i += gridDim.x) {
        const UnsnapItem it = items[i];
        const u8* s = (const u8*)it.src;
        u8* d = (u8*)it.dst;
        u32 st = VALIDATE_OK;
        if (!zbl_body(sh, rd, s, it.src_len, d, it.dst_len, (u8*)scratch[i], lane)) {
            __syncwarp();
            st = whole ? zstd_body(sh, s, it.src_len, d, it.dst_len, lane) : ZSTD_NOT_PLANNED;
        }
        __syncwarp();
        if (lane == 0) items[i].status = st;
    }
}
