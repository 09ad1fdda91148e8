// DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT. Host
// references: src/decode/host_kernels/delta.rs, whose module comment states the accepted streams, the
// error codes and their details; both sides make the same checks in the same order.
//
// Every kernel here: one block per page (grid = the page count; blockDim.x = 256, or any multiple of 32
// up to GP_DELTA_THREADS), no dynamic shared memory. A block returns at once for a page of
// another encoding or one that already has an error. Launch order within a decode step, after
// gp_levels: gp_delta_binary_packed, gp_delta_length_byte_array, gp_delta_byte_array_lengths and
// gp_byte_stream_split (independent of each other); then the string offsets (from str_len); then
// gp_delta_byte_array_copy (which reads out_offsets).

// Largest DELTA_BINARY_PACKED block size accepted (MAX_BLOCK_SIZE in delta.rs).
#define DBP_MAX_BLOCK_SIZE (1ull << 31)
// Most threads per block (the shared arrays' size).
#define GP_DELTA_THREADS 256
// Miniblocks one chunk of at most GP_DELTA_THREADS deltas can touch: each holds at least 32, so a chunk
// covers at most one partial miniblock at each end and whole ones between.
#define DBP_MAX_SEGS (GP_DELTA_THREADS / 32 + 2)

__device__ inline u32 clamp_u32(u64 x) { return x > 0xffffffffull ? 0xffffffffu : (u32)x; }

__device__ inline bool fits_i32(i64 v) { return v >= -2147483648ll && v <= 2147483647ll; }

// The 4 bytes at p (little-endian), read bytewise: p need not be aligned (a FIXED_LEN_BYTE_ARRAY
// column's dense slots are its type length apart, and the GPU faults on a misaligned u32 read).
__device__ inline u32 load_le4(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

// Stores the low `width` bytes of v (little-endian) at p: one store when p is aligned for it.
__device__ inline void store_le(u8* p, u64 v, u32 width) {
    if (width == 8 && ((u64)p & 7) == 0) {
        *(u64*)p = v;
    } else if (width == 4 && ((u64)p & 3) == 0) {
        *(u32*)p = (u32)v;
    } else {
        for (u32 b = 0; b < width; b++) p[b] = (u8)(v >> (8 * b));
    }
}

// The smallest `key` among the threads with `bad` set, or ~0 when none (collective).
__device__ inline u64 block_first_bad(bool bad, u64 key, u64* slot) {
    if (threadIdx.x == 0) *slot = ~0ull;
    __syncthreads();
    if (bad) atomicMin(slot, key);
    __syncthreads();
    u64 r = *slot;
    __syncthreads();
    return r;
}

// ---- DELTA_BINARY_PACKED core ----

// A run of a chunk's deltas from one miniblock: thread `start` of the chunk takes the delta at bit
// `bit`, the next thread the one `width` bits on, ...
struct DbpSeg {
    u64 bit;
    u64 min_delta;
    u32 start;
    u32 width;
};

// A DELTA_BINARY_PACKED stream being decoded by a block (in shared memory). The walk fields (the twin
// of `Dbp` in delta.rs) are touched by thread 0 only; the others read the header fields, the segments
// and the error after a barrier.
struct DbpState {
    const u8* base;  // the page's values; offsets below count from here
    u64 len;         // bytes at base
    u32 bits;        // 32 or 64
    u32 err, err_detail;
    u32 nseg;
    u64 vpm, mini_count, total, first, header_end;
    // walk
    u64 mini_idx, widths_pos, mini_data, min_delta, used;
    u32 width, in_block;
    u64 end;
    DbpSeg seg[DBP_MAX_SEGS];
    u64 scratch[32];
};

// Thread 0: records the first error of the stream.
__device__ inline void dbp_fail(DbpState& s, u32 code, u64 detail) {
    if (s.err == 0) {
        s.err = code;
        s.err_detail = clamp_u32(detail);
    }
}

// Thread 0: a ULEB128 at *pos. Overrun when it runs past the end, BAD_DELTA_HEADER when longer than
// 10 bytes (then 10 bytes were there to read); the detail is where it starts.
__device__ inline bool dbp_uleb(DbpState& s, u64* pos, u64* out) {
    u64 at = *pos;
    if (read_uleb128(s.base, pos, s.len, out)) return true;
    u64 avail = at < s.len ? s.len - at : 0;
    dbp_fail(s, avail >= 10 ? ERR_BAD_DELTA_HEADER : ERR_OVERRUN, at);
    return false;
}

__device__ inline u64 dbp_mini_bytes(const DbpState& s) { return (u64)s.width * s.vpm / 8; }

// Thread 0: moves to the next miniblock (reading a block header when the block is done), reads its width.
__device__ bool dbp_next_miniblock(DbpState& s) {
    if (s.in_block && s.mini_idx + 1 < s.mini_count) {
        s.mini_data += dbp_mini_bytes(s);
        s.mini_idx += 1;
    } else {
        u64 at = s.in_block ? s.mini_data + dbp_mini_bytes(s) : s.header_end;
        u64 pos = at, raw;
        if (!dbp_uleb(s, &pos, &raw)) return false;
        i64 min_delta = zigzag_decode(raw);
        if (s.bits == 32 && !fits_i32(min_delta)) {
            dbp_fail(s, ERR_BAD_DELTA_HEADER, at);
            return false;
        }
        // pos <= len after a successful read.
        if (s.len - pos < s.mini_count) {
            dbp_fail(s, ERR_OVERRUN, pos);
            return false;
        }
        s.min_delta = (u64)min_delta;
        s.widths_pos = pos;
        s.mini_data = pos + s.mini_count;
        s.mini_idx = 0;
        s.in_block = 1;
    }
    u32 width = s.base[s.widths_pos + s.mini_idx];
    if (width > s.bits) {
        dbp_fail(s, ERR_BAD_BIT_WIDTH, width);
        return false;
    }
    s.width = width;
    s.used = 0;
    return true;
}

// Thread 0: takes n deltas (at most what is left) from the current miniblock, checking their bits lie
// in the stream; *bit gets the first's bit offset.
__device__ inline bool dbp_take(DbpState& s, u64 n, u64* bit) {
    u64 first_bit = s.mini_data * 8 + s.used * s.width;
    u64 end_bit = first_bit + n * s.width;
    if (end_bit > s.len * 8) {
        dbp_fail(s, ERR_OVERRUN, s.mini_data);
        return false;
    }
    s.used += n;
    *bit = first_bit;
    return true;
}

// Collective: reads and checks the header of the stream at offset `start` of (base, len), wanting
// `count` values; with expect_total != ~0, the header must declare exactly that many. False (with
// s.err set) on an error.
__device__ bool dbp_begin(DbpState& s, const u8* base, u64 len, u64 start, u64 count, u32 bits,
                          u64 expect_total) {
    if (threadIdx.x == 0) {
        s.base = base;
        s.len = len;
        s.bits = bits;
        s.err = 0;
        s.err_detail = 0;
        s.in_block = 0;
        s.mini_idx = 0;
        s.widths_pos = 0;
        s.mini_data = 0;
        s.width = 0;
        s.min_delta = 0;
        u64 pos = start, block_size, mini_count, total, first_raw;
        u64 mini_at = 0, first_at = 0;
        bool ok = dbp_uleb(s, &pos, &block_size);
        if (ok) { mini_at = pos; ok = dbp_uleb(s, &pos, &mini_count); }
        if (ok) ok = dbp_uleb(s, &pos, &total);
        if (ok) { first_at = pos; ok = dbp_uleb(s, &pos, &first_raw); }
        if (ok) {
            i64 first = zigzag_decode(first_raw);
            if (block_size == 0 || block_size % 128 != 0 || block_size > DBP_MAX_BLOCK_SIZE) {
                dbp_fail(s, ERR_BAD_DELTA_HEADER, start);
            } else if (mini_count == 0 || block_size % mini_count != 0 || (block_size / mini_count) % 32 != 0) {
                dbp_fail(s, ERR_BAD_DELTA_HEADER, mini_at);
            } else if (bits == 32 && !fits_i32(first)) {
                dbp_fail(s, ERR_BAD_DELTA_HEADER, first_at);
            } else if (expect_total != ~0ull && total != expect_total) {
                dbp_fail(s, ERR_BAD_DELTA_HEADER, start);
            } else if (total < count) {
                dbp_fail(s, ERR_SHORT_PAGE, total);
            } else {
                s.vpm = block_size / mini_count;
                s.mini_count = mini_count;
                s.total = total;
                s.first = (u64)first;
                s.header_end = pos;
                s.used = s.vpm;  // the first delta reads a block header
            }
        }
    }
    __syncthreads();
    const bool ok = s.err == 0;
    __syncthreads();  // all have read s.err before thread 0 walks on (and may set it)
    return ok;
}

// Collective: values k0 .. min(k0 + blockDim.x, count) - 1, one per thread (thread t gets value k0 + t
// in *value; threads past the end get the last value). *carry is the value before k0 (the first value
// for k0 == 0, whose delta is taken as 0); it is advanced past the chunk. False (s.err set) on an error.
__device__ bool dbp_chunk(DbpState& s, u64 k0, u64 count, u64* carry, u64* value) {
    const u32 n_here = (u32)min((u64)blockDim.x, count - k0);
    if (threadIdx.x == 0) {
        s.nseg = 0;
        u32 t = k0 == 0 ? 1 : 0;
        while (t < n_here) {
            if (s.used == s.vpm && !dbp_next_miniblock(s)) break;
            u64 n = min((u64)(n_here - t), s.vpm - s.used);
            u64 bit;
            if (!dbp_take(s, n, &bit)) break;
            if (s.nseg == DBP_MAX_SEGS) {  // cannot happen: miniblocks hold >= 32 values
                dbp_fail(s, ERR_BAD_DELTA_HEADER, s.mini_data);
                break;
            }
            s.seg[s.nseg].bit = bit;
            s.seg[s.nseg].min_delta = s.min_delta;
            s.seg[s.nseg].start = t;
            s.seg[s.nseg].width = s.width;
            s.nseg++;
            t += (u32)n;
        }
    }
    __syncthreads();
    if (s.err != 0) return false;
    const u32 t = threadIdx.x;
    u64 d = 0;
    if (t < n_here && k0 + t > 0) {
        u32 i = 0;
        while (i + 1 < s.nseg && s.seg[i + 1].start <= t) i++;
        const DbpSeg g = s.seg[i];
        d = g.min_delta + read_bits(s.base, s.len, g.bit + (u64)(t - g.start) * g.width, g.width);
    }
    u64 total;
    u64 incl = block_inclusive_scan<u64>(d, s.scratch, &total);
    *value = *carry + incl;
    *carry += total;
    return true;
}

// Collective, after the chunks: with to_end, walks (without decoding) past the header's values after
// the first `decoded`, checking them as a decode would. Then s.end is where the stream ends (after
// the last miniblock used, or the header when none was). False (s.err set) on an error.
__device__ bool dbp_finish(DbpState& s, u64 decoded, bool to_end) {
    if (threadIdx.x == 0 && s.err == 0) {
        if (to_end) {
            u64 left = max(s.total, 1ull) - max(decoded, 1ull);
            while (left > 0) {
                if (s.used == s.vpm && !dbp_next_miniblock(s)) break;
                u64 n = min(left, s.vpm - s.used);
                u64 bit;
                if (!dbp_take(s, n, &bit)) break;
                left -= n;
            }
        }
        s.end = s.in_block ? s.mini_data + dbp_mini_bytes(s) : s.header_end;
    }
    __syncthreads();
    const bool ok = s.err == 0;
    __syncthreads();  // all have read s.err before thread 0 may start another stream in s
    return ok;
}

// Collective: decodes `count` values of the DELTA_BINARY_PACKED stream at `start` of (base, len),
// handing each chunk to sink(k0, n_here, value) (called by every thread; thread t holds value k0 + t
// when t < n_here). Returns false on an error (in s.err / s.err_detail); else s.end is the stream's end
// (see dbp_finish) and s.total the header's count.
template <class Sink>
__device__ bool dbp_decode(DbpState& s, const u8* base, u64 len, u64 start, u64 count, u32 bits,
                           bool to_end, u64 expect_total, Sink& sink) {
    if (!dbp_begin(s, base, len, start, count, bits, expect_total)) return false;
    u64 carry = s.first;
    for (u64 k0 = 0; k0 < count; k0 += blockDim.x) {
        u64 v;
        if (!dbp_chunk(s, k0, count, &carry, &v)) return false;
        sink(k0, (u32)min((u64)blockDim.x, count - k0), v);
    }
    return dbp_finish(s, count, to_end);
}

// Writes value k (low `width` bytes) to the column's dense buffer at row_start + k.
struct DenseSink {
    u8* dense;
    u64 dense_width, row0;
    u32 width;
    __device__ void operator()(u64 k0, u32 n_here, u64 v) {
        if (threadIdx.x < n_here) store_le(dense + (row0 + k0 + threadIdx.x) * dense_width, v, width);
    }
};

// Writes value k as a u32 to an array at row_start + k (raw lengths).
struct U32Sink {
    u32* out;
    u64 row0;
    __device__ void operator()(u64 k0, u32 n_here, u64 v) {
        if (threadIdx.x < n_here) out[row0 + k0 + threadIdx.x] = (u32)v;
    }
};

// Thread 0 records the stream's error on the page.
__device__ inline void dbp_report(PageDesc* page, const DbpState& s) {
    if (threadIdx.x == 0 && s.err != 0) page_error(page, s.err, s.err_detail);
}

#define PT_BIT(t) (1u << (t))

// The page this block decodes, or null: null for a page of another encoding or one with an error
// already, and (recording BAD_ENCODING, detail the type) for one whose physical type is not in the
// mask `physicals` of PT_BIT()s. Uniform across the block.
__device__ inline PageDesc* delta_page(PageDesc* pages, u32 n, u32 encoding, u32 physicals) {
    if (blockIdx.x >= n) return nullptr;
    PageDesc* page = &pages[blockIdx.x];
    if (page->encoding != encoding || page->error != 0) return nullptr;
    if (page->physical > 31 || (PT_BIT(page->physical) & physicals) == 0) {
        if (threadIdx.x == 0) page_error(page, ERR_BAD_ENCODING, page->physical);
        return nullptr;
    }
    return page;
}

// ---- kernels ----

// DELTA_BINARY_PACKED pages of INT32/INT64 columns: num_non_null values to
// dense + (row_start + k) * dense_width (4 or 8 bytes). Another type: BAD_ENCODING (detail: the type).
extern "C" __global__ void __launch_bounds__(GP_DELTA_THREADS)
gp_delta_binary_packed(PageDesc* pages, u32 n, ColumnDesc* cols) {
    PageDesc* page = delta_page(pages, n, ENC_DELTA_BINARY_PACKED, PT_BIT(PT_INT32) | PT_BIT(PT_INT64));
    if (!page) return;
    const ColumnDesc* col = &cols[page->column];
    const u32 bits = page->physical == PT_INT32 ? 32 : 64;
    __shared__ DbpState s;
    DenseSink sink{(u8*)col->dense, col->dense_width, page->row_start, bits / 8};
    if (!dbp_decode(s, (const u8*)page->values, page->values_len, 0, page->num_non_null, bits, false, ~0ull,
                    sink)) {
        dbp_report(page, s);
    }
}

// After a length stream of num_non_null values ending at `end` (raw lengths in str_len[row0 + k]):
// checks each length (and, with `prefix_dense`, DELTA_BYTE_ARRAY's prefix length in dense) in order
// and writes str_src (and, for DELTA_BYTE_ARRAY, str_len = prefix + suffix). The first bad value
// (lowest k; at one k a bad prefix before a bad length) is the page's error. Collective.
__device__ void delta_lengths_to_sources(PageDesc* page, const ColumnDesc* col, u64 end, const u8* prefix_dense,
                                         u64* scratch, u64* slot, i64* sh_len) {
    const u64 len = page->values_len, row0 = page->row_start, count = page->num_non_null;
    if (end > len) {
        if (threadIdx.x == 0) page_error(page, ERR_OVERRUN, clamp_u32(end));
        return;
    }
    const u64 avail = len - end;
    u32* str_len = (u32*)col->str_len;
    u64* str_src = (u64*)col->str_src;
    u64 cum = 0;       // suffix bytes before this chunk
    i64 prev_len = 0;  // length of the value before this chunk
    for (u64 k0 = 0; k0 < count; k0 += blockDim.x) {
        const u32 n_here = (u32)min((u64)blockDim.x, count - k0);
        const u32 t = threadIdx.x;
        const u64 k = k0 + t;
        const bool valid = t < n_here;
        const i32 sl = valid ? (i32)str_len[row0 + k] : 0;
        i32 p = 0;
        if (valid && prefix_dense) p = (i32)load_le4(prefix_dense + (row0 + k) * col->dense_width);
        const i64 value_len = (i64)p + sl;
        sh_len[t] = value_len;
        __syncthreads();
        const i64 before = t == 0 ? prev_len : sh_len[t - 1];
        const i64 chunk_last = sh_len[n_here - 1];
        const u64 sv = (valid && sl >= 0) ? (u64)sl : 0;
        u64 total;
        const u64 off = cum + block_inclusive_scan<u64>(sv, scratch, &total) - sv;
        const bool bad_prefix = valid && prefix_dense && (p < 0 || (i64)p > before);
        const bool bad_len = valid && (sl < 0 || off + sv > avail);
        const u64 first = block_first_bad(bad_prefix || bad_len, (k << 1) | (bad_prefix ? 0 : 1), slot);
        if (first != ~0ull) {
            if (threadIdx.x == 0) page_error(page, (first & 1) ? ERR_OVERRUN : ERR_BAD_PREFIX, clamp_u32(first >> 1));
            return;
        }
        if (valid) {
            str_src[row0 + k] = page->values + end + off;
            if (prefix_dense) str_len[row0 + k] = (u32)value_len;
        }
        cum += total;
        prev_len = chunk_last;
    }
}

// DELTA_LENGTH_BYTE_ARRAY pages of BYTE_ARRAY columns: per present value k, str_len[row_start + k]
// (its length) and str_src[row_start + k] (the address of its bytes). Another type: BAD_ENCODING.
extern "C" __global__ void __launch_bounds__(GP_DELTA_THREADS)
gp_delta_length_byte_array(PageDesc* pages, u32 n, ColumnDesc* cols) {
    PageDesc* page = delta_page(pages, n, ENC_DELTA_LENGTH_BYTE_ARRAY, PT_BIT(PT_BYTE_ARRAY));
    if (!page) return;
    const ColumnDesc* col = &cols[page->column];
    __shared__ DbpState s;
    __shared__ u64 slot;
    __shared__ i64 sh_len[GP_DELTA_THREADS];
    U32Sink lengths{(u32*)col->str_len, page->row_start};
    if (!dbp_decode(s, (const u8*)page->values, page->values_len, 0, page->num_non_null, 32, true, ~0ull,
                    lengths)) {
        dbp_report(page, s);
        return;
    }
    delta_lengths_to_sources(page, col, s.end, nullptr, s.scratch, &slot, sh_len);
}

// The prefix and suffix streams of a DELTA_BYTE_ARRAY page: per present value k (at row_start + k), the
// prefix length as u32 at dense (read back bytewise: a FIXED_LEN_BYTE_ARRAY column's dense_width, its
// type length, leaves the slots unaligned, which the GPU faults on), str_len = prefix + suffix
// length, str_src = the address of the suffix's bytes. False (the page's error recorded) on an
// error. Collective.
__device__ bool delta_byte_array_streams(PageDesc* page, const ColumnDesc* col) {
    const u8* values = (const u8*)page->values;
    const u64 len = page->values_len, count = page->num_non_null;
    __shared__ DbpState s;
    __shared__ u64 slot;
    __shared__ i64 sh_len[GP_DELTA_THREADS];
    DenseSink prefixes{(u8*)col->dense, col->dense_width, page->row_start, 4};
    if (!dbp_decode(s, values, len, 0, count, 32, true, ~0ull, prefixes)) {
        dbp_report(page, s);
        return false;
    }
    const u64 suffix_start = s.end, prefix_total = s.total;
    __syncthreads();  // every thread has read s before thread 0 starts the suffix stream
    U32Sink suffixes{(u32*)col->str_len, page->row_start};
    if (!dbp_decode(s, values, len, suffix_start, count, 32, true, prefix_total, suffixes)) {
        dbp_report(page, s);
        return false;
    }
    delta_lengths_to_sources(page, col, s.end, (const u8*)col->dense, s.scratch, &slot, sh_len);
    __syncthreads();  // thread 0's error, if any, is seen by all
    return *(volatile const u32*)&page->error == 0;
}

// DELTA_BYTE_ARRAY pages of FIXED_LEN_BYTE_ARRAY columns, whole (before gp_gather_fixed): the streams
// as delta_byte_array_streams, then every value's length must be type_len (else BAD_PREFIX, detail the
// lowest such value k), and value k is rebuilt into dense + (row_start + k) * dense_width over its
// prefix length (every prefix of a window is read before the window's values are written), for
// gp_gather_fixed to take to its row. Values go in windows of blockDim.x; a value's prefix bytes come
// from the suffix of the nearest earlier value of the window whose prefix does not cover them, else
// from the previous window's last value, already written. BYTE_ARRAY pages: nothing.
extern "C" __global__ void __launch_bounds__(GP_DELTA_THREADS)
gp_delta_byte_array_fixed(PageDesc* pages, u32 n, ColumnDesc* cols) {
    PageDesc* page =
        delta_page(pages, n, ENC_DELTA_BYTE_ARRAY, PT_BIT(PT_BYTE_ARRAY) | PT_BIT(PT_FIXED_LEN_BYTE_ARRAY));
    if (!page || page->physical != PT_FIXED_LEN_BYTE_ARRAY) return;
    const ColumnDesc* col = &cols[page->column];
    if (col->dense_width < 4 || page->type_len > col->dense_width) {
        if (threadIdx.x == 0) page_error(page, ERR_BAD_ENCODING, page->physical);
        return;
    }
    if (!delta_byte_array_streams(page, col)) return;
    const u64 row0 = page->row_start, count = page->num_non_null, dw = col->dense_width;
    const u32 tl = page->type_len;
    u8* dense = (u8*)col->dense;
    const u32* str_len = (const u32*)col->str_len;
    const u64* str_src = (const u64*)col->str_src;
    __shared__ u32 sh_p[GP_DELTA_THREADS];
    __shared__ u64 sh_src[GP_DELTA_THREADS];
    __shared__ u64 bad_slot;
    for (u64 k0 = 0; k0 < count; k0 += blockDim.x) {
        const u32 t = threadIdx.x;
        const u64 k = k0 + t;
        const bool here = k < count;
        u32 p = 0, vlen = 0;
        if (here) {
            p = load_le4(dense + (row0 + k) * dw);
            vlen = str_len[row0 + k];
            sh_p[t] = p;
            sh_src[t] = str_src[row0 + k];
        }
        // Collective (its barriers also order the reads above before the writes below).
        const u64 first = block_first_bad(here && vlen != tl, k, &bad_slot);
        if (first != ~0ull) {
            if (t == 0) page_error(page, ERR_BAD_PREFIX, clamp_u32(first));
            return;
        }
        if (here) {
            // Every prefix was checked against the previous value's length (type_len), so each byte
            // below stays inside its value.
            u8* dst = dense + (row0 + k) * dw;
            const u8* suffix = (const u8*)sh_src[t];
            for (u32 j = p; j < tl; j++) dst[j] = suffix[j - p];
            u32 limit = p;  // bytes [0, limit) still to fill
            for (i32 m = (i32)t - 1; m >= 0 && limit > 0; m--) {
                const u32 pm = sh_p[m];
                if (pm < limit) {
                    const u8* src = (const u8*)sh_src[m];
                    for (u32 j = pm; j < limit; j++) dst[j] = src[j - pm];
                    limit = pm;
                }
            }
            if (limit > 0 && k0 > 0) {
                const u8* prev = dense + (row0 + k0 - 1) * dw;
                for (u32 j = 0; j < limit; j++) dst[j] = prev[j];
            }
        }
        __syncthreads();  // this window's values are written before the next reads them
    }
}

// DELTA_BYTE_ARRAY pages of BYTE_ARRAY columns (FIXED_LEN_BYTE_ARRAY ones are gp_delta_byte_array_fixed's,
// skipped here): per present value k (at row_start + k), the prefix length as u32 at dense,
// str_len = prefix + suffix length, str_src = the address of the suffix's bytes.
extern "C" __global__ void __launch_bounds__(GP_DELTA_THREADS)
gp_delta_byte_array_lengths(PageDesc* pages, u32 n, ColumnDesc* cols) {
    PageDesc* page =
        delta_page(pages, n, ENC_DELTA_BYTE_ARRAY, PT_BIT(PT_BYTE_ARRAY) | PT_BIT(PT_FIXED_LEN_BYTE_ARRAY));
    if (!page || page->physical != PT_BYTE_ARRAY) return;
    delta_byte_array_streams(page, &cols[page->column]);
}

// DELTA_BYTE_ARRAY pages, after gp_delta_byte_array_lengths and the offsets: rebuilds each present
// value into out_values at its row's out_offsets. Rows go in windows of blockDim.x; a value's prefix
// bytes come from the suffix of the nearest earlier value of the window whose prefix does not cover
// them (so a window needs no order among its threads), else from the previous window's last value,
// already written. Errors (detail: the row in the page; the lowest row wins, at one row OVERRUN before
// BAD_PREFIX): OVERRUN when the present rows' values are not 0, 1, 2, ... below num_non_null, or a
// row's offsets disagree with its length or leave chars_capacity; BAD_PREFIX when a prefix exceeds its
// value's or the previous value's length.
extern "C" __global__ void __launch_bounds__(GP_DELTA_THREADS)
gp_delta_byte_array_copy(PageDesc* pages, u32 n, ColumnDesc* cols) {
    PageDesc* page =
        delta_page(pages, n, ENC_DELTA_BYTE_ARRAY, PT_BIT(PT_BYTE_ARRAY) | PT_BIT(PT_FIXED_LEN_BYTE_ARRAY));
    if (!page || page->physical != PT_BYTE_ARRAY) return;
    const ColumnDesc* col = &cols[page->column];
    const u64 row0 = page->row_start, rows = page->num_values, count = page->num_non_null;
    const i32* vidx = (const i32*)col->vidx;
    const u32* str_len = (const u32*)col->str_len;
    const u64* str_src = (const u64*)col->str_src;
    const u8* dense = (const u8*)col->dense;
    u8* out = (u8*)col->out_values;
    // Per present value of the window, by its rank: prefix, length, suffix address, output offset.
    __shared__ u32 sh_p[GP_DELTA_THREADS], sh_len[GP_DELTA_THREADS];
    __shared__ u64 sh_src[GP_DELTA_THREADS], sh_off[GP_DELTA_THREADS];
    __shared__ u32 scan_scratch[32];
    __shared__ u64 slot;
    u64 next_k = 0, prev_off = 0, prev_len = 0;  // the previous windows' values
    for (u64 i0 = 0; i0 < rows; i0 += blockDim.x) {
        const u32 t = threadIdx.x;
        const u64 i = i0 + t;
        i64 k = -1;
        if (i < rows) k = page->max_def == 0 ? (i64)i : (i64)vidx[row0 + i];
        const bool present = k >= 0;
        u32 present_here;
        const u32 r = block_exclusive_scan(present ? 1u : 0u, scan_scratch, &present_here);
        bool bad = present && ((u64)k != next_k + r || (u64)k >= count);
        u32 p = 0, vlen = 0;
        if (present && !bad) {
            const u64 at = row0 + (u64)k;
            p = load_le4(dense + at * col->dense_width);
            vlen = str_len[at];
            const i64 off = offset_at(*col, row0 + i), next = offset_at(*col, row0 + i + 1);
            bad = off < 0 || next != off + (i64)vlen || (u64)off + vlen > col->chars_capacity;
            sh_p[r] = p;
            sh_len[r] = vlen;
            sh_src[r] = str_src[at];
            sh_off[r] = (u64)off;
        }
        __syncthreads();
        bool bad_prefix = false;
        if (present && !bad) {
            const u64 before = r == 0 ? prev_len : sh_len[r - 1];
            bad_prefix = p > vlen || p > before;
        }
        u64 last_off = 0, last_len = 0;
        if (present_here > 0) {
            last_off = sh_off[present_here - 1];
            last_len = sh_len[present_here - 1];
        }
        const u64 first = block_first_bad(bad || bad_prefix, (i << 1) | (bad ? 0 : 1), &slot);
        if (first != ~0ull) {
            if (threadIdx.x == 0) page_error(page, (first & 1) ? ERR_BAD_PREFIX : ERR_OVERRUN, clamp_u32(first >> 1));
            return;
        }
        if (present) {
            // Every value of the window and the one before it passed the checks, so each prefix fits in
            // the value it is taken from and every byte below stays in its value's range.
            u8* dst = out + sh_off[r];
            const u8* suffix = (const u8*)sh_src[r];
            for (u32 j = p; j < vlen; j++) dst[j] = suffix[j - p];
            u32 limit = p;  // bytes [0, limit) still to fill
            for (i32 m = (i32)r - 1; m >= 0 && limit > 0; m--) {
                const u32 pm = sh_p[m];
                if (pm < limit) {
                    const u8* src = (const u8*)sh_src[m];
                    for (u32 j = pm; j < limit; j++) dst[j] = src[j - pm];
                    limit = pm;
                }
            }
            const u8* prev = out + prev_off;
            for (u32 j = 0; j < limit; j++) dst[j] = prev[j];
        }
        __syncthreads();  // this window's bytes are written before the next reads them
        if (present_here > 0) {
            prev_off = last_off;
            prev_len = last_len;
        }
        next_k += present_here;
    }
}

// BYTE_STREAM_SPLIT pages of FLOAT, DOUBLE, INT32, INT64 and FIXED_LEN_BYTE_ARRAY columns: value k's
// byte b is values[b * S + k] with S = values_len / type_len (as arrow-rs), written to
// dense + (row_start + k) * dense_width + b. S < num_non_null: OVERRUN (detail: S). Another type, or a
// type_len that is not the type's width or exceeds dense_width: BAD_ENCODING (detail: the type).
// Thread per value: for each byte stream the warp reads consecutive bytes.
extern "C" __global__ void __launch_bounds__(GP_DELTA_THREADS)
gp_byte_stream_split(PageDesc* pages, u32 n, ColumnDesc* cols) {
    PageDesc* page = delta_page(pages, n, ENC_BYTE_STREAM_SPLIT,
                                PT_BIT(PT_FLOAT) | PT_BIT(PT_DOUBLE) | PT_BIT(PT_INT32) | PT_BIT(PT_INT64) |
                                    PT_BIT(PT_FIXED_LEN_BYTE_ARRAY));
    if (!page) return;
    const ColumnDesc* col = &cols[page->column];
    const u32 w = page->type_len, phys = page->physical;
    const u32 want = phys == PT_FLOAT || phys == PT_INT32 ? 4 : phys == PT_FIXED_LEN_BYTE_ARRAY ? w : 8;
    if (w == 0 || w != want || w > col->dense_width) {
        if (threadIdx.x == 0) page_error(page, ERR_BAD_ENCODING, phys);
        return;
    }
    const u64 count = page->num_non_null, stride = page->values_len / w;
    if (stride < count) {
        if (threadIdx.x == 0) page_error(page, ERR_OVERRUN, clamp_u32(stride));
        return;
    }
    const u8* src = (const u8*)page->values;
    u8* dense = (u8*)col->dense;
    const u64 dw = col->dense_width, row0 = page->row_start;
    for (u64 k = threadIdx.x; k < count; k += blockDim.x) {
        u8* dst = dense + (row0 + k) * dw;
        if (w <= 8) {
            u64 v = 0;
            for (u32 b = 0; b < w; b++) v |= (u64)src[b * stride + k] << (8 * b);
            store_le(dst, v, w);
        } else {
            for (u32 b = 0; b < w; b++) dst[b] = src[b * stride + k];
        }
    }
}
