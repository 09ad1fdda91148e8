// Runs the core decode pipeline on the CPU emulation (cuda_emu.h) over a step dumped by the
// `kernels::emu` tests, exactly as an orchestrator would launch it, and dumps the result back.
//
// Usage: driver IN OUT, driver validate IN OUT, driver unsnap IN OUT, driver literals IN OUT, or driver unzstd IN OUT. The kernel program (kernels.cu: the core files of SOURCES) is included below.
// Formats (little endian), addresses being the Rust arena's fake ones:
//   IN:  "GPEMU1" u32 nregions {u64 addr, u64 len, bytes} u32 npages PageDesc[] u32 ncols ColumnDesc[]
//        u32 ndicts DictDesc[] (str_src buffers hold addresses too, and are translated like descriptors)
//   OUT: "GPEMU1" the regions again (same order; str_src contents translated back to fake addresses,
//        ~0 for an address in no region), the descriptors (addresses translated back; a BYTE_ARRAY
//        column's out_values as 0), then per column: u64 nchars chars, u64 first byte failing
//        gp_validate_utf8 (~0 for none, and for a column not BYTE_ARRAY), u32 nwords words u64 set (validity
//        bits; nwords 0 when none), u32 nwords words u64 set (boolean value bits).
//   validate IN:  "GPVAL2" u32 n, u32 seg_bytes, u32 overlap {u32 codec, u64 declared uncompressed size,
//                 u32 status given (layout::validate_segments::plan's), u64 len, bytes} u32 nsegs
//                 ValidateSegment[]
//   validate OUT: u32 status per item, u32 join word per segment (gp_validate_compressed, a lane per
//                 segment then a warp per item, VALIDATE_WARPS warps a block)
//   unsnap IN:    "GPUNS1" u32 n {u64 declared uncompressed size, u64 len, bytes}
//   unsnap OUT:   per item u32 status, then the output buffer (declared size; 0xab where not
//                 written) (gp_unsnap, one block of UNSNAP_THREADS per item)
//   literals IN, OUT: as unsnap's, for gp_snappy_literals (blocks as snappy_literals::plan gives them)
//   unzstd IN, OUT: as unsnap's, for gp_unzstd (Zstd bodies, a warp each)
//   unzstd_blocks IN: as unsnap's, each item's declared size followed by u64 scratch bytes
//                 (layout.rs zstd_blocks::scratch_bytes); OUT: as unsnap's (gp_unzstd_blocks);
//                 unzstd_blocks_planned: the same, a body it does not plan left (ZSTD_NOT_PLANNED)
//   wsnap IN:     "GPWS02" u32 n, u32 seg_blocks, u32 byte_blocks, u32 rounds, u32 resolve (1:
//                 gp_wsnap_resolve, 0: the jump rounds and the gather), then per item {u64
//                 declared size, u32 seg_block0, u32 byte_block0, u64 table, segs, ptr, kind (scratch
//                 sizes), u64 len, bytes} (layout.rs, wsnap::plan)
//   wsnap OUT:    per item u32 status, u32 unresolved, then the output buffer (0xab where not written)
//                 (the wide Snappy decoder's kernels, in layout.rs's order)
//   rowfilter IN:  "GPRFC1" u32 nregions {u64 addr, u64 len, bytes} u32 ncalls {u32 name length, name,
//                  u32 grid, u32 block, u32 nargs {u8 tag ('p' an address, 'q' a u64, 'u' a u32), u64}}
//                  (row_filter.rs's launch plans; gp_rf_leaf's descriptor, and a view leaf's table of
//                  data buffers, have their addresses translated for the launch)
//   rowfilter OUT: the regions' bytes again, in order
#include "cuda_emu.h"

#include KERNELS_CU

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

namespace {

struct Region {
    uint64_t fake;
    uint64_t len;
    uint8_t* real;
};

std::vector<Region> regions;

uint8_t* alloc_real(uint64_t len) {
    void* p = nullptr;
    // Exactly `len` bytes (ASan sees any overrun); 256-aligned like cuMemAlloc.
    if (posix_memalign(&p, 256, len ? len : 1) != 0) std::abort();
    std::memset(p, 0, len ? len : 1);
    return (uint8_t*)p;
}

// An address inside a region (or one past its end), translated; 0 stays 0.
uint64_t to_real(uint64_t fake) {
    if (fake == 0) return 0;
    for (const Region& r : regions)
        if (fake >= r.fake && fake < r.fake + r.len) return (uint64_t)r.real + (fake - r.fake);
    for (const Region& r : regions)
        if (fake == r.fake + r.len) return (uint64_t)r.real + r.len;
    std::fprintf(stderr, "driver: address %llx in no region\n", (unsigned long long)fake);
    std::exit(3);
}

uint64_t to_fake(uint64_t real) {
    if (real == 0) return 0;
    for (const Region& r : regions)
        if (real >= (uint64_t)r.real && real < (uint64_t)r.real + r.len) return r.fake + (real - (uint64_t)r.real);
    for (const Region& r : regions)
        if (real == (uint64_t)r.real + r.len) return r.fake + r.len;
    return ~0ull;
}

template <class T>
T get(FILE* f) {
    T v;
    if (std::fread(&v, sizeof(T), 1, f) != 1) std::exit(4);
    return v;
}
template <class T>
void put(FILE* f, const T& v) {
    std::fwrite(&v, sizeof(T), 1, f);
}

template <class T>
std::vector<T> get_array(FILE* f) {
    const uint32_t n = get<uint32_t>(f);
    std::vector<T> v(n);
    if (n && std::fread(v.data(), sizeof(T), n, f) != n) std::exit(4);
    return v;
}

void translate(PageDesc& p, uint64_t (*t)(uint64_t)) {
    p.data = t(p.data);
    p.levels = t(p.levels);
    p.values = t(p.values);
    p.dict = t(p.dict);
    p.dict_index = t(p.dict_index);
}
void translate(ColumnDesc& c, uint64_t (*t)(uint64_t)) {
    c.vidx = t(c.vidx);
    c.dense = t(c.dense);
    c.out_values = t(c.out_values);
    c.out_valid = t(c.out_valid);
    c.out_offsets = t(c.out_offsets);
    c.str_src = t(c.str_src);
    c.str_len = t(c.str_len);
    c.out_views = t(c.out_views);
    c.view_longest = t(c.view_longest);
    c.view_pages = t(c.view_pages);
}
void translate(DictDesc& d, uint64_t (*t)(uint64_t)) {
    d.data = t(d.data);
    d.index = t(d.index);
}

// A malloc'd block of exactly at + len bytes (at least 1), for len bytes at offset `at`: they end where
// the block ends (so AddressSanitizer sees a read past them), and malloc's blocks are 16-aligned (so
// their alignment is at's).
uint8_t* alloc_ending_at(uint64_t at, uint64_t len) {
    uint8_t* block = (uint8_t*)std::malloc(at + len ? at + len : 1);
    if (((uintptr_t)block & 15) != 0) {
        std::fprintf(stderr, "malloc gave a block that is not 16-aligned\n");
        std::abort();
    }
    return block;
}

// A copy of n bytes at offset `at` of an alloc_ending_at block (the block, to free).
uint8_t* copy_ending_at(const void* bytes, uint64_t n, uint64_t at) {
    uint8_t* block = alloc_ending_at(at, n);
    if (n) std::memcpy(block + at, bytes, n);
    return block;
}

// Packs n bytes with gp_pack_bits on a deliberately small grid (so the grid-stride loop strides).
void pack(FILE* out, const uint8_t* bytes, uint64_t n, bool present) {
    if (!present) {
        put<uint32_t>(out, 0);
        put<uint64_t>(out, 0);
        return;
    }
    const uint32_t nwords = (uint32_t)((n + 31) / 32);
    // The kernel has a path for 16-aligned bytes and one for any other: both run, on copies, and must
    // agree (the reference then checks the result).
    std::vector<uint32_t> words(nwords ? nwords : 1, 0xdeadbeefu), words_odd(words);
    unsigned long long set = 0, set_odd = 0;
    uint8_t* aligned = copy_ending_at(bytes, n, 0);
    uint8_t* odd = copy_ending_at(bytes, n, 1);
    const unsigned grid = n == 0 ? 0 : (unsigned)std::min<uint64_t>(3, (n + 255) / 256);
    emu::launch(gp_pack_bits, grid, 256, (const u8*)aligned, (u64)n, words.data(), (u64*)&set);
    emu::launch(gp_pack_bits, grid, 256, (const u8*)odd + 1, (u64)n, words_odd.data(), (u64*)&set_odd);
    std::free(aligned);
    std::free(odd);
    if (words != words_odd || set != set_odd) {
        std::fprintf(stderr, "gp_pack_bits: the aligned and unaligned paths disagree (n = %llu)\n",
                     (unsigned long long)n);
        std::abort();
    }
    put<uint32_t>(out, nwords);
    std::fwrite(words.data(), 4, nwords, out);
    put<uint64_t>(out, set);
}

}  // namespace

// Opens `path` and checks its magic: the file, positioned after the item count *n; nullptr when it
// cannot be opened or is not one.
FILE* open_items(const char* path, const char* magic, uint32_t* n) {
    FILE* in = std::fopen(path, "rb");
    if (!in) return nullptr;
    char got[6];
    if (std::fread(got, 1, 6, in) != 6 || std::memcmp(got, magic, 6) != 0) {
        std::fclose(in);
        return nullptr;
    }
    *n = get<uint32_t>(in);
    return in;
}

// Reads item i's body of `len` bytes into an allocation of its own that ends where the body ends (so
// ASan sees a read past it), the body starting at every offset modulo 16 (the kernels' 16-byte loads
// align themselves): the allocation (to free), *body where the bytes are; nullptr on a short read.
uint8_t* read_body(FILE* in, uint64_t len, uint32_t i, uint8_t** body) {
    const uint64_t shift = i % 16;
    uint8_t* alloc = alloc_ending_at(shift, len);
    *body = alloc + shift;
    if (len && std::fread(*body, 1, len, in) != len) {
        std::free(alloc);
        return nullptr;
    }
    return alloc;
}

// gp_validate_compressed over items read from `in_path`, each body at the end of an allocation, with
// the segments the host planned.
int validate_main(const char* in_path, const char* out_path) {
    uint32_t n = 0;
    FILE* in = open_items(in_path, "GPVAL2", &n);
    if (!in) return 2;
    const uint32_t seg_bytes = get<uint32_t>(in), overlap = get<uint32_t>(in);
    std::vector<ValidateItem> items(n);
    std::vector<uint8_t*> bodies(n, nullptr);
    for (uint32_t i = 0; i < n; i++) {
        items[i].codec = get<uint32_t>(in);
        items[i].dst_len = get<uint64_t>(in);
        items[i].status = get<uint32_t>(in);
        items[i].src_len = get<uint64_t>(in);
        uint8_t* body = nullptr;
        if (!(bodies[i] = read_body(in, items[i].src_len, i, &body))) return 4;
        items[i].src = (u64)body;
    }
    const uint32_t nsegs = get<uint32_t>(in);
    std::vector<ValidateSegment> segs(nsegs);
    if (nsegs && std::fread(segs.data(), sizeof(ValidateSegment), nsegs, in) != nsegs) return 4;
    std::fclose(in);
    std::vector<SegmentOut> outs(nsegs);
    std::vector<uint32_t> joins(nsegs, 0);
    // As the host launches it, with a last block part empty.
    const uint32_t warps = (nsegs + 31) / 32 + n;  // layout::validate_segments::launch_warps
    if (warps)
        emu::launch(gp_validate_compressed, (warps + VALIDATE_WARPS - 1) / VALIDATE_WARPS, 32 * VALIDATE_WARPS, items.data(), n,
                    (const ValidateSegment*)segs.data(), nsegs, outs.data(), joins.data(), seg_bytes, overlap);
    FILE* out = std::fopen(out_path, "wb");
    if (!out) return 2;
    for (const auto& it : items) put<uint32_t>(out, it.status);
    for (uint32_t j : joins) put<uint32_t>(out, j);
    std::fclose(out);
    for (uint8_t* b : bodies) std::free(b);
    return 0;
}

// Which body decoder body_kernel_main launches.
enum class BodyKernel { Unsnap, Literals, Unzstd, UnzstdBlocks, UnzstdBlocksPlanned };

// The body decoder `kernel` over items read from `in_path`: each body at the end of an allocation,
// each output (and gp_unzstd_blocks' scratch) an allocation of exactly its size (so ASan sees a read
// or write past any).
int body_kernel_main(const char* in_path, const char* out_path, BodyKernel kernel) {
    const bool zstd_blocks = kernel == BodyKernel::UnzstdBlocks || kernel == BodyKernel::UnzstdBlocksPlanned;
    uint32_t n = 0;
    FILE* in = open_items(in_path, "GPUNS1", &n);
    if (!in) return 2;
    std::vector<UnsnapItem> items(n);
    std::vector<uint8_t*> bodies(n, nullptr), outs(n, nullptr), scratch(n, nullptr);
    std::vector<u64> scratch_at(n, 0);
    for (uint32_t i = 0; i < n; i++) {
        items[i].dst_len = get<uint64_t>(in);
        if (zstd_blocks) {
            // Poisoned, as a device allocation is not zeroed.
            const uint64_t bytes = get<uint64_t>(in);
            scratch[i] = (uint8_t*)std::malloc(bytes ? bytes : 1);
            std::memset(scratch[i], 0xa5, bytes);
            scratch_at[i] = (u64)scratch[i];
        }
        items[i].src_len = get<uint64_t>(in);
        uint8_t* body = nullptr;
        if (!(bodies[i] = read_body(in, items[i].src_len, i, &body))) return 4;
        outs[i] = (uint8_t*)std::malloc(items[i].dst_len ? items[i].dst_len : 1);
        std::memset(outs[i], 0xab, items[i].dst_len);
        items[i].src = (u64)body;
        items[i].dst = (u64)outs[i];
        items[i].status = ~0u;
    }
    std::fclose(in);
    if (n && kernel == BodyKernel::Literals) {
        // The host's plan (layout.rs snappy_literals::plan): one body's blocks after another's.
        u64 blocks = 0;
        for (auto& it : items) {
            it.block0 = (u32)blocks;
            blocks += snappy_literals_blocks(it.dst_len);
        }
        emu::launch(gp_snappy_literals, (u32)blocks, SNAPPY_LITERALS_THREADS, items.data(), n);
    } else if (n && zstd_blocks) {
        emu::launch(gp_unzstd_blocks, n, UNZSTD_THREADS, items.data(), n, (const u64*)scratch_at.data(),
                    (u32)(kernel == BodyKernel::UnzstdBlocks));
    } else if (n && kernel == BodyKernel::Unzstd) {
        emu::launch(gp_unzstd, n, UNZSTD_THREADS, items.data(), n);
    } else if (n) {
        emu::launch(gp_unsnap, n, UNSNAP_THREADS, items.data(), n);
    }
    FILE* out = std::fopen(out_path, "wb");
    if (!out) return 2;
    for (uint32_t i = 0; i < n; i++) {
        put<uint32_t>(out, items[i].status);
        std::fwrite(outs[i], 1, items[i].dst_len, out);
    }
    std::fclose(out);
    for (uint8_t* b : bodies) std::free(b);
    for (uint8_t* o : outs) std::free(o);
    for (uint8_t* b : scratch) std::free(b);
    return 0;
}

// The wide Snappy decoder over items read from `in_path`, launched as layout.rs's wsnap describes:
// each body, output and scratch region an allocation of exactly its size (scratch poisoned with 0xa5,
// as a device allocation is not zeroed).
int wsnap_main(const char* in_path, const char* out_path) {
    uint32_t n = 0;
    FILE* in = open_items(in_path, "GPWS02", &n);
    if (!in) return 2;
    const uint32_t seg_blocks = get<uint32_t>(in), byte_blocks = get<uint32_t>(in), rounds = get<uint32_t>(in);
    const uint32_t resolve = get<uint32_t>(in);
    std::vector<WsnapItem> items(n);
    std::vector<uint8_t*> owned;
    std::vector<uint8_t*> outs(n, nullptr);
    for (uint32_t i = 0; i < n; i++) {
        WsnapItem& it = items[i];
        std::memset(&it, 0, sizeof it);
        it.dst_len = get<uint64_t>(in);
        it.seg_block0 = get<uint32_t>(in);
        it.byte_block0 = get<uint32_t>(in);
        for (u64* region : {&it.table, &it.segs, &it.ptr, &it.kind}) {
            const uint64_t bytes = get<uint64_t>(in);
            uint8_t* r = alloc_ending_at(0, bytes);
            std::memset(r, 0xa5, bytes);
            owned.push_back(r);
            *region = (u64)r;
        }
        it.src_len = get<uint64_t>(in);
        uint8_t* body = nullptr;
        uint8_t* alloc = read_body(in, it.src_len, i, &body);
        if (!alloc) return 4;
        owned.push_back(alloc);
        outs[i] = alloc_ending_at(0, it.dst_len);
        std::memset(outs[i], 0xab, it.dst_len);
        owned.push_back(outs[i]);
        it.src = (u64)body;
        it.dst = (u64)outs[i];
        it.status = ~0u;
    }
    std::fclose(in);
    const uint64_t flag_words = WSNAP_MAX_ROUNDS + byte_blocks;
    uint32_t* flags = (uint32_t*)alloc_ending_at(0, 4 * flag_words);
    std::memset(flags, 0, 4 * flag_words);
    if (n) {
        emu::launch(gp_wsnap_tabulate, seg_blocks, WSNAP_SEG_WARPS * 32, items.data(), n);
        emu::launch(gp_wsnap_join, n, 32, items.data(), n);
        emu::launch(gp_wsnap_emit, seg_blocks, WSNAP_SEG_WARPS * 32, items.data(), n);
        emu::launch(gp_wsnap_finish, n, 32, items.data(), n);
        if (resolve) {
            emu::launch(gp_wsnap_resolve, n, WSNAP_RESOLVE_THREADS, items.data(), n);
        } else {
            for (uint32_t r = 0; r < rounds; r++) emu::launch(gp_wsnap_jump, byte_blocks, WSNAP_BYTE_THREADS, items.data(), n, flags, r);
            emu::launch(gp_wsnap_gather, byte_blocks, WSNAP_BYTE_THREADS, items.data(), n);
        }
    }
    FILE* out = std::fopen(out_path, "wb");
    if (!out) return 2;
    for (uint32_t i = 0; i < n; i++) {
        put<uint32_t>(out, items[i].status);
        put<uint32_t>(out, items[i].unresolved);
        std::fwrite(outs[i], 1, items[i].dst_len, out);
    }
    std::fclose(out);
    std::free(flags);
    for (uint8_t* b : owned) std::free(b);
    return 0;
}

// The nested-column kernels over one case read from `in_path` (kernels::emu::run_nested_emulated):
// slot scans of a parent and a child space, list offsets (32 and 64 bits), slot flags and a
// compaction with its end entry, over levels and outputs allocated at their exact sizes; then
// gp_rep_levels over one stream. Launched as exec_device.rs does (the tile bases with 256 threads,
// the emulation's widest block, where the device takes 1024).
int nested_main(const char* in_path, const char* out_path) {
    FILE* in = std::fopen(in_path, "rb");
    if (!in) return 2;
    char magic[6];
    if (std::fread(magic, 1, 6, in) != 6 || std::memcmp(magic, "GPNST1", 6) != 0) return 3;
    const uint64_t n = get<uint64_t>(in);
    const uint32_t r = get<uint32_t>(in), t = get<uint32_t>(in), pr = get<uint32_t>(in), pt = get<uint32_t>(in);
    const uint32_t threshold = get<uint32_t>(in), width = get<uint32_t>(in), size = get<uint32_t>(in);
    std::vector<uint8_t> def(n), rep(n), src((n + 1) * width);
    if (n && (std::fread(def.data(), 1, n, in) != n || std::fread(rep.data(), 1, n, in) != n)) return 4;
    if (std::fread(src.data(), 1, src.size(), in) != src.size()) return 4;
    const uint64_t stream_len = get<uint64_t>(in);
    uint8_t* stream = (uint8_t*)std::malloc(stream_len ? stream_len : 1);
    if (stream_len && std::fread(stream, 1, stream_len, in) != stream_len) return 4;
    LevelJob job{};
    job.count = get<uint32_t>(in);
    job.max_level = get<uint32_t>(in);
    job.bit_width = get<uint32_t>(in);
    job.flags = get<uint32_t>(in);
    std::fclose(in);
    std::vector<uint32_t> pp(n + 1), cp(n + 1);
    const uint8_t* d = n ? def.data() : nullptr;
    const uint8_t* p = n ? rep.data() : nullptr;
    // As exec_device.rs launches the scan: tiles' counts, their bases, each tile from its base.
    const uint32_t tiles = (uint32_t)((n + SLOT_TILE - 1) / SLOT_TILE);
    auto scan = [&](uint32_t sr, uint32_t st, uint32_t* out) {
        if (n == 0) {
            out[0] = 0;
            return;
        }
        std::vector<uint32_t> counts(tiles);
        emu::launch(gp_slot_tile_counts, tiles, 256, d, p, (u64)n, sr, st, counts.data());
        emu::launch(gp_slot_tile_bases, 1, 256, counts.data(), tiles);
        emu::launch(gp_slot_tile_scan, tiles, 256, d, p, (u64)n, sr, st, (const u32*)counts.data(), out);
    };
    scan(pr, pt, pp.data());
    scan(r, t, cp.data());
    const uint32_t ps = pp[n], cs = cp[n];
    std::vector<int32_t> off32(ps + 1);
    std::vector<int64_t> off64(ps + 1);
    std::vector<uint8_t> flags(ps ? ps : 1);
    std::vector<uint8_t> packed((uint64_t)(cs + 1) * width);
    const unsigned grid = (unsigned)((n + 1 + 255) / 256);
    emu::launch(gp_list_offsets, grid, 256, d, p, (u64)n, pr, pt, (const u32*)pp.data(), (const u32*)cp.data(), 0u,
                (u8*)off32.data());
    emu::launch(gp_list_offsets, grid, 256, d, p, (u64)n, pr, pt, (const u32*)pp.data(), (const u32*)cp.data(), 1u,
                (u8*)off64.data());
    emu::launch(gp_slot_flags, grid, 256, d, p, (u64)n, pr, pt, (const u32*)pp.data(), threshold, flags.data());
    emu::launch(gp_compact, grid, 256, d, p, (u64)n, r, t, (const u32*)cp.data(), (const u8*)src.data(), width, 1u,
                packed.data());
    std::vector<uint8_t> levels(job.count ? job.count : 1);
    job.src = (u64)stream;
    job.src_len = stream_len;
    job.out = (u64)levels.data();
    emu::launch(gp_rep_levels, 1, 256, &job, 1u);
    // gp_levels over the same stream as a page's definition levels (width and maximum the job's), at
    // row 2 of a column of count + 2 rows, the levels kept (out_def); then gp_levels_at_least over them.
    PageDesc page{};
    page.levels = (u64)stream;
    page.levels_len = stream_len;
    page.num_values = job.count;
    page.row_start = 2;
    page.max_def = job.max_level;
    page.def_bit_width = job.bit_width;
    std::vector<uint8_t> def_out(job.count + 2), marks(job.count + 2);
    ColumnDesc col{};
    col.num_rows = (u64)job.count + 2;
    col.out_def = (u64)def_out.data();
    emu::launch(gp_levels, 1, 256, &page, 1u, &col);
    emu::launch(gp_levels_at_least, 2, 64, (const u8*)def_out.data(), (u64)(job.count + 2), threshold, marks.data());
    // The fixed-size list kernels over the parent's lists (32-bit offsets): the compacted items, their
    // validity bits the src bytes, each output at its exact size.
    uint64_t fixed_check[2] = {~0ull, 0};
    emu::launch(gp_fixed_size_check, 2, 64, (const i32*)off32.data(), (u64)ps, size, (u64*)fixed_check);
    const uint64_t items = (uint64_t)ps * size;
    uint8_t* fixed_values = (uint8_t*)std::malloc(items * width ? items * width : 1);
    uint8_t* fixed_valid = (uint8_t*)std::malloc(items ? items : 1);
    emu::launch(gp_fixed_size_pad, 2, 64, (const i32*)off32.data(), (u64)ps, size, (const u8*)packed.data(),
                (const u8*)src.data(), (u64)cs, width, fixed_values, fixed_valid);
    FILE* out = std::fopen(out_path, "wb");
    if (!out) return 2;
    std::fwrite(def_out.data(), 1, def_out.size(), out);
    std::fwrite(marks.data(), 1, marks.size(), out);
    std::fwrite(pp.data(), 4, n + 1, out);
    std::fwrite(cp.data(), 4, n + 1, out);
    std::fwrite(off32.data(), 4, ps + 1, out);
    std::fwrite(off64.data(), 8, ps + 1, out);
    std::fwrite(flags.data(), 1, ps, out);
    std::fwrite(packed.data(), 1, packed.size(), out);
    std::fwrite(&job, sizeof job, 1, out);
    std::fwrite(levels.data(), 1, job.count, out);
    std::fwrite(fixed_check, 8, 2, out);
    std::fwrite(fixed_values, 1, items * width, out);
    std::fwrite(fixed_valid, 1, items, out);
    std::fclose(out);
    std::free(stream);
    std::free(fixed_values);
    std::free(fixed_valid);
    return 0;
}

struct CallArg {
    char tag;
    uint64_t v;
};

template <class P>
P call_arg(const CallArg& a) {
    if constexpr (std::is_pointer_v<P>) {
        if (a.tag != 'p') {
            std::fprintf(stderr, "driver: a number where the kernel takes an address\n");
            std::exit(5);
        }
        return (P)to_real(a.v);
    } else {
        if (a.tag == 'p') {
            std::fprintf(stderr, "driver: an address where the kernel takes a number\n");
            std::exit(5);
        }
        return (P)a.v;
    }
}

template <class... P, size_t... I>
void call_with(void (*k)(P...), unsigned grid, unsigned block, const std::vector<CallArg>& a,
               std::index_sequence<I...>) {
    emu::launch(k, grid, block, call_arg<P>(a[I])...);
}

template <class... P>
void call(void (*k)(P...), unsigned grid, unsigned block, const std::vector<CallArg>& a) {
    if (a.size() != sizeof...(P)) {
        std::fprintf(stderr, "driver: %zu arguments for a kernel of %zu\n", a.size(), sizeof...(P));
        std::exit(5);
    }
    call_with(k, grid, block, a, std::index_sequence_for<P...>{});
}

// A u64 address at p translated to the emulation's memory; the original bytes kept in `saved`.
void translate_word(u64* p, std::vector<std::pair<u64*, u64>>& saved) {
    saved.push_back({p, *p});
    *p = to_real(*p);
}

int rowfilter_main(const char* in_path, const char* out_path) {
    FILE* in = std::fopen(in_path, "rb");
    if (!in) return 2;
    char magic[6];
    if (std::fread(magic, 1, 6, in) != 6 || std::memcmp(magic, "GPRFC1", 6) != 0) return 2;
    const uint32_t nregions = get<uint32_t>(in);
    for (uint32_t k = 0; k < nregions; k++) {
        Region r;
        r.fake = get<uint64_t>(in);
        r.len = get<uint64_t>(in);
        r.real = alloc_real(r.len);
        if (r.len && std::fread(r.real, 1, r.len, in) != r.len) return 4;
        regions.push_back(r);
    }
    const uint32_t ncalls = get<uint32_t>(in);
    for (uint32_t c = 0; c < ncalls; c++) {
        std::string name(get<uint32_t>(in), '\0');
        if (!name.empty() && std::fread(name.data(), 1, name.size(), in) != name.size()) return 4;
        const uint32_t grid = get<uint32_t>(in), block = get<uint32_t>(in);
        std::vector<CallArg> args(get<uint32_t>(in));
        for (CallArg& a : args) {
            a.tag = (char)get<uint8_t>(in);
            a.v = get<uint64_t>(in);
        }
        std::vector<std::pair<u64*, u64>> saved;
        if (name == "gp_rf_leaf" && !args.empty()) {
            RowLeafDesc* d = (RowLeafDesc*)to_real(args[0].v);
            for (u64* f : {&d->values, &d->offsets, &d->aux, &d->validity, &d->lits, &d->lit_offsets, &d->error})
                translate_word(f, saved);
            if (d->kind == LEAF_VIEW)
                for (uint64_t k = 0; k < d->offsets_len / 8; k++) translate_word((u64*)d->offsets + k, saved);
        }
        if (name == "gp_rf_leaf") call(gp_rf_leaf, grid, block, args);
        else if (name == "gp_rf_logic") call(gp_rf_logic, grid, block, args);
        else if (name == "gp_rf_tile_sums") call(gp_rf_tile_sums, grid, block, args);
        else if (name == "gp_rf_tile_bases") call(gp_rf_tile_bases, grid, block, args);
        else if (name == "gp_rf_tile_scan") call(gp_rf_tile_scan, grid, block, args);
        else if (name == "gp_rf_mask_bits") call(gp_rf_mask_bits, grid, block, args);
        else if (name == "gp_rf_gather_fixed") call(gp_rf_gather_fixed, grid, block, args);
        else if (name == "gp_rf_gather_bits") call(gp_rf_gather_bits, grid, block, args);
        else if (name == "gp_rf_gather_lengths") call(gp_rf_gather_lengths, grid, block, args);
        else if (name == "gp_rf_gather_chars") call(gp_rf_gather_chars, grid, block, args);
        else if (name == "gp_rf_expand_ranges") call(gp_rf_expand_ranges, grid, block, args);
        else {
            std::fprintf(stderr, "driver: no kernel %s\n", name.c_str());
            return 5;
        }
        // Translated in reverse, so a word translated twice gets its first value back.
        for (auto it = saved.rbegin(); it != saved.rend(); ++it) *it->first = it->second;
    }
    std::fclose(in);
    FILE* out = std::fopen(out_path, "wb");
    if (!out) return 2;
    for (const Region& r : regions)
        if (r.len) std::fwrite(r.real, 1, r.len, out);
    std::fclose(out);
    for (const Region& r : regions) std::free(r.real);
    regions.clear();
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "rowfilter") return rowfilter_main(argv[2], argv[3]);
    if (argc == 4 && std::string(argv[1]) == "nested") return nested_main(argv[2], argv[3]);
    if (argc == 4 && std::string(argv[1]) == "wsnap") return wsnap_main(argv[2], argv[3]);
    if (argc == 4 && std::string(argv[1]) == "validate") return validate_main(argv[2], argv[3]);
    const std::pair<const char*, BodyKernel> body_kernels[] = {
        {"unsnap", BodyKernel::Unsnap},
        {"literals", BodyKernel::Literals},
        {"unzstd", BodyKernel::Unzstd},
        {"unzstd_blocks", BodyKernel::UnzstdBlocks},
        {"unzstd_blocks_planned", BodyKernel::UnzstdBlocksPlanned},
    };
    for (const auto& [name, kernel] : body_kernels)
        if (argc == 4 && std::string(argv[1]) == name) return body_kernel_main(argv[2], argv[3], kernel);
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    if (!in) return 2;
    char magic[6];
    if (std::fread(magic, 1, 6, in) != 6 || std::memcmp(magic, "GPEMU1", 6) != 0) return 2;
    const uint32_t nregions = get<uint32_t>(in);
    for (uint32_t i = 0; i < nregions; i++) {
        Region r;
        r.fake = get<uint64_t>(in);
        r.len = get<uint64_t>(in);
        r.real = alloc_real(r.len);
        if (r.len && std::fread(r.real, 1, r.len, in) != r.len) return 4;
        regions.push_back(r);
    }
    std::vector<PageDesc> pages = get_array<PageDesc>(in);
    std::vector<ColumnDesc> cols = get_array<ColumnDesc>(in);
    std::vector<DictDesc> dicts = get_array<DictDesc>(in);
    std::fclose(in);
    for (auto& p : pages) translate(p, to_real);
    for (auto& c : cols) translate(c, to_real);
    // str_src may already hold addresses (written by another decoder): real ones from here on.
    for (const auto& c : cols) {
        if (!c.str_src) continue;
        for (const Region& r : regions) {
            if ((uint64_t)r.real != c.str_src) continue;
            for (uint64_t i = 0; i + 8 <= r.len; i += 8) {
                uint64_t a;
                std::memcpy(&a, r.real + i, 8);
                a = to_real(a);
                std::memcpy(r.real + i, &a, 8);
            }
        }
    }
    for (auto& d : dicts) translate(d, to_real);

    const uint32_t n = (uint32_t)pages.size(), ncols = (uint32_t)cols.size(), ndicts = (uint32_t)dicts.size();
    PageDesc* P = pages.data();
    ColumnDesc* C = cols.data();
    if (n) {
        emu::launch(gp_page_setup, (n + 127) / 128, 128, P, n);
        emu::launch(gp_levels, n, 256, P, n, C);
        emu::launch(gp_dict_indices, n, 256, P, n, C);
    }
    if (ndicts) {
        // Three blocks a dictionary, as the device's several, sharing each walk through its chain.
        std::vector<gpcore::WalkChain> dict_chains(ndicts);
        emu::launch(gp_dict_byte_array_index, 3 * ndicts, 256, dicts.data(), ndicts, dict_chains.data());
    }
    std::vector<u64> page_totals(n ? n : 1, 0x5555);
    if (n) {
        emu::launch(gp_gather_fixed, n, 256, P, n, C);
        // Three blocks a page, as the device's several (page_slice), sharing each walk through its chain.
        std::vector<gpcore::WalkChain> chains(n);
        emu::launch(gp_byte_array_values, 3 * n, 256, P, n, C, chains.data());
        emu::launch(gp_string_page_totals, n, 256, (const PageDesc*)P, n, (const ColumnDesc*)C, page_totals.data());
    }
    if (ncols) emu::launch(gp_string_page_bases, ncols, 256, (const PageDesc*)P, n, C, ncols, page_totals.data());
    if (n) emu::launch(gp_string_offsets, n, 256, (const PageDesc*)P, n, (const ColumnDesc*)C, (const u64*)page_totals.data());
    // The orchestrator's part: characters sized by each string column's last offset.
    std::vector<uint8_t*> chars(ncols, nullptr);
    for (uint32_t c = 0; c < ncols; c++) {
        if (cols[c].physical != PT_BYTE_ARRAY || cols[c].error != 0) continue;
        const int64_t last = cols[c].out_width == 8 ? ((const int64_t*)cols[c].out_offsets)[cols[c].num_rows]
                                                    : ((const int32_t*)cols[c].out_offsets)[cols[c].num_rows];
        const uint64_t cap = last > 0 ? (uint64_t)last : 0;
        chars[c] = alloc_real(cap);
        cols[c].out_values = (uint64_t)chars[c];
        cols[c].chars_capacity = cap;
    }
    // Three blocks a page, as the device's several (page_slice): their rows and errors combine the same.
    if (n) emu::launch(gp_copy_strings, 3 * n, 256, P, n, (const ColumnDesc*)C);

    FILE* out = std::fopen(argv[2], "wb");
    if (!out) return 2;
    std::fwrite("GPEMU1", 1, 6, out);
    // str_src buffers hold real addresses: back to fake ones.
    std::map<uint64_t, bool> str_src;
    for (const auto& c : cols)
        if (c.str_src) str_src[c.str_src] = true;
    put<uint32_t>(out, nregions);
    for (const Region& r : regions) {
        put<uint64_t>(out, r.fake);
        put<uint64_t>(out, r.len);
        if (str_src.count((uint64_t)r.real)) {
            for (uint64_t i = 0; i + 8 <= r.len; i += 8) {
                uint64_t a;
                std::memcpy(&a, r.real + i, 8);
                put<uint64_t>(out, to_fake(a));
            }
            std::fwrite(r.real + (r.len & ~7ull), 1, r.len & 7, out);
        } else if (r.len) {
            std::fwrite(r.real, 1, r.len, out);
        }
    }
    for (uint32_t c = 0; c < ncols; c++)
        if (chars[c]) cols[c].out_values = 0;
    for (auto& p : pages) translate(p, to_fake);
    for (auto& c : cols) translate(c, to_fake);
    for (auto& d : dicts) translate(d, to_fake);
    put<uint32_t>(out, n);
    if (n) std::fwrite(pages.data(), sizeof(PageDesc), n, out);
    put<uint32_t>(out, ncols);
    if (ncols) std::fwrite(cols.data(), sizeof(ColumnDesc), ncols, out);
    put<uint32_t>(out, ndicts);
    if (ndicts) std::fwrite(dicts.data(), sizeof(DictDesc), ndicts, out);
    for (uint32_t c = 0; c < ncols; c++) {
        const ColumnDesc& col = cols[c];
        put<uint64_t>(out, chars[c] ? col.chars_capacity : 0);
        if (chars[c]) std::fwrite(chars[c], 1, col.chars_capacity, out);
        unsigned long long first_bad = ~0ull;
        if (col.physical == PT_BYTE_ARRAY && col.error == 0) {
            // A small grid, so the grid-stride loops stride.
            const uint64_t work = std::max<uint64_t>(col.chars_capacity, col.num_rows);
            const unsigned grid = (unsigned)std::min<uint64_t>(3, (work + 63) / 64 + 1);
            // The 16-aligned path and the other one, on copies, must agree.
            const uint64_t cap = col.chars_capacity;
            uint8_t* aligned = copy_ending_at(chars[c], cap, 0);
            uint8_t* odd = copy_ending_at(chars[c], cap, 1);
            const u32 width = col.out_width == 8 ? 8u : 4u;
            emu::launch(gp_validate_utf8, grid, 64, (const u8*)aligned, (u64)cap,
                        (const void*)to_real(col.out_offsets), width, (u64)col.num_rows, (u64*)&first_bad);
            unsigned long long first_bad_odd = ~0ull;
            emu::launch(gp_validate_utf8, grid, 64, (const u8*)odd + 1, (u64)cap,
                        (const void*)to_real(col.out_offsets), width, (u64)col.num_rows, (u64*)&first_bad_odd);
            std::free(aligned);
            std::free(odd);
            if (first_bad != first_bad_odd) {
                std::fprintf(stderr, "gp_validate_utf8: the aligned and unaligned paths disagree (%llu, %llu)\n",
                             first_bad, first_bad_odd);
                std::abort();
            }
        }
        put<uint64_t>(out, first_bad);
        pack(out, (const uint8_t*)to_real(col.out_valid), col.num_rows, col.out_valid != 0);
        const bool boolean = col.physical == PT_BOOLEAN;
        pack(out, boolean ? (const uint8_t*)to_real(col.out_values) : nullptr, col.num_rows, boolean);
    }
    std::fclose(out);
    for (const Region& r : regions) std::free(r.real);
    for (uint8_t* c : chars) std::free(c);
    return 0;
}
