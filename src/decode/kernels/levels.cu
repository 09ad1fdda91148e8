// Page setup, definition levels and hybrid-encoded values (dictionary indices, v2 RLE booleans).
// Host references: host_kernels/core.rs (page_setup, levels, dict_indices).

// Thread per page; grid ceil(n / 128), block 128. Resolves v1 pages' levels and values from the 4-byte
// length prefix of their definition levels, after stepping over the repetition levels (their own
// 4-byte length, then the stream) of pages flagged PAGE_V1_REP_LEVELS. OVERRUN where a prefix or the
// stream it announces passes the body's end (detail: that length, 0 for a missing prefix).
extern "C" __global__ void gp_page_setup(PageDesc* pages, u32 n) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    PageDesc* pg = &pages[i];
    if (pg->error != 0 || (pg->flags & (PAGE_V1_LEVELS | PAGE_V1_REP_LEVELS)) == 0) return;
    const u64 data = pg->data, data_len = pg->data_len;
    u64 pos = 0;
    if (pg->flags & PAGE_V1_REP_LEVELS) {
        if (data_len < 4) { page_error(pg, ERR_OVERRUN, 0); return; }
        const u64 R = gpcore::load_u32_le((const u8*)data);
        if (4 + R > data_len) { page_error(pg, ERR_OVERRUN, (u32)R); return; }
        pos = 4 + R;
    }
    if (pg->flags & PAGE_V1_LEVELS) {
        if (data_len - pos < 4) { page_error(pg, ERR_OVERRUN, 0); return; }
        const u64 L = gpcore::load_u32_le((const u8*)(data + pos));
        if (4 + L > data_len - pos) { page_error(pg, ERR_OVERRUN, (u32)L); return; }
        pg->levels = data + pos + 4;
        pg->levels_len = L;
        pos += 4 + L;
    }
    pg->values = data + pos;
    pg->values_len = data_len - pos;
}

// Block per page (grid n, block 256, no dynamic shared memory). Decodes the page's definition levels:
// vidx[row_start + i] = index of row i's value among the page's present values, or -1 for a null;
// out_valid[row_start + i] = 1 / 0 when out_valid != 0; out_def[row_start + i] = the level itself when
// out_def != 0 (nested columns, for their offsets and validity); num_non_null = present values. Pages
// of max_def 0: num_non_null = num_values, and vidx = i, out_valid = 1 where the column has them.
// Errors: BAD_BIT_WIDTH (def_bit_width > 8, detail = width, num_non_null = 0); BAD_LEVEL (detail =
// level index) or OVERRUN (detail = index of the first level the stream lacks), whichever index is
// lower; rows before it are written, num_non_null counts them; BAD_PAGE_SIZE when the page's rows are
// not inside the column.
extern "C" __global__ void __launch_bounds__(256) gp_levels(PageDesc* pages, u32 n, ColumnDesc* cols) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    PageDesc* pg = &pages[blockIdx.x];
    const PageDesc page = *pg;
    const u32 t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (page.error != 0) return;
    const ColumnDesc col = cols[page.column];
    if (!rows_ok(page, col)) {
        if (t == 0) page_error(pg, ERR_BAD_PAGE_SIZE, page.num_values);
        return;
    }
    if (page.max_def == 0) {
        // A page without levels in a column with them (a dictionary's entries among a dictionary-typed
        // column's plain pages): every row present, in order.
        i32* vidx = col.vidx ? (i32*)col.vidx + page.row_start : nullptr;
        u8* valid = col.out_valid ? (u8*)col.out_valid + page.row_start : nullptr;
        for (u32 idx = t; (vidx || valid) && idx < page.num_values; idx += BLOCK) {
            if (vidx) vidx[idx] = (i32)idx;
            if (valid) valid[idx] = 1;
        }
        if (t == 0) pg->num_non_null = page.num_values;
        return;
    }
    const u32 bw = page.def_bit_width;
    if (bw > 8) {
        if (t == 0) {
            pg->num_non_null = 0;
            page_error(pg, ERR_BAD_BIT_WIDTH, bw);
        }
        return;
    }
    __shared__ HybShared sh;
    const u8* base = (const u8*)page.levels;
    const u64 len = page.levels_len;
    const u32 count = page.num_values, max_def = page.max_def;
    i32* vidx = col.vidx ? (i32*)col.vidx + page.row_start : nullptr;
    u8* valid = col.out_valid ? (u8*)col.out_valid + page.row_start : nullptr;
    u8* def = col.out_def ? (u8*)col.out_def + page.row_start : nullptr;
    u32 err_code = 0, err_at = 0;
    if (t == 0) {
        hyb_reset(sh);
        sh.done = count == 0;
        sh.present_base = 0;
    }
    __syncthreads();
    while (!sh.done) {
        hyb_next_window(sh, base, len, bw, count);
        const u32 ws = sh.win_start, we = sh.win_end;
        // A window that is one RLE run of max_def (a page without nulls, as most are): every value
        // present and in order, so no level is decoded, checked or counted one by one.
        const HybRun& first = sh.runs[0];
        if (sh.nruns == 1 && first.bit == RLE_RUN && first.value == max_def) {
            const u32 pbase = sh.present_base;
            for (u32 idx = ws + t; idx < we; idx += BLOCK) {
                if (vidx) vidx[idx] = (i32)(pbase + (idx - ws));
                if (valid) valid[idx] = 1;
                if (def) def[idx] = (u8)max_def;
            }
            if (t == 0) sh.total = we - ws;
        } else {
            u32 lv[HYB_ITEMS];
#pragma unroll
            for (u32 j = 0; j < HYB_ITEMS; j++) {
                const u32 idx = ws + j * BLOCK + t;
                lv[j] = idx < we ? hyb_value(sh, base, len, bw, idx) : 0;
                if (idx < we && lv[j] > max_def) atomicMin(&sh.first_bad, idx);
            }
            __syncthreads();
            const u32 stop = sh.first_bad < we ? sh.first_bad : we;
            u32 masks[HYB_ITEMS];
#pragma unroll
            for (u32 j = 0; j < HYB_ITEMS; j++) {
                const u32 idx = ws + j * BLOCK + t;
                masks[j] = __ballot_sync(FULL_MASK, idx < stop && lv[j] == max_def);
                if (lane == 0) sh.counts[j * NWARPS + warp] = __popc(masks[j]);
            }
            __syncthreads();
            if (warp == 0) {
                // Exclusive scan of the 64 counts in position order (item-major, then warp): two per lane.
                const u32 a = sh.counts[2 * lane], b = sh.counts[2 * lane + 1];
                u32 x = a + b;
                for (u32 o = 1; o < 32; o <<= 1) {
                    const u32 y = __shfl_up_sync(FULL_MASK, x, o);
                    if (lane >= o) x += y;
                }
                const u32 excl = x - a - b;
                sh.counts[2 * lane] = excl;
                sh.counts[2 * lane + 1] = excl + a;
                if (lane == 31) sh.total = x;
            }
            __syncthreads();
            const u32 pbase = sh.present_base;
            const u32 below = (1u << lane) - 1;
#pragma unroll
            for (u32 j = 0; j < HYB_ITEMS; j++) {
                const u32 idx = ws + j * BLOCK + t;
                if (idx < stop) {
                    const bool present = (masks[j] >> lane) & 1;
                    if (vidx) {
                        vidx[idx] = present ? (i32)(pbase + sh.counts[j * NWARPS + warp] + __popc(masks[j] & below))
                                            : -1;
                    }
                    if (valid) valid[idx] = present ? 1 : 0;
                    if (def) def[idx] = (u8)lv[j];
                }
            }
        }
        __syncthreads();
        if (t == 0) {
            sh.present_base += sh.total;
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
    if (t == 0) {
        pg->num_non_null = sh.present_base;
        if (err_code) page_error(pg, err_code, err_at);
    }
}

// Block per page (grid n, block 256, no dynamic shared memory). Pages encoded PLAIN_DICTIONARY or
// RLE_DICTIONARY: a bit-width byte (<= 32, else BAD_BIT_WIDTH with detail = width) then num_non_null
// indices as a hybrid stream, each written as u32 at dense + (row_start + k) * dense_width, or, on a
// page whose values go straight to its rows (dict_values_direct), the dictionary's value itself at
// out_values + (row_start + k) * type_len; an index >= dict_count is DICT_INDEX (detail k), a short
// stream OVERRUN (detail = first missing k), the lower k wins and the values before it are written. dict == 0: MISSING_DICTIONARY. BOOLEAN pages encoded RLE
// (v2): a 4-byte LE length (short: OVERRUN, detail 0) then a width-1 hybrid stream, each value written
// as one byte (0/1) at the same dense positions. Pages with no present values read nothing. Other pages:
// nothing. dense_width too small for what is written: BAD_PAGE_SIZE.
extern "C" __global__ void __launch_bounds__(256) gp_dict_indices(PageDesc* pages, u32 n, ColumnDesc* cols) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    PageDesc* pg = &pages[blockIdx.x];
    const PageDesc page = *pg;
    const u32 t = threadIdx.x;
    const bool dict = dictionary_encoding(page.encoding);
    const bool rle_bool = page.physical == PT_BOOLEAN && page.encoding == ENC_RLE;
    if (page.error != 0 || !(dict || rle_bool) || page.num_non_null == 0) return;
    const ColumnDesc col = cols[page.column];
    const u32 count = page.num_non_null;
    if (!rows_ok(page, col) || count > page.num_values || col.dense_width < (dict ? 4u : 1u)) {
        if (t == 0) page_error(pg, ERR_BAD_PAGE_SIZE, page.num_values);
        return;
    }
    const u8* base;
    u64 len;
    u32 bw;
    if (dict) {
        if (page.dict == 0) {
            if (t == 0) page_error(pg, ERR_MISSING_DICTIONARY, 0);
            return;
        }
        if (page.values_len < 1) {
            if (t == 0) page_error(pg, ERR_OVERRUN, 0);
            return;
        }
        bw = *(const u8*)page.values;
        if (bw > 32) {
            if (t == 0) page_error(pg, ERR_BAD_BIT_WIDTH, bw);
            return;
        }
        base = (const u8*)page.values + 1;
        len = page.values_len - 1;
    } else {
        const u64 L = page.values_len < 4 ? 0 : load_u32_le((const u8*)page.values);
        if (page.values_len < 4 || 4 + L > page.values_len) {
            if (t == 0) page_error(pg, ERR_OVERRUN, 0);
            return;
        }
        bw = 1;
        base = (const u8*)page.values + 4;
        len = L;
    }
    __shared__ HybShared sh;
    const u32 dw = col.dense_width, dict_count = page.dict_count;
    u8* dense = (u8*)col.dense + (u64)page.row_start * dw;
    const bool aligned = ((col.dense | dw) & 3) == 0;
    // Values straight to the rows (dict_values_direct): the index is only an address in the dictionary.
    const bool direct = dict_values_direct(page, col);
    const u32 tl = page.type_len;
    u8* out = (u8*)col.out_values + (u64)page.row_start * tl;
    u32 err_code = 0, err_at = 0;
    if (t == 0) hyb_reset(sh);
    __syncthreads();
    // Each thread decides from the window's state whether the page ends there, right after the
    // window's last barrier: no thread writes that state again before the next window's stage
    // barrier, which each reaches only after reading it, so no barrier closes the window (two did,
    // a third of its barriers).
    bool done = false;
    while (!done) {
        hyb_next_window(sh, base, len, bw, count);
        const u32 ws = sh.win_start, we = sh.win_end;
        u32 v[HYB_ITEMS];
#pragma unroll
        for (u32 j = 0; j < HYB_ITEMS; j++) {
            const u32 idx = ws + j * BLOCK + t;
            v[j] = idx < we ? hyb_value(sh, base, len, bw, idx) : 0;
            if (dict && idx < we && v[j] >= dict_count) atomicMin(&sh.first_bad, idx);
        }
        __syncthreads();
        const u32 first_bad = sh.first_bad;
        const u32 stop = first_bad < we ? first_bad : we;
        if (first_bad != NONE) {
            err_code = ERR_DICT_INDEX;
            err_at = first_bad;
            done = true;
        } else if (sh.st.ended) {
            err_code = ERR_OVERRUN;
            err_at = we;
            done = true;
        } else {
            done = sh.st.produced >= count;
        }
#pragma unroll
        for (u32 j = 0; j < HYB_ITEMS; j++) {
            const u32 idx = ws + j * BLOCK + t;
            if (idx < stop) {
                u8* d = dense + (u64)idx * dw;
                if (!dict) {
                    *d = v[j] != 0;
                } else if (direct) {
                    copy_word_value(out + (u64)idx * tl, page.dict + (u64)v[j] * tl, tl, page.dict,
                                    page.dict + page.dict_len);
                } else if (aligned) {
                    *(u32*)d = v[j];
                } else {
                    d[0] = (u8)v[j]; d[1] = (u8)(v[j] >> 8); d[2] = (u8)(v[j] >> 16); d[3] = (u8)(v[j] >> 24);
                }
            }
        }
    }
    if (t == 0 && err_code) page_error(pg, err_code, err_at);
}
