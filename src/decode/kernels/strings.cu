// BYTE_ARRAY values: dictionary indexing, value addresses and lengths, Arrow offsets, character copy.
// Host references: host_kernels/core.rs (dict_byte_array_index, byte_array_values, string_offsets,
// copy_strings).

namespace gpcore {

// Whether gp_copy_strings copies a view column's string of len bytes at src: not when the view holds
// it (12 bytes or fewer), nor when it lies in the column's own decompressed pages (view_pages).
__device__ inline bool view_copies(const ColumnDesc& col, u64 src, u32 len) {
    if (len <= 12) return false;
    const u64 lo = col.view_pages, n = col.view_pages_len;
    return !(lo != 0 && src >= lo && src - lo <= n && len <= n - (src - lo));
}

// Whether a view column's rows take their views from their dictionary entries (VIEW_DICT_VIEWS): no
// row is copied, and str_src and str_len are neither written nor read.
__device__ inline bool dict_views_column(const ColumnDesc& col) {
    return (col.view_flags & VIEW_DICT_VIEWS) != 0;
}

// Whether a page of such a column is as the flag promises: dictionary-encoded, its dictionary inside
// the column's own pages (so every entry's view can point at its bytes there).
__device__ inline bool dict_in_own_pages(const PageDesc& page, const ColumnDesc& col) {
    const u64 lo = col.view_pages, n = col.view_pages_len;
    return dictionary_encoding(page.encoding) && page.dict != 0 && page.dict_index != 0 && lo != 0 && page.dict >= lo && page.dict - lo <= n &&
           page.dict_len <= n - (page.dict - lo);
}

// Length of row i's string (0 for a null, and for every row of a page already in error, so the offsets
// of such a page stay monotone). Row k's value index must lie in [0, min(num_non_null, num_values)),
// else 0. A dictionary-views column copies no row: 0.
__device__ inline u32 string_row_len(const PageDesc& page, const ColumnDesc& col, u32 i) {
    if (page.error != 0 || dict_views_column(col)) return 0;
    const i64 k = page.max_def == 0 ? (i64)i : (i64)((const i32*)col.vidx)[page.row_start + i];
    if (k < 0 || k >= page.num_non_null || k >= page.num_values) return 0;
    const u32 len = ((const u32*)col.str_len)[page.row_start + k];
    // A view column's rows whose views hold or point at their bytes are not copied (gp_copy_strings).
    if ((col.view_flags & VIEW_IN_COPY) != 0 && !view_copies(col, ((const u64*)col.str_src)[page.row_start + k], len))
        return 0;
    return len;
}

// Whether the string kernels act on this page at all (a BYTE_ARRAY page whose rows lie in its column).
__device__ inline bool string_page(const PageDesc& page, const ColumnDesc& col) {
    return page.physical == PT_BYTE_ARRAY && rows_ok(page, col);
}

// First page of `column` or later in `pages` (sorted by column).
__device__ inline u32 first_page_of(const PageDesc* pages, u32 n, u64 column) {
    u32 lo = 0, hi = n;
    while (lo < hi) {
        const u32 mid = lo + ((hi - lo) >> 1);
        if ((u64)pages[mid].column < column) lo = mid + 1; else hi = mid;
    }
    return lo;
}


// The same walk, parallel: `walk_plain_byte_arrays` is one thread following the length prefixes, one
// dependent load per value (a 20,000-value page took about 1.5 ms on the H200, the longest kernel of
// a plain step). Here the stream is cut into ranges of WALK_RANGE bytes, WALK_TILE ranges at a time,
// one thread per range:
// 1. Each thread tabulates, for each of its range's first 64 bytes taken as a value's start, the chain
//    of prefixes from there to the range's end: values passed, and where it leaves (as an offset into
//    the next range's first 64 bytes, FAR beyond them, or STOPPED where a value could not be read).
//    Candidates are taken from the last byte down, so a chain whose first value ends inside the 64
//    bytes takes the rest from the entry already made there: the true chain is walked about once, and
//    a chain from a wrong start mostly stops at its first prefix (a "length" read from text, or from a
//    length's upper bytes, runs past the end).
// 2. Thread 0 joins the ranges in order: the true chain enters a range at one of those bytes whenever
//    the value crossing into it is under 61 bytes; otherwise (and after FAR) it follows the true chain
//    through that range itself, one dependent load a value. (A window of 32 bytes made TPC-H
//    l_comment's values of 10 to 43 characters cross it often, and each such join walked its range:
//    3.4 ms a launch in ncu for a lineitem step's 1 MB dictionaries, joins one after another.)
// 3. Each thread emits its range's values, whose indices the join counted.
//
// Same contract as walk_plain_byte_arrays when every value is found (returns NONE, emits each k once).
// When the join finds the stream short, the sequential walk runs instead and gives the exact index of
// the first missing value (its emits repeat the parallel ones with the same arguments).
//
// Several blocks may share one stream through a WalkChain (zeroed before they start): each takes the
// next tile from its ticket counter, tabulates it, waits until the tile before it is joined, joins its
// own and passes the chain on, then emits; so tiles are tabulated and emitted side by side and only the
// joins follow one another (one block per page walking its tiles one after the other made this the
// plain benchmark file's longest kernel: 0.77 ms a step in ncu, its 330 KB pages 3 tiles each). A
// block waits only for a tile whose ticket was taken before its own, by a block already running: no
// block waits for one that is not. The block joining the last tile says whether values are missing;
// only the block whose join finds the stream short walks it again and returns the index.

constexpr u32 WALK_RANGE = 512;
constexpr u32 WALK_TILE = 256;
constexpr u32 WALK_CANDIDATES = 64;
// A candidate's table entry (u16): values passed in bits 0-7 (at most WALK_RANGE / 4), the offset of
// its exit into the next range in bits 8-13, and two flags.
constexpr u32 CAND_FAR = 0x4000u;      // the exit lies past the next range's first WALK_CANDIDATES bytes
constexpr u32 CAND_STOPPED = 0x8000u;  // a value could not be read: the chain ends in the range
constexpr u32 WALK_STOPPED = 0x80000000u;  // follow_chain's count: the chain stopped
static_assert(WALK_CANDIDATES <= 64 && (WALK_CANDIDATES & (WALK_CANDIDATES - 1)) == 0,
              "an exit offset fits bits 8-13 of a table entry, below CAND_FAR");

struct ParWalkShared {
    u16 table[WALK_CANDIDATES * WALK_TILE];  // [candidate][range]: conflict-free for a warp's ranges
    u32 start[WALK_TILE];                    // the true chain's first start in the range
    u32 kbase[WALK_TILE];                    // index of that value
    u32 n[WALK_TILE];                        // values of the true chain starting in the range (0: none)
    u32 state;                               // after this block's join: 0 running, 1 all found, 2 short
    u32 ticket;                              // this block's tile
    u32 joined;                              // whether this block joined its tile (else: skip its emits)
    u32 found_short;                         // whether this block's join found the stream short
};

// A stream's walk shared by blocks: the next tile to take, how many tiles are joined, and where the
// join stands after them (the fields of ParWalkShared). Zero before the first block starts; read and
// written with atomics only (they live in L2, every block sees the same).
struct WalkChain {
    u32 ticket, ready, cur, done_k, state, pad[3];
};
// The host allocates WALK_CHAIN_BYTES a page and counts WALK_TILE_BYTES a tile (decode/exec_device.rs).
static_assert(sizeof(WalkChain) == 32, "WALK_CHAIN_BYTES in exec_device.rs");
static_assert((u64)WALK_TILE * WALK_RANGE == 131072, "WALK_TILE_BYTES in exec_device.rs");

union WalkSpace {
    WalkShared seq;
    ParWalkShared par;
};

// Follows the chain from p up to `end` (or until a value cannot be read): returns the position it
// left at and the values it passed (| WALK_STOPPED when it stopped).
__device__ inline void follow_chain(const u8* base, u32 len, u32 p, u32 end, u32* out_p, u32* out_c) {
    const u64 lo = (u64)base, hi = lo + len;
    u32 c = 0;
    while (p < end) {
        if (len - p < 4) { c |= WALK_STOPPED; break; }
        const u32 L = load_u32_in(lo + p, lo, hi);
        if (L > len - p - 4) { c |= WALK_STOPPED; break; }
        p += 4 + L;
        c++;
    }
    *out_p = p;
    *out_c = c;
}

// The table entry for a chain that left range [.., re) at `exit` having passed `passed` values.
__device__ inline u32 cand_exit(u32 passed, u32 exit, u32 re) {
    const u32 off = exit - re;
    return passed | (off < WALK_CANDIDATES ? off << 8 : CAND_FAR);
}

// Asks for the 128-byte line holding p in L1 without waiting for it (nothing in the CPU emulation).
__device__ inline void prefetch_line(const u8* p) {
#ifdef __CUDA_ARCH__
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#endif
}

// Every line of [from, to) within the stream's `len` bytes, one per thread of the block.
__device__ inline void prefetch_span(const u8* base, u32 len, u64 from, u64 to) {
    if (to > len) to = len;
    const u64 first = (from + (u64)threadIdx.x * 128);
    for (u64 a = first; a < to; a += (u64)blockDim.x * 128) prefetch_line(base + a);
}

template <typename Emit>
__device__ inline u32 walk_byte_arrays(WalkSpace& space, WalkChain* chain, const u8* base, u64 len64, u32 count,
                                       Emit emit) {
    ParWalkShared& sh = space.par;
    const u32 t = threadIdx.x;
    const u32 len = len64 > 0xffffffffull ? 0xffffffffu : (u32)len64;
    const u64 lo = (u64)base, hi = lo + len;
    constexpr u64 TILE_BYTES = (u64)WALK_TILE * WALK_RANGE;
    // The last tile's join says whether values are still missing (an empty stream has one, empty).
    const u32 ntiles = (u32)(((u64)len + TILE_BYTES - 1) / TILE_BYTES);
    const u32 last_tile = ntiles == 0 ? 0 : ntiles - 1;
    if (t == 0) sh.found_short = 0;
    for (;;) {
        if (t == 0) sh.ticket = atomicAdd(&chain->ticket, 1u);
        __syncthreads();
        const u32 j = sh.ticket;
        if (j > last_tile) break;  // past the end: nothing to wait for
        const u64 tile = (u64)j * TILE_BYTES;
        prefetch_span(base, len, tile, tile + TILE_BYTES + 4);
        // 1. Each range's candidates, from the last byte of its window down.
        for (u32 r = t; r < WALK_TILE; r += blockDim.x) {
            const u64 rs64 = tile + (u64)r * WALK_RANGE;
            if (rs64 >= len) continue;
            const u32 rs = (u32)rs64;
            const u32 re = len - rs > WALK_RANGE ? rs + WALK_RANGE : len;
            for (u32 c = WALK_CANDIDATES; c-- > 0;) {
                const u64 p64 = (u64)rs + c;
                u32 e;
                if (p64 >= re) {
                    // Past a short last range's end: no value starts here.
                    e = p64 < len ? cand_exit(0, (u32)p64, re) : CAND_STOPPED;
                } else {
                    const u32 p = (u32)p64;
                    const u32 L = len - p < 4 ? 0xffffffffu : load_u32_in(lo + p, lo, hi);
                    if (len - p < 4 || L > len - p - 4) {
                        e = CAND_STOPPED;
                    } else {
                        const u32 q = p + 4 + L;  // > p, so its entry (if in the window) is made
                        if (q < rs + WALK_CANDIDATES) {
                            e = (u32)sh.table[(q - rs) * WALK_TILE + r] + 1;
                        } else if (q >= re) {
                            e = cand_exit(1, q, re);
                        } else {
                            u32 x, k;
                            follow_chain(base, len, q, re, &x, &k);
                            e = (k & WALK_STOPPED) ? (CAND_STOPPED | ((k & 0xff) + 1))
                                                   : cand_exit(k + 1, x, re);
                        }
                    }
                }
                sh.table[c * WALK_TILE + r] = (u16)e;
            }
        }
        __syncthreads();
        // 2. Join: wait for the tiles before this one, then the true chain through this tile's ranges,
        // and pass the chain on.
        if (t == 0) {
            while (atomicAdd(&chain->ready, 0u) != j) {
#ifdef __CUDA_ARCH__
                __nanosleep(64);
#endif
            }
            __threadfence();
            u32 p = atomicAdd(&chain->cur, 0u), k = atomicAdd(&chain->done_k, 0u);
            u32 state = atomicAdd(&chain->state, 0u);
            sh.joined = state == 0;
            if (state == 0) {
                for (u32 r = 0; r < WALK_TILE; r++) {
                    const u64 rs64 = tile + (u64)r * WALK_RANGE;
                    sh.n[r] = 0;
                    if (state != 0 || rs64 >= len) continue;
                    if ((u64)p >= rs64 + WALK_RANGE) continue;  // no value starts in this range
                    const u32 rs = (u32)rs64;
                    const u32 re = len - rs > WALK_RANGE ? rs + WALK_RANGE : len;
                    const u32 off = p - rs;
                    u32 passed, exit;
                    bool stopped;
                    const u32 e = off < WALK_CANDIDATES ? sh.table[off * WALK_TILE + r] : CAND_FAR;
                    if (off < WALK_CANDIDATES && (e & CAND_FAR) == 0) {
                        passed = e & 0xff;
                        stopped = (e & CAND_STOPPED) != 0;
                        exit = re + ((e >> 8) & (WALK_CANDIDATES - 1));
                    } else {
                        // Entered past the window, or leaving far: follow the true chain through the range.
                        u32 c;
                        follow_chain(base, len, p, re, &exit, &c);
                        passed = c & ~WALK_STOPPED;
                        stopped = (c & WALK_STOPPED) != 0;
                    }
                    const u32 left = count - k;
                    sh.start[r] = p;
                    sh.kbase[r] = k;
                    sh.n[r] = passed < left ? passed : left;
                    if (passed >= left) {
                        state = 1;
                    } else if (stopped) {
                        state = 2;
                    }
                    k += sh.n[r];
                    p = exit;
                }
                // Every range joined and values are still missing.
                if (state == 0 && j == last_tile) state = 2;
                if (state == 2) sh.found_short = 1;
            }
            sh.state = state;
            atomicExch(&chain->cur, p);
            atomicExch(&chain->done_k, k);
            atomicExch(&chain->state, state);
            __threadfence();  // the position before the count that lets the next tile read it
            atomicExch(&chain->ready, j + 1);
        }
        __syncthreads();
        const u32 state = sh.state;
        if (sh.joined && state != 2) {
            // 3. Emit: a thread per range walks the true chain again.
            for (u32 r = t; r < WALK_TILE; r += blockDim.x) {
                u32 p = sh.start[r];
                const u32 k = sh.kbase[r], n = sh.n[r];
                for (u32 i = 0; i < n; i++) {
                    const u32 L = load_u32_in(lo + p, lo, hi);
                    emit(k + i, p + 4, L);
                    p += 4 + L;
                }
            }
        }
        __syncthreads();
        if (state != 0) break;
    }
    const bool found_short = sh.found_short != 0;
    __syncthreads();
    if (!found_short) return NONE;
    return walk_plain_byte_arrays(space.seq, base, len64, count, emit);
}

}  // namespace gpcore

// Blocks per dictionary (grid n × slices, block 256, no dynamic shared memory; 36 KiB static: the
// slices of page_slice). Walks `count` plain byte arrays (u32 LE length + bytes) of a BYTE_ARRAY
// dictionary page and writes index[e] = {offset of the bytes from data, length}, the dictionary's
// blocks sharing the walk through chains[dictionary] (WalkChain, zeroed by the caller). A value running
// past data_len: OVERRUN, detail = entry; the entries before it are written.
extern "C" __global__ void __launch_bounds__(256) gp_dict_byte_array_index(DictDesc* dicts, u32 n,
                                                                           gpcore::WalkChain* chains) {
    using namespace gpcore;
    require_block();
    const PageSlice ps = page_slice(n);
    if (ps.page >= n) return;
    DictDesc* d = &dicts[ps.page];
    const DictDesc dd = *d;
    if (dd.error != 0) return;
    __shared__ WalkSpace walk;
    DictEntry* index = (DictEntry*)dd.index;
    const u32 fail = walk_byte_arrays(walk, &chains[ps.page], (const u8*)dd.data, dd.data_len, dd.count,
                                            [&](u32 k, u32 off, u32 len) {
                                                DictEntry e;
                                                e.offset = off;
                                                e.len = len;
                                                index[k] = e;
                                            });
    if (threadIdx.x == 0 && fail != NONE) dict_error(d, ERR_OVERRUN, fail);
}

// Blocks per page (grid n × slices, block 256, no dynamic shared memory, 36 KiB static: page_slice);
// BYTE_ARRAY pages. For the page's k-th present value writes str_src[row_start + k] (address of its
// bytes) and str_len[row_start + k]: PLAIN walks the length-prefixed values, the page's blocks sharing
// the walk through chains[page] (WalkChain, zeroed by the caller; a value past values_len: OVERRUN,
// detail k, the values before it written); PLAIN_DICTIONARY / RLE_DICTIONARY take the u32 index from
// dense and the DictEntry from dict_index, the page's values 256 at a time to its blocks, round robin
// (dict or dict_index 0: MISSING_DICTIONARY; index >= dict_count: DICT_INDEX; entry past dict_len:
// OVERRUN; detail = k of the lowest failing value, every other value written).
// DELTA_LENGTH_BYTE_ARRAY / DELTA_BYTE_ARRAY pages are left to their decoders; any other encoding is
// BAD_ENCODING (detail = encoding).
extern "C" __global__ void __launch_bounds__(256) gp_byte_array_values(PageDesc* pages, u32 n, ColumnDesc* cols,
                                                                      gpcore::WalkChain* chains) {
    using namespace gpcore;
    require_block();
    const PageSlice ps = page_slice(n);
    if (ps.page >= n) return;
    PageDesc* pg = &pages[ps.page];
    const PageDesc page = *pg;
    const u32 t = threadIdx.x;
    if (page.error != 0 || page.physical != PT_BYTE_ARRAY) return;
    const u32 enc = page.encoding;
    if (enc == ENC_DELTA_LENGTH_BYTE_ARRAY || enc == ENC_DELTA_BYTE_ARRAY) return;
    const bool dict = dictionary_encoding(enc);
    if (enc != ENC_PLAIN && !dict) {
        if (t == 0) page_error(pg, ERR_BAD_ENCODING, enc);
        return;
    }
    const ColumnDesc col = cols[page.column];
    const u32 nn = page.num_non_null;
    if (!rows_ok(page, col) || nn > page.num_values || (dict && col.dense_width < 4)) {
        if (t == 0) page_error(pg, ERR_BAD_PAGE_SIZE, page.num_values);
        return;
    }
    if (nn == 0) return;
    if (dict_views_column(col)) {
        // gp_copy_strings takes its rows' views from the dictionary: nothing to write here.
        if (t == 0 && !dict_in_own_pages(page, col)) {
            if (dict && (page.dict == 0 || page.dict_index == 0)) page_error(pg, ERR_MISSING_DICTIONARY, 0);
            else page_error(pg, ERR_BAD_PAGE_SIZE, page.num_values);
        }
        return;
    }
    u64* src = (u64*)col.str_src + page.row_start;
    u32* lens = (u32*)col.str_len + page.row_start;
    __shared__ WalkSpace walk;
    __shared__ u32 first_bad;
    if (!dict) {
        const u64 values = page.values;
        const u32 fail = walk_byte_arrays(walk, &chains[ps.page], (const u8*)values, page.values_len, nn,
                                          [&](u32 k, u32 off, u32 len) {
                                              src[k] = values + off;
                                              lens[k] = len;
                                          });
        if (t == 0 && fail != NONE) page_error(pg, ERR_OVERRUN, fail);
        return;
    }
    if (page.dict == 0 || page.dict_index == 0) {
        if (t == 0) page_error(pg, ERR_MISSING_DICTIONARY, 0);
        return;
    }
    if (t == 0) first_bad = NONE;
    __syncthreads();
    const u32 dw = col.dense_width;
    const u8* dense = (const u8*)col.dense + (u64)page.row_start * dw;
    const bool idx_aligned = ((col.dense | dw) & 3) == 0;
    const DictEntry* entries = (const DictEntry*)page.dict_index;
    auto index_of = [&](u32 k) {
        const u8* ip = dense + (u64)k * dw;
        return idx_aligned ? *(const u32*)ip : load_u32_le(ip);
    };
    for (u64 k64 = (u64)ps.slice * BLOCK + t; k64 < nn; k64 += (u64)ps.slices * BLOCK) {
        const u32 k = (u32)k64;
        const u32 idx = index_of(k);
        if (idx >= page.dict_count) {
            atomicMin(&first_bad, k);
            continue;
        }
        const DictEntry e = entries[idx];
        if ((u64)e.offset + e.len > page.dict_len) {
            atomicMin(&first_bad, k);
            continue;
        }
        src[k] = page.dict + e.offset;
        lens[k] = e.len;
    }
    __syncthreads();
    if (t == 0) {
        const u32 k = page_slices_lowest(pg, ps.slices, first_bad);
        // The lowest failing value's code: its index past the dictionary, else its entry past the data.
        if (k != NONE) page_error(pg, index_of(k) >= page.dict_count ? ERR_DICT_INDEX : ERR_OVERRUN, k);
    }
}

// String offsets, step 1 of 3. Block per page (grid n, block 256, no dynamic shared memory):
// page_totals[p] = the sum of page p's row lengths (0 for a page that is not BYTE_ARRAY or whose rows
// are not in its column; a page in error counts its rows as empty). Every entry is written.
extern "C" __global__ void __launch_bounds__(256) gp_string_page_totals(const PageDesc* pages, u32 n,
                                                                       const ColumnDesc* cols, u64* page_totals) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    const PageDesc page = pages[blockIdx.x];
    __shared__ u64 scratch[32];
    u64 sum = 0;
    if (page.physical == PT_BYTE_ARRAY) {
        const ColumnDesc col = cols[page.column];
        if (string_page(page, col) && !dict_views_column(col)) {
            for (u32 i = threadIdx.x; i < page.num_values; i += BLOCK) sum += string_row_len(page, col, i);
        }
    }
    u64 total;
    block_exclusive_scan_u64(sum, scratch, &total);
    if (threadIdx.x == 0) page_totals[blockIdx.x] = total;
}

// String offsets, step 2 of 3. Block per column (grid ncols, block 256, no dynamic shared memory); pages
// sorted by column, then row. Turns page_totals, in place, into each page's base: the exclusive sum of
// the totals of the column's earlier pages. A BYTE_ARRAY column of i32 offsets whose total exceeds
// i32::MAX gets error = OFFSET_OVERFLOW (atomicCAS; an earlier error stays).
extern "C" __global__ void __launch_bounds__(256) gp_string_page_bases(const PageDesc* pages, u32 n, ColumnDesc* cols,
                                                                      u32 ncols, u64* page_totals) {
    using namespace gpcore;
    require_block();
    const u32 c = blockIdx.x;
    if (c >= ncols) return;
    const u32 lo = first_page_of(pages, n, c), hi = first_page_of(pages, n, (u64)c + 1);
    __shared__ u64 scratch[32];
    u64 carry = 0;
    for (u32 tile = lo; tile < hi; tile += BLOCK) {
        const u32 p = tile + threadIdx.x;
        const u64 v = p < hi ? page_totals[p] : 0;
        u64 total;
        const u64 excl = block_exclusive_scan_u64(v, scratch, &total);
        if (p < hi) page_totals[p] = carry + excl;
        carry += total;
    }
    if (threadIdx.x == 0 && cols[c].physical == PT_BYTE_ARRAY && !wide_offsets(cols[c]) && carry > 0x7fffffffull) {
        atomicCAS(&cols[c].error, 0u, ERR_OFFSET_OVERFLOW);
    }
}

// String offsets, step 3 of 3. Block per page (grid n, block 256, no dynamic shared memory): for a
// BYTE_ARRAY page whose rows lie in its column, and whose column has no error, writes
// out_offsets[row_start + i + 1] = page_bases[p] + the lengths of rows 0..=i (nulls and the rows of a
// page in error count 0), and out_offsets[0] = 0 from the page at row 0, as i64 where the column's
// offsets are wide (wide_offsets), else i32. Needs no chars buffer.
extern "C" __global__ void __launch_bounds__(256) gp_string_offsets(const PageDesc* pages, u32 n,
                                                                   const ColumnDesc* cols, const u64* page_bases) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    const PageDesc page = pages[blockIdx.x];
    if (page.physical != PT_BYTE_ARRAY) return;
    const ColumnDesc col = cols[page.column];
    if (col.error != 0 || !string_page(page, col)) return;
    const u32 t = threadIdx.x;
    const bool wide = wide_offsets(col);
    i32* offsets = (i32*)col.out_offsets;
    i64* offsets64 = (i64*)col.out_offsets;
    if (page.row_start == 0 && t == 0) {
        if (wide) {
            offsets64[0] = 0;
        } else {
            offsets[0] = 0;
        }
    }
    __shared__ u64 scratch[32];
    constexpr u32 ITEMS = 4;
    u64 carry = page_bases[blockIdx.x];
    if (dict_views_column(col)) {
        // No row copied: every offset is the page's base.
        for (u32 i = t; i < page.num_values; i += BLOCK) {
            if (wide) {
                offsets64[(u64)page.row_start + i + 1] = (i64)carry;
            } else {
                offsets[(u64)page.row_start + i + 1] = (i32)carry;
            }
        }
        return;
    }
    for (u32 tile = 0; tile < page.num_values; tile += ITEMS * BLOCK) {
        u32 l[ITEMS];
        u64 sum = 0;
#pragma unroll
        for (u32 j = 0; j < ITEMS; j++) {
            const u32 i = tile + ITEMS * t + j;
            l[j] = i < page.num_values ? string_row_len(page, col, i) : 0;
            sum += l[j];
        }
        u64 total;
        u64 run = carry + block_exclusive_scan_u64(sum, scratch, &total);
#pragma unroll
        for (u32 j = 0; j < ITEMS; j++) {
            const u32 i = tile + ITEMS * t + j;
            if (i < page.num_values) {
                run += l[j];
                if (wide) {
                    offsets64[(u64)page.row_start + i + 1] = (i64)run;
                } else {
                    offsets[(u64)page.row_start + i + 1] = (i32)run;
                }
            }
        }
        carry += total;
    }
}

namespace gpcore {

// Bytes of the UTF-8 sequence a lead byte starts (1 for ASCII), 0 for a byte no sequence starts with
// (a continuation byte, C0, C1, F5..FF).
__device__ inline u32 utf8_len(u8 b) {
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;
    if (b < 0xE0) return 2;
    if (b < 0xF0) return 3;
    if (b < 0xF5) return 4;
    return 0;
}

__device__ inline bool utf8_cont(u8 b) { return (b & 0xC0) == 0x80; }

// Whether byte p of chars[0, n) is where it may be in valid UTF-8: a lead byte followed by its whole,
// shortest-form, non-surrogate sequence of at most U+10FFFF; or a continuation byte that a lead byte
// at most 3 before it (with only continuation bytes between) claims.
__device__ inline bool utf8_ok_at(const u8* chars, u64 n, u64 p) {
    const u8 b = chars[p];
    if (utf8_cont(b)) {
        for (u64 k = 1; k <= 3 && k <= p; k++) {
            const u8 q = chars[p - k];
            if (!utf8_cont(q)) return utf8_len(q) > k;
        }
        return false;
    }
    const u32 len = utf8_len(b);
    if (len == 0 || p + len > n) return false;
    for (u32 k = 1; k < len; k++)
        if (!utf8_cont(chars[p + k])) return false;
    if (len >= 3) {
        const u8 c = chars[p + 1];
        if (b == 0xE0 && c < 0xA0) return false;  // overlong
        if (b == 0xED && c > 0x9F) return false;  // surrogate
        if (b == 0xF0 && c < 0x90) return false;  // overlong
        if (b == 0xF4 && c > 0x8F) return false;  // over U+10FFFF
    }
    return true;
}

// Whether the len bytes at s are valid UTF-8, lanes `lane`, `lane + lanes`, ... of the bytes checked
// by this thread (lanes 1: all of them).
__device__ inline bool utf8_string_ok(const u8* s, u32 len, u32 lane, u32 lanes) {
    for (u32 p = lane; p < len; p += lanes)
        if (!utf8_ok_at(s, len, p)) return false;
    return true;
}

// The longest string gp_copy_strings checks by its own thread a word at a time (ascii_in): 8 loads of
// 8 bytes; a longer one, or one not all ASCII, is walked by the whole warp (over 32 bytes) or the thread.
#define ASCII_WORDS_MAX 56u

// What gp_copy_strings does with a row: nothing (a null), fail it, write its view over its bytes
// where they are (VIEW_IN_COPY), or copy its bytes to the characters at `off`.
constexpr u32 ROW_NULL = 0, ROW_BAD = 1, ROW_IN_VIEW = 2, ROW_COPY = 3;
struct CopyRow {
    u32 what, len;
    u64 src, off;  // off: ROW_COPY, in the characters; ROW_IN_VIEW, in view_pages (0 for 12 bytes or fewer)
};

// Row i of a page for gp_copy_strings. Bad: a value index past num_non_null or the page's rows, a
// source of 0 with bytes to copy, or bytes that would land outside [0, chars_capacity).
__device__ inline CopyRow copy_row(const PageDesc& page, const ColumnDesc& col, u32 i) {
    CopyRow r{ROW_NULL, 0, 0, 0};
    const i64 k = page.max_def == 0 ? (i64)i : (i64)((const i32*)col.vidx)[page.row_start + i];
    if (k >= page.num_non_null || k >= page.num_values) {
        r.what = ROW_BAD;
        return r;
    }
    if (k < 0) return r;
    r.len = ((const u32*)col.str_len)[page.row_start + k];
    r.src = ((const u64*)col.str_src)[page.row_start + k];
    if (r.src == 0 && r.len > 0) {
        r.what = ROW_BAD;
        return r;
    }
    if ((col.view_flags & VIEW_IN_COPY) != 0 && !view_copies(col, r.src, r.len)) {
        r.what = ROW_IN_VIEW;
        r.off = r.len <= 12 ? 0 : r.src - col.view_pages;
        return r;
    }
    const i64 o = offset_at(col, (u64)page.row_start + i);
    if (o < 0 || (u64)o + r.len > col.chars_capacity) {
        r.what = ROW_BAD;
        return r;
    }
    r.what = ROW_COPY;
    r.off = (u64)o;
    return r;
}

// Maxes the warp's longest view length into *col.view_longest: one atomic a warp. Called by every lane.
__device__ inline void warp_max_longest(const ColumnDesc& col, u32 longest) {
    for (u32 m = 16; m > 0; m >>= 1) {
        const u32 other = __shfl_xor_sync(FULL_MASK, longest, m);
        longest = other > longest ? other : longest;
    }
    if ((threadIdx.x & 31) == 0 && longest > 0) atomicMax((u32*)col.view_longest, longest);
}

// A dictionary entry's view over the column's own pages (a dictionary-views column), its length, and
// whether its bytes failed the UTF-8 check (VIEW_CHECK_UTF8 only).
struct DictView {
    uint4 view;
    u32 len, not_utf8;
};

// Dictionaries of up to DICT_VIEWS_TABLE entries get their views in a table in shared memory, built by
// each block of the page: a row is then an index load, a table read and a 16-byte store, where it was
// a source, a length, its bytes read twice (view and check) and the offsets' reads of both.
constexpr u32 DICT_VIEWS_TABLE = 256;
struct DictViewsTable {
    uint4 view[DICT_VIEWS_TABLE];
    u32 len[DICT_VIEWS_TABLE];
    u32 not_utf8[DICT_VIEWS_TABLE];
};

// Entry idx (< dict_count) of a page whose dictionary lies in the column's own pages
// (dict_in_own_pages): false where its bytes are not inside the dictionary (gp_dict_byte_array_index
// never makes such an entry).
__device__ inline bool dict_entry_view(const PageDesc& page, const ColumnDesc& col, u32 idx, DictView* d) {
    const DictEntry e = ((const DictEntry*)page.dict_index)[idx];
    if ((u64)e.offset + e.len > page.dict_len) return false;
    const u64 lo = col.view_pages, hi = col.view_pages + col.view_pages_len;
    const u8* src = (const u8*)page.dict + e.offset;
    d->view = view_of_in(src, e.len, e.len <= 12 ? 0 : (u64)src - lo, 0, lo, hi);
    d->len = e.len;
    d->not_utf8 = (col.view_flags & VIEW_CHECK_UTF8) != 0 && !(e.len <= ASCII_WORDS_MAX && ascii_in(src, e.len, lo, hi)) &&
                  !utf8_string_ok(src, e.len, 0, 1);
    return true;
}

// Row i of a page of a dictionary-views column for gp_copy_strings: ROW_NULL; ROW_BAD for a value index
// past the page's values, a dictionary index past its entries, an entry outside the dictionary, or a
// page not as VIEW_DICT_VIEWS promises (`usable` false: gp_byte_array_values fails those pages first);
// else ROW_IN_VIEW, its entry's view in *d (from `table` where not null).
__device__ inline u32 dict_view_row(const PageDesc& page, const ColumnDesc& col, u32 i, bool usable,
                                    const DictViewsTable* table, DictView* d) {
    const i64 k = page.max_def == 0 ? (i64)i : (i64)((const i32*)col.vidx)[page.row_start + i];
    if (k >= page.num_non_null || k >= page.num_values) return ROW_BAD;
    if (k < 0) return ROW_NULL;
    if (!usable) return ROW_BAD;
    const u32 dw = col.dense_width;
    const u8* ip = (const u8*)col.dense + ((u64)page.row_start + (u64)k) * dw;
    const u32 idx = ((col.dense | dw) & 3) == 0 ? *(const u32*)ip : load_u32_le(ip);
    if (idx >= page.dict_count) return ROW_BAD;
    if (table != nullptr) {
        d->view = table->view[idx];
        d->len = table->len[idx];
        d->not_utf8 = table->not_utf8[idx];
        return d->len == NONE ? ROW_BAD : ROW_IN_VIEW;
    }
    return dict_entry_view(page, col, idx, d) ? ROW_IN_VIEW : ROW_BAD;
}

// gp_copy_strings over a page of a dictionary-views column (every block of the page): each row's view
// is its dictionary entry's (all zero for a null or a bad row); a bad row (dict_view_row), or one whose
// entry is not UTF-8, fails the page with the lowest such row (OVERRUN, or BAD_UTF8); every other row
// is written. No character is copied.
__device__ inline void copy_dict_views(PageDesc* pg, const PageDesc& page, const ColumnDesc& col, const PageSlice& ps) {
    __shared__ DictViewsTable table;
    __shared__ u32 first_bad;
    const u32 t = threadIdx.x;
    // Taken once for the page, not a row at a time.
    const bool usable = dict_in_own_pages(page, col) && col.dense_width >= 4;
    const bool tabled = usable && page.dict_count <= DICT_VIEWS_TABLE;
    if (t == 0) first_bad = NONE;
    if (tabled) {
        for (u32 j = t; j < page.dict_count; j += BLOCK) {
            DictView d{{0u, 0u, 0u, 0u}, 0, 0};
            const bool inside = dict_entry_view(page, col, j, &d);
            table.view[j] = d.view;
            table.len[j] = inside ? d.len : NONE;  // an entry's length is under 2^31: NONE marks it outside
            table.not_utf8[j] = d.not_utf8;
        }
    }
    __syncthreads();
    const DictViewsTable* from = tabled ? &table : nullptr;
    uint4* views = col.out_views != 0 ? (uint4*)col.out_views + page.row_start : nullptr;
    u32 longest = 0;
    for (u64 i64 = (u64)ps.slice * BLOCK + t; i64 < page.num_values; i64 += (u64)ps.slices * BLOCK) {
        const u32 i = (u32)i64;
        DictView d{{0u, 0u, 0u, 0u}, 0, 0};
        const u32 what = dict_view_row(page, col, i, usable, from, &d);
        if (what == ROW_BAD || (what == ROW_IN_VIEW && d.not_utf8)) atomicMin(&first_bad, i);
        if (what != ROW_IN_VIEW) d.view = uint4{0u, 0u, 0u, 0u};
        else if (d.len > longest) longest = d.len;
        if (views != nullptr) views[i] = d.view;
    }
    if (views != nullptr) warp_max_longest(col, longest);
    __syncthreads();
    if (t == 0) {
        const u32 bad = page_slices_lowest(pg, ps.slices, first_bad);
        if (bad != NONE) {
            DictView d{{0u, 0u, 0u, 0u}, 0, 0};
            page_error(pg, dict_view_row(page, col, bad, usable, nullptr, &d) == ROW_BAD ? ERR_OVERRUN : ERR_BAD_UTF8, bad);
        }
    }
}

}  // namespace gpcore

// Blocks per page (grid n × slices, block 256, no dynamic shared memory: page_slice): BYTE_ARRAY
// pages not encoded DELTA_BYTE_ARRAY, not in error, whose column has no error. Copies each present
// row's str_len bytes from str_src to out_values + out_offsets[row] (copy_row says which rows). A bad
// row (copy_row), or with VIEW_CHECK_UTF8 a present row that is not UTF-8: the page fails with the
// lowest such row (OVERRUN, or BAD_UTF8 where that row's bytes were in place but not UTF-8); every
// other row is done. Strings up to 32 bytes are copied (and checked) by their own thread, longer ones
// by the whole warp. A view's bytes in the column's own pages are read as words (view_of_in; ascii_in
// up to ASCII_WORDS_MAX bytes): read byte by byte, for the view and again for the UTF-8 check, they
// made this kernel 16.44 of lineitem SF10 snappy's 192 ms of kernels in ncu, 11.05 with words (run
// AC). A page's rows go to its blocks 256 at a time, round robin: one block per page took as long as
// one page's walk through its rows, each thread's value after value waiting on loads (0.35 ms a plain
// benchmark step, in ncu).
// Where the column has out_views, each row's 16-byte view is written too (a null's, and a failing
// row's, all zero), from the source bytes: length, then up to 12 bytes inline, or the first 4, the
// buffer and the offset: in view_pages (buffer 0) for a row left there, else in the characters
// (view_buffer + the segment as gp_strings_to_views has it); the longest length is max'ed into
// *view_longest. gp_strings_to_views then has nothing left to do for the column. With VIEW_IN_COPY
// only the rows view_copies names are copied, and the offsets count only them (string_row_len).
extern "C" __global__ void __launch_bounds__(256) gp_copy_strings(PageDesc* pages, u32 n, const ColumnDesc* cols) {
    using namespace gpcore;
    require_block();
    const PageSlice ps = page_slice(n);
    if (ps.page >= n) return;
    PageDesc* pg = &pages[ps.page];
    const PageDesc page = *pg;
    if (page.error != 0 || page.physical != PT_BYTE_ARRAY || page.encoding == ENC_DELTA_BYTE_ARRAY) return;
    const ColumnDesc col = cols[page.column];
    if (col.error != 0 || !rows_ok(page, col)) return;
    if (dict_views_column(col)) {
        copy_dict_views(pg, page, col, ps);
        return;
    }
    const u32 t = threadIdx.x, lane = t & 31, warp = t >> 5;
    __shared__ u32 first_bad;
    if (t == 0) first_bad = NONE;
    __syncthreads();
    const u64 chars = col.out_values;
    const bool check_utf8 = (col.view_flags & VIEW_CHECK_UTF8) != 0;
    uint4* views = col.out_views != 0 ? (uint4*)col.out_views + page.row_start : nullptr;
    // The column's own pages, where a view's bytes mostly lie: read a word at a time there.
    const u64 own_lo = col.view_pages, own_hi = col.view_pages == 0 ? 0 : col.view_pages + col.view_pages_len;
    u32 longest = 0;
    for (u64 wbase = (u64)ps.slice * BLOCK + warp * 32; wbase < page.num_values; wbase += (u64)ps.slices * BLOCK) {
        const u32 i = (u32)wbase + lane;
        CopyRow r{ROW_NULL, 0, 0, 0};
        // Whether the row's bytes still need the UTF-8 walk: not where the words covering them in the
        // own pages (up to ASCII_WORDS_MAX bytes, read by the row's own thread) are all ASCII.
        bool walk_utf8 = false;
        if (i < page.num_values) {
            r = copy_row(page, col, i);
            if (r.what == ROW_BAD) atomicMin(&first_bad, i);
            if (views != nullptr) {
                // From the source, which the copy below reads too (the characters land there later).
                uint4 v = {0u, 0u, 0u, 0u};
                if (r.what == ROW_IN_VIEW) {
                    v = view_of_in((const u8*)r.src, r.len, r.off, 0, own_lo, own_hi);
                } else if (r.what == ROW_COPY && r.len > 0) {
                    v = view_of((const u8*)r.src, r.len, r.off, col.view_segment);
                    if (r.len > 12) v.z += col.view_buffer;
                }
                views[i] = v;
                if (r.what >= ROW_IN_VIEW && r.len > longest) longest = r.len;
            }
            walk_utf8 = check_utf8 && r.what >= ROW_IN_VIEW &&
                        !(r.len <= ASCII_WORDS_MAX && ascii_in((const u8*)r.src, r.len, own_lo, own_hi));
            if (walk_utf8 && r.len <= 32 && !utf8_string_ok((const u8*)r.src, r.len, 0, 1)) atomicMin(&first_bad, i);
        }
        const bool copy = r.what == ROW_COPY && r.len > 0;
        const bool long_value = copy && r.len > 32;
        if (copy && !long_value) copy_bytes((u8*)(chars + r.off), (const u8*)r.src, r.len);
        u32 m = __ballot_sync(FULL_MASK, long_value);
        while (m) {
            const u32 l = __ffs(m) - 1;
            m &= m - 1;
            const u64 s = __shfl_sync(FULL_MASK, r.src, l), d = __shfl_sync(FULL_MASK, chars + r.off, l);
            const u32 ln = __shfl_sync(FULL_MASK, r.len, l);
            coop_copy((u8*)d, (const u8*)s, ln, lane, 32);
        }
        if (check_utf8) {
            // Strings over 32 bytes, the whole warp each.
            m = __ballot_sync(FULL_MASK, walk_utf8 && r.len > 32);
            while (m) {
                const u32 l = __ffs(m) - 1;
                m &= m - 1;
                const u64 s = __shfl_sync(FULL_MASK, r.src, l);
                const u32 ln = __shfl_sync(FULL_MASK, r.len, l);
                const bool ok = __ballot_sync(FULL_MASK, !utf8_string_ok((const u8*)s, ln, lane, 32)) == 0;
                if (!ok && lane == l) atomicMin(&first_bad, i);
            }
        }
    }
    // Every lane of the warp left the loop together.
    if (views != nullptr) warp_max_longest(col, longest);
    __syncthreads();
    if (t == 0) {
        const u32 bad = page_slices_lowest(pg, ps.slices, first_bad);
        if (bad != NONE) page_error(pg, copy_row(page, col, bad).what == ROW_BAD ? ERR_OVERRUN : ERR_BAD_UTF8, bad);
    }
}

// Grid-stride over the characters of one string column (any grid, any block). Every string is valid
// UTF-8 exactly when every byte passes utf8_ok_at and no string starts on a continuation byte. The
// first failing byte position (a string starting on a continuation byte fails at its first byte) is
// atomicMin'ed into *first_bad, which the host sets to ~0 first. Reads only chars[0, n) and
// offsets[0, rows] (i64 when offset_width is 8, else i32).
// Host reference: host_kernels/core.rs (validate_utf8).
extern "C" __global__ void gp_validate_utf8(const u8* chars, u64 n, const void* offsets, u32 offset_width, u64 rows,
                                            u64* first_bad) {
    using namespace gpcore;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 bad = ~0ull;
    if (((u64)chars & 15) == 0) {
        // 16 bytes a thread a step (a byte a thread a step took 1.7 ms, in ncu on the H200, for the
        // plain benchmark file's 650 MB of strings). A 16-byte run with no high bit is ASCII: valid,
        // and it claims no continuation byte.
        for (u64 p0 = 16 * start; p0 < n && bad == ~0ull; p0 += 16 * stride) {
            if (p0 + 16 <= n) {
                const uint4 v = *(const uint4*)(chars + p0);
                if (((v.x | v.y | v.z | v.w) & 0x80808080u) == 0) continue;
            }
            for (u64 p = p0; p < p0 + 16 && p < n; p++) {
                if (!utf8_ok_at(chars, n, p)) {
                    bad = p;  // later bytes of this thread only come after it
                    break;
                }
            }
        }
    } else {
        for (u64 p = start; p < n; p += stride) {
            if (!utf8_ok_at(chars, n, p)) {
                bad = p;
                break;  // later bytes of this thread only come after it
            }
        }
    }
    for (u64 r = start; r < rows; r += stride) {
        const bool wide = offset_width == 8;
        const i64 o = wide ? ((const i64*)offsets)[r] : (i64)((const i32*)offsets)[r];
        const i64 next = wide ? ((const i64*)offsets)[r + 1] : (i64)((const i32*)offsets)[r + 1];
        if (o >= 0 && (u64)o < n && next > o && utf8_cont(chars[o])) {
            bad = bad < (u64)o ? bad : (u64)o;
            break;
        }
    }
    if (bad != ~0ull) atomicMin(first_bad, bad);
}
