// gp_page_headers: walks each column chunk's pages by parsing their Thrift compact PageHeaders.
// Twin of src/decode/host_kernels/page_headers.rs, which documents the rules: the same checks in the
// same order, so both give the same PageInfos, counts, error codes and offsets for any bytes.
//
// One warp per chunk, its first lane walking the headers: grid = nchunks, block = 32, no shared memory.
// (A thread per chunk put 32 chunks in a warp, each header's fields branching apart: on the H200 a
// step of the snappy benchmark file, 42 chunks of 54 pages, took 0.9-1.0 ms, now 0.41-0.59 ms.)
// The parse is inlined into the kernel, so the reader's position stays in registers: with ph_skip and
// ph_sub_header out of line, taking it by pointer, it lived in local memory (ncu on the H200, 16 steps
// of the plain benchmark file: 7.41 ms in all, inlined 6.25; the snappy file's 10 launches 4.69 and
// 3.96 ms). Staging each header's first 256 bytes in shared memory by the whole warp made it slower
// (10.90 and 8.41 ms): the walk is not bound by its loads.
// Count pass (pages == nullptr): writes each chunk's page_count, error, error_at.
// Fill pass: also writes the chunk's pages at pages[first_page ..], at most page_capacity of them
// (ERR_TOO_MANY_PAGES beyond). No byte outside [start, start + len) is read; nothing recurses.

#define PH_MAX_DEPTH 8u

// Thrift compact types (a field header's low nibble; list and map element types).
#define TC_STOP 0u
#define TC_TRUE 1u
#define TC_FALSE 2u
#define TC_BYTE 3u
#define TC_I16 4u
#define TC_I32 5u
#define TC_I64 6u
#define TC_DOUBLE 7u
#define TC_BINARY 8u
#define TC_LIST 9u
#define TC_SET 10u
#define TC_MAP 11u
#define TC_STRUCT 12u
#define TC_UUID 13u
// Not on the wire: a bool inside a list or map, one byte (a bool field has none).
#define TC_BOOL_ELEM 16u

#define PH_FRAME_STRUCT 0u
#define PH_FRAME_LIST 1u
#define PH_FRAME_MAP 2u

// Parquet PageType.
#define PAGE_DATA 0
#define PAGE_INDEX 1
#define PAGE_DICTIONARY 2
#define PAGE_DATA_V2 3

// The chunk's bytes [0, len) and a position in them. Every read checks pos against len.
struct PhReader {
    const u8* b;
    u64 pos;
    u64 len;
};

// One open struct or container while skipping a value.
struct PhFrame {
    u32 kind;
    u32 t1;         // list element type, or map key type
    u32 t2;         // map value type
    u32 remaining;  // lists: elements left; maps: keys plus values left
    i32 last;       // structs: the last field id
};

__device__ inline u32 ph_byte(PhReader* r, u8* out) {
    if (r->pos >= r->len) return ERR_HEADER_PAST_CHUNK;
    *out = r->b[r->pos];
    r->pos++;
    return 0;
}

__device__ inline u32 ph_skip_bytes(PhReader* r, u64 n) {
    if (n > r->len - r->pos) return ERR_HEADER_PAST_CHUNK;
    r->pos += n;
    return 0;
}

// An unsigned LEB128 varint of at most 10 bytes (bits past 64 dropped).
__device__ inline u32 ph_varint(PhReader* r, u64* out) {
    u64 v = 0;
    for (u32 i = 0; i < 10; i++) {
        u8 b;
        const u32 e = ph_byte(r, &b);
        if (e) return e;
        v |= (u64)(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
            *out = v;
            return 0;
        }
    }
    return ERR_BAD_HEADER;
}

__device__ inline u32 ph_zigzag(PhReader* r, i64* out) {
    u64 v;
    const u32 e = ph_varint(r, &v);
    if (e) return e;
    *out = zigzag_decode(v);
    return 0;
}

// A Thrift i32 (zigzag varint) that must fit in 32 bits.
__device__ inline u32 ph_i32(PhReader* r, i32* out) {
    i64 v;
    const u32 e = ph_zigzag(r, &v);
    if (e) return e;
    if (v < -2147483647LL - 1 || v > 2147483647LL) return ERR_BAD_HEADER;
    *out = (i32)v;
    return 0;
}

// A container size: an unsigned varint of at most INT32_MAX.
__device__ inline u32 ph_size(PhReader* r, u32* out) {
    u64 v;
    const u32 e = ph_varint(r, &v);
    if (e) return e;
    if (v > 0x7fffffffull) return ERR_BAD_HEADER;
    *out = (u32)v;
    return 0;
}

// A field header: *t = TC_STOP at the struct's stop (any type nibble 0, as parquet-rs), else the
// field's type and id (delta from *last, or explicit), updating *last.
__device__ inline u32 ph_field_begin(PhReader* r, i32* last, u32* t, i32* id) {
    u8 b;
    u32 e = ph_byte(r, &b);
    if (e) return e;
    const u32 ty = b & 0x0fu;
    if (ty == TC_STOP) {
        *t = TC_STOP;
        return 0;
    }
    if (ty > TC_UUID) return ERR_BAD_HEADER;
    const i64 delta = (i64)(b >> 4);
    i64 fid;
    if (delta != 0) {
        fid = (i64)*last + delta;
    } else {
        e = ph_zigzag(r, &fid);
        if (e) return e;
    }
    if (fid < -32768 || fid > 32767) return ERR_BAD_HEADER;
    *last = (i32)fid;
    *t = ty;
    *id = (i32)fid;
    return 0;
}

// A list or map element type: bools (1 or 2) become TC_BOOL_ELEM; 0, 14 and 15 are refused.
__device__ inline u32 ph_element_type(u32 t, u32* out) {
    if (t == TC_TRUE || t == TC_FALSE) {
        *out = TC_BOOL_ELEM;
        return 0;
    }
    if (t >= TC_BYTE && t <= TC_UUID) {
        *out = t;
        return 0;
    }
    return ERR_BAD_HEADER;
}

// Skips one value of type t, a field of a struct at nesting depth `depth`, with an explicit stack of
// open structs and containers (the value's own depth is depth + 1).
__device__ __forceinline__ u32 ph_skip(PhReader* r, u32 t, u32 depth) {
    PhFrame stack[PH_MAX_DEPTH];
    u32 sp = 0;
    for (;;) {
        u32 e = 0;
        // Consume one value of type t, or open it.
        if (t == TC_TRUE || t == TC_FALSE) {
            // no bytes
        } else if (t == TC_BOOL_ELEM) {
            u8 b;
            e = ph_byte(r, &b);
            if (e) return e;
            if (b > 2) return ERR_BAD_HEADER;
        } else if (t == TC_BYTE) {
            u8 b;
            e = ph_byte(r, &b);
            if (e) return e;
        } else if (t == TC_I16 || t == TC_I32 || t == TC_I64) {
            u64 v;
            e = ph_varint(r, &v);
            if (e) return e;
        } else if (t == TC_DOUBLE) {
            e = ph_skip_bytes(r, 8);
            if (e) return e;
        } else if (t == TC_UUID) {
            e = ph_skip_bytes(r, 16);
            if (e) return e;
        } else if (t == TC_BINARY) {
            u64 n;
            e = ph_varint(r, &n);
            if (e) return e;
            e = ph_skip_bytes(r, n);
            if (e) return e;
        } else if (t == TC_LIST || t == TC_SET || t == TC_MAP || t == TC_STRUCT) {
            if (depth + sp + 1 > PH_MAX_DEPTH) return ERR_BAD_HEADER;
            PhFrame f;
            f.kind = PH_FRAME_STRUCT;
            f.t1 = 0;
            f.t2 = 0;
            f.remaining = 0;
            f.last = 0;
            if (t == TC_STRUCT) {
                f.kind = PH_FRAME_STRUCT;
            } else if (t == TC_MAP) {
                f.kind = PH_FRAME_MAP;
                u32 n;
                e = ph_size(r, &n);
                if (e) return e;
                if (n > 0) {
                    u8 kv;
                    e = ph_byte(r, &kv);
                    if (e) return e;
                    e = ph_element_type(kv >> 4, &f.t1);
                    if (e) return e;
                    e = ph_element_type(kv & 0x0fu, &f.t2);
                    if (e) return e;
                    f.remaining = 2 * n;
                }
            } else {
                f.kind = PH_FRAME_LIST;
                u8 h;
                e = ph_byte(r, &h);
                if (e) return e;
                // Some writers give an empty list as a single 0 byte (parquet-rs accepts it).
                if (h != 0) {
                    e = ph_element_type(h & 0x0fu, &f.t1);
                    if (e) return e;
                    const u32 n = h >> 4;
                    if (n == 15) {
                        e = ph_size(r, &f.remaining);
                        if (e) return e;
                    } else {
                        f.remaining = n;
                    }
                }
            }
            stack[sp] = f;
            sp++;
        } else {
            return ERR_BAD_HEADER;
        }
        // Find the next value to consume, closing finished frames.
        for (;;) {
            if (sp == 0) return 0;
            PhFrame* f = &stack[sp - 1];
            if (f->kind == PH_FRAME_STRUCT) {
                u32 ft;
                i32 fid;
                e = ph_field_begin(r, &f->last, &ft, &fid);
                if (e) return e;
                if (ft != TC_STOP) {
                    t = ft;
                    break;
                }
                sp--;
            } else if (f->remaining == 0) {
                sp--;
            } else {
                t = (f->kind == PH_FRAME_MAP && (f->remaining & 1u) == 1u) ? f->t2 : f->t1;
                f->remaining--;
                break;
            }
        }
    }
}

// Reads the fields of a sub-header struct (depth 2): fields 1..=nvals are i32s stored in vals (bit
// id - 1 of *seen set), field bool_id (if not 0) a bool stored in *flag; others skipped.
__device__ __forceinline__ u32 ph_sub_header(PhReader* r, i32* vals, i32 nvals, u32* seen, i32 bool_id, i32* flag) {
    i32 last = 0;
    for (;;) {
        u32 t;
        i32 id;
        u32 e = ph_field_begin(r, &last, &t, &id);
        if (e) return e;
        if (t == TC_STOP) return 0;
        if (id >= 1 && id <= nvals) {
            if (t != TC_I32) return ERR_BAD_HEADER;
            e = ph_i32(r, &vals[id - 1]);
            if (e) return e;
            *seen |= 1u << (id - 1);
        } else if (bool_id != 0 && id == bool_id) {
            if (t != TC_TRUE && t != TC_FALSE) return ERR_BAD_HEADER;
            *flag = t == TC_TRUE ? 1 : 0;
        } else {
            e = ph_skip(r, t, 2);
            if (e) return e;
        }
    }
}

// Parses one PageHeader at r->pos and checks it. On success fills *p (offsets relative to the chunk
// start) and leaves r->pos just after the header.
__device__ __forceinline__ u32 ph_parse_header(PhReader* r, PageInfo* p) {
    const u64 header_offset = r->pos;
    // type, uncompressed_page_size, compressed_page_size, crc
    i32 top[4] = {0, 0, 0, 0};
    u32 top_seen = 0;
    // data_page_header: num_values, encoding, definition_level_encoding, repetition_level_encoding
    i32 dp[4] = {0, 0, 0, 0};
    u32 dp_seen = 0;
    // dictionary_page_header: num_values, encoding
    i32 dict[2] = {0, 0};
    u32 dict_seen = 0;
    // data_page_header_v2: num_values, num_nulls, num_rows, encoding, definition_levels_byte_length,
    // repetition_levels_byte_length
    i32 v2[6] = {0, 0, 0, 0, 0, 0};
    u32 v2_seen = 0;
    i32 v2_compressed = 1;
    // Bits 0..=3: data_page_header, index_page_header, dictionary_page_header, data_page_header_v2.
    u32 subs = 0;
    i32 unused = 0;
    i32 last = 0;
    for (;;) {
        u32 t;
        i32 id;
        u32 e = ph_field_begin(r, &last, &t, &id);
        if (e) return e;
        if (t == TC_STOP) break;
        if (id >= 1 && id <= 4) {
            if (t != TC_I32) return ERR_BAD_HEADER;
            e = ph_i32(r, &top[id - 1]);
            if (e) return e;
            top_seen |= 1u << (id - 1);
        } else if (id >= 5 && id <= 8) {
            if (t != TC_STRUCT) return ERR_BAD_HEADER;
            if (id == 5) {
                e = ph_sub_header(r, dp, 4, &dp_seen, 0, &unused);
            } else if (id == 6) {
                e = ph_skip(r, TC_STRUCT, 1);
            } else if (id == 7) {
                e = ph_sub_header(r, dict, 2, &dict_seen, 0, &unused);
            } else {
                e = ph_sub_header(r, v2, 6, &v2_seen, 7, &v2_compressed);
            }
            if (e) return e;
            subs |= 1u << (id - 5);
        } else {
            e = ph_skip(r, t, 1);
            if (e) return e;
        }
    }
    const u64 header_len = r->pos - header_offset;
    if (header_len > 0xffffffffull) return ERR_BAD_HEADER;
    // Required fields.
    if ((top_seen & 7u) != 7u) return ERR_BAD_HEADER;
    const i32 page_type = top[0];
    bool complete = false;
    if (page_type == PAGE_DATA) {
        complete = (subs & 1u) != 0 && dp_seen == 0xfu;
    } else if (page_type == PAGE_INDEX) {
        complete = (subs & 2u) != 0;
    } else if (page_type == PAGE_DICTIONARY) {
        complete = (subs & 4u) != 0 && dict_seen == 0x3u;
    } else if (page_type == PAGE_DATA_V2) {
        complete = (subs & 8u) != 0 && v2_seen == 0x3fu;
    }
    if (!complete) return ERR_BAD_HEADER;
    p->header_offset = header_offset;
    p->data_offset = r->pos;
    p->header_len = (u32)header_len;
    p->page_type = page_type;
    p->compressed_size = top[2];
    p->uncompressed_size = top[1];
    p->num_values = 0;
    p->encoding = 0;
    p->def_level_encoding = 0;
    p->rep_level_encoding = 0;
    p->num_nulls = 0;
    p->num_rows = 0;
    p->def_levels_byte_length = 0;
    p->rep_levels_byte_length = 0;
    p->is_compressed = 1;
    p->reserved = 0;
    if (page_type == PAGE_DATA) {
        p->num_values = dp[0];
        p->encoding = dp[1];
        p->def_level_encoding = dp[2];
        p->rep_level_encoding = dp[3];
    } else if (page_type == PAGE_DICTIONARY) {
        p->num_values = dict[0];
        p->encoding = dict[1];
    } else if (page_type == PAGE_DATA_V2) {
        p->num_values = v2[0];
        p->num_nulls = v2[1];
        p->num_rows = v2[2];
        p->encoding = v2[3];
        p->def_levels_byte_length = v2[4];
        p->rep_levels_byte_length = v2[5];
        p->is_compressed = v2_compressed;
    }
    // Sizes and counts.
    if (p->compressed_size < 0 || p->uncompressed_size < 0 || p->num_values < 0 || p->num_nulls < 0 ||
        p->num_rows < 0 || p->def_levels_byte_length < 0 || p->rep_levels_byte_length < 0 ||
        (i64)p->def_levels_byte_length + (i64)p->rep_levels_byte_length > (i64)p->compressed_size) {
        return ERR_BAD_PAGE_SIZE;
    }
    return 0;
}

extern "C" __global__ void gp_page_headers(ChunkDesc* chunks, u32 nchunks, PageInfo* pages) {
    const u32 i = blockIdx.x;
    if (i >= nchunks || threadIdx.x != 0) return;
    ChunkDesc* c = &chunks[i];
    PhReader r;
    r.b = (const u8*)c->start;
    r.pos = 0;
    r.len = c->len;
    const u64 first = c->first_page;
    const u32 capacity = c->page_capacity;
    u32 count = 0;
    u32 error = 0;
    u64 error_at = 0;
    while (r.pos < r.len) {
        const u64 at = r.pos;
        PageInfo p;
        u32 e = ph_parse_header(&r, &p);
        if (e == 0 && (u64)p.compressed_size > r.len - p.data_offset) e = ERR_PAGE_PAST_CHUNK;
        if (e == 0 && count == 0xffffffffu) e = ERR_TOO_MANY_PAGES;
        if (e == 0 && pages != nullptr) {
            if (count >= capacity) {
                e = ERR_TOO_MANY_PAGES;
            } else {
                pages[first + count] = p;
            }
        }
        if (e) {
            error = e;
            error_at = at;
            break;
        }
        count++;
        r.pos = p.data_offset + (u64)p.compressed_size;
    }
    c->page_count = count;
    c->error = error;
    c->error_at = error_at;
}
