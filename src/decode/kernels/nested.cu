// Nested columns: a column's definition levels one byte per row, and validity bytes from them (a
// struct is present where a row's level reaches the struct's definition level).
// Host references: reference/nested.rs (def_levels, levels_at_least).

// Block per page (grid n, block 256, no dynamic shared memory), launched after gp_levels. For each page
// without error whose column c < ncols has outs[c] != 0 and definition levels (max_def > 0, width at
// most 8), writes its levels one byte each at outs[c] + row_start, decoded as gp_levels decodes them;
// stops at the first level the stream lacks or that exceeds max_def (gp_levels has flagged that page),
// leaving the bytes from there on as they were. A page whose rows are not inside its column is
// skipped (gp_levels has flagged it), so no write leaves outs[c]'s num_rows bytes.
extern "C" __global__ void __launch_bounds__(256) gp_def_levels(const PageDesc* pages, u32 n,
                                                                const ColumnDesc* cols, u32 ncols,
                                                                const u64* outs) {
    using namespace gpcore;
    require_block();
    if (blockIdx.x >= n) return;
    const PageDesc page = pages[blockIdx.x];
    if (page.error != 0 || page.max_def == 0 || page.def_bit_width > 8 || page.column >= ncols) return;
    const ColumnDesc col = cols[page.column];
    u8* out = (u8*)outs[page.column];
    if (out == nullptr || !rows_ok(page, col)) return;
    out += page.row_start;
    const u32 t = threadIdx.x;
    const u8* base = (const u8*)page.levels;
    const u64 len = page.levels_len;
    const u32 count = page.num_values, max_def = page.max_def, bw = page.def_bit_width;
    __shared__ HybShared sh;
    if (t == 0) {
        hyb_reset(sh);
        sh.done = count == 0;
    }
    __syncthreads();
    while (!sh.done) {
        if (t == 0) {
            hyb_fill(sh, base, len, bw, count);
            sh.first_bad = NONE;
        }
        __syncthreads();
        const u32 ws = sh.win_start, we = sh.win_end;
        u32 lv[HYB_ITEMS];
#pragma unroll
        for (u32 j = 0; j < HYB_ITEMS; j++) {
            const u32 idx = ws + j * BLOCK + t;
            lv[j] = idx < we ? hyb_value(sh, base, len, bw, idx) : 0;
            if (idx < we && lv[j] > max_def) atomicMin(&sh.first_bad, idx);
        }
        __syncthreads();
        const u32 stop = sh.first_bad < we ? sh.first_bad : we;
#pragma unroll
        for (u32 j = 0; j < HYB_ITEMS; j++) {
            const u32 idx = ws + j * BLOCK + t;
            if (idx < stop) out[idx] = (u8)lv[j];
        }
        __syncthreads();
        if (t == 0 && (sh.first_bad != NONE || sh.st.ended || sh.st.produced >= count)) sh.done = 1;
        __syncthreads();
    }
}

// Grid-stride over n bytes (any grid, any block): out[i] = levels[i] >= threshold.
extern "C" __global__ void gp_levels_at_least(const u8* levels, u64 n, u32 threshold, u8* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = (u32)levels[i] >= threshold ? 1 : 0;
    }
}
