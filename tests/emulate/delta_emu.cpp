// CPU emulation of the kernels in src/decode/kernels/delta.cu, checked against their host references,
// for machines without a GPU. Each CUDA thread is a std::thread; __syncthreads is a block-wide
// std::barrier and a warp shuffle a per-warp exchange between two barriers, so a barrier some threads
// miss deadlocks here as it would on the device; blocks run one after another (so __shared__ is
// `static`). It found a barrier race in the first version of delta.cu. It is no substitute for a run on
// a GPU (no memory model beyond what the barriers give, no timing), and CI does not run it.
//
//   GP_DELTA_CASES=/tmp/delta_cases.txt cargo test --test delta_decode emulation_cases -- --ignored
//   g++ -std=c++20 -O2 -pthread -I src/decode/kernels -o /tmp/delta_emu tests/emulate/delta_emu.cpp
//   /tmp/delta_emu /tmp/delta_cases.txt 64      # block size (a multiple of 32, at most 256); [stride]
//
// Per case (see emulation_case in tests/delta_decode.rs) it runs the four value kernels, compares each
// page's error and detail and, on pages without one, the values written; then, for byte arrays, the copy
// kernel with the offsets and mutations the case gives, and its errors and characters.
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

struct Dim3 { unsigned x, y, z; };
thread_local Dim3 threadIdx;
thread_local Dim3 blockIdx;
Dim3 blockDim;

static std::barrier<>* g_block_barrier;
static std::barrier<>* g_warp_barrier[32];
static unsigned long long g_warp_buf[32][32];

#define __device__
#define __global__
#define __shared__ static
#define __launch_bounds__(x)

inline void __syncthreads() { g_block_barrier->arrive_and_wait(); }

template <class T>
T __shfl_up_sync(unsigned, T x, unsigned o) {
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    g_warp_buf[warp][lane] = (unsigned long long)x;
    g_warp_barrier[warp]->arrive_and_wait();
    T y = lane >= o ? (T)g_warp_buf[warp][lane - o] : x;
    g_warp_barrier[warp]->arrive_and_wait();
    return y;
}

inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned val) {
    std::atomic_ref<unsigned> a(*p);
    unsigned expected = cmp;
    a.compare_exchange_strong(expected, val);
    return expected;
}

inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    std::atomic_ref<unsigned long long> a(*p);
    unsigned long long cur = a.load();
    while (v < cur && !a.compare_exchange_weak(cur, v)) {}
    return cur;
}

template <class T> inline T min(T a, T b) { return a < b ? a : b; }
template <class T> inline T max(T a, T b) { return a > b ? a : b; }

#include "common.cuh"
#include "delta.cu"

typedef void (*Kernel)(PageDesc*, u32, ColumnDesc*);

static void launch(Kernel k, unsigned grid, unsigned block, PageDesc* pages, u32 n, ColumnDesc* cols) {
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        std::barrier<> bar(block);
        g_block_barrier = &bar;
        std::vector<std::unique_ptr<std::barrier<>>> wb;
        for (unsigned w = 0; w < block / 32; w++) {
            wb.emplace_back(new std::barrier<>(32));
            g_warp_barrier[w] = wb.back().get();
        }
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < block; t++) {
            ts.emplace_back([=] {
                threadIdx = {t, 0, 0};
                blockIdx = {b, 0, 0};
                k(pages, n, cols);
            });
        }
        for (auto& t : ts) t.join();
    }
}

static std::vector<u8> unhex(const std::string& s) {
    std::vector<u8> out;
    if (s == "-") return out;
    for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back((u8)std::stoul(s.substr(i, 2), nullptr, 16));
    return out;
}

template <class T> static std::vector<T> nums(std::istringstream& is) {
    std::vector<T> v;
    long long x;
    while (is >> x) v.push_back((T)x);
    return v;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: delta_emu CASES [BLOCK_SIZE [STRIDE]]\n";
        return 2;
    }
    std::ifstream in(argv[1]);
    unsigned block = argc > 2 ? atoi(argv[2]) : 64;
    size_t stride = argc > 3 ? atoi(argv[3]) : 1;  // run every stride-th case
    if (!in || block == 0 || block % 32 != 0 || block > GP_DELTA_THREADS || stride == 0) {
        std::cerr << "cannot read the cases, or a bad block size or stride\n";
        return 2;
    }
    std::string line;
    size_t cases = 0, run = 0, failures = 0;
    std::string name;
    u32 physical = 0, type_len = 0, max_def = 0, dw = 0;
    u64 rows = 0;
    std::vector<std::vector<u8>> values;
    std::vector<PageDesc> pages;
    std::vector<u8> dense;
    std::vector<u32> strlen_;
    std::vector<u64> strsrc;
    std::vector<i32> vidx, offsets;
    std::vector<u8> out;
    ColumnDesc col;
    bool skip = false;
    auto fail = [&](const std::string& what) {
        failures++;
        if (failures < 30) std::cout << "FAIL " << name << ": " << what << "\n";
    };
    std::vector<u32> err_expected;
    while (std::getline(in, line)) {
        std::istringstream is(line);
        std::string tag;
        is >> tag;
        if (tag == "CASE") {
            is >> name;
            skip = (cases++ % stride) != 0;
            pages.clear();
            values.clear();
        }
        if (skip) continue;
        if (tag == "COL") {
            is >> physical >> type_len >> max_def >> rows >> dw;
            dense.assign(rows * dw + 1, 0);
            strlen_.assign(rows + 1, 0);
            strsrc.assign(rows + 1, 0);
            vidx.assign(rows + 1, -1);
            memset(&col, 0, sizeof col);
            col.num_rows = rows;
            col.dense = (u64)dense.data();
            col.dense_width = dw;
            col.out_width = type_len;
            col.str_len = (u64)strlen_.data();
            col.str_src = (u64)strsrc.data();
            col.vidx = (u64)vidx.data();
            col.physical = physical;
        } else if (tag == "PAGE") {
            PageDesc p;
            memset(&p, 0, sizeof p);
            std::string h;
            is >> p.encoding >> p.num_values >> p.num_non_null >> p.row_start >> h;
            values.push_back(unhex(h));
            p.values_len = values.back().size();
            p.physical = physical;
            p.type_len = type_len;
            p.max_def = max_def;
            p.def_bit_width = max_def;
            pages.push_back(p);
        } else if (tag == "ERR") {
            // The streams' addresses, now that `values` no longer grows.
            for (size_t i = 0; i < pages.size(); i++) pages[i].values = (u64)values[i].data();
            run++;
            u32 n = pages.size();
            launch(gp_delta_binary_packed, n, block, pages.data(), n, &col);
            launch(gp_delta_length_byte_array, n, block, pages.data(), n, &col);
            launch(gp_delta_byte_array_lengths, n, block, pages.data(), n, &col);
            launch(gp_byte_stream_split, n, block, pages.data(), n, &col);
            auto e = nums<u32>(is);
            err_expected = e;
            for (size_t i = 0; i < pages.size(); i++) {
                if (pages[i].error != e[2 * i] || pages[i].error_detail != e[2 * i + 1]) {
                    fail("page " + std::to_string(i) + " error " + std::to_string(pages[i].error) + "/" +
                         std::to_string(pages[i].error_detail) + " want " + std::to_string(e[2 * i]) + "/" +
                         std::to_string(e[2 * i + 1]));
                }
            }
        } else if (tag == "DENSE") {
            std::string h;
            is >> h;
            auto want = unhex(h);
            for (auto& p : pages) {
                if (p.error || err_expected.empty()) continue;
                if (physical == PT_BYTE_ARRAY && p.encoding != ENC_DELTA_BYTE_ARRAY) continue;
                u32 w = physical == PT_BYTE_ARRAY ? 4 : type_len;
                for (u64 k = 0; k < p.num_non_null; k++) {
                    u64 at = (p.row_start + k) * dw;
                    if (memcmp(&dense[at], &want[at], w) != 0) {
                        fail("dense value " + std::to_string(p.row_start + k));
                        break;
                    }
                }
            }
        } else if (tag == "STRLEN" || tag == "SRC") {
            auto want = nums<long long>(is);
            for (size_t pi = 0; pi < pages.size(); pi++) {
                auto& p = pages[pi];
                if (p.error || physical != PT_BYTE_ARRAY) continue;
                for (u64 k = 0; k < p.num_non_null; k++) {
                    u64 idx = p.row_start + k;
                    long long got = tag == "STRLEN" ? (long long)strlen_[idx] : (long long)(strsrc[idx] - p.values);
                    if (got != want[idx]) {
                        fail(tag + " " + std::to_string(idx) + " got " + std::to_string(got) + " want " +
                             std::to_string(want[idx]));
                        break;
                    }
                }
            }
        } else if (tag == "PATCH") {
            u64 k;
            u32 v;
            is >> k >> v;
            memcpy(&dense[k * 4], &v, 4);
        } else if (tag == "VIDX") {
            auto v = nums<i32>(is);
            for (size_t i = 0; i < v.size(); i++) vidx[i] = v[i];
        } else if (tag == "OFFSETS") {
            offsets = nums<i32>(is);
            col.out_offsets = (u64)offsets.data();
        } else if (tag == "CAP") {
            u64 cap;
            is >> cap;
            u64 total = offsets.empty() ? 0 : (u64)std::max(offsets.back(), 0);
            out.assign(std::max(total, cap) + 1, 0xEE);
            col.out_values = (u64)out.data();
            col.chars_capacity = cap;
        } else if (tag == "ERR2") {
            u32 n = pages.size();
            launch(gp_delta_byte_array_copy, n, block, pages.data(), n, &col);
            auto e = nums<u32>(is);
            err_expected = e;
            for (size_t i = 0; i < pages.size(); i++) {
                if (pages[i].error != e[2 * i] || pages[i].error_detail != e[2 * i + 1]) {
                    fail("copy page " + std::to_string(i) + " error " + std::to_string(pages[i].error) + "/" +
                         std::to_string(pages[i].error_detail) + " want " + std::to_string(e[2 * i]) + "/" +
                         std::to_string(e[2 * i + 1]));
                }
            }
        } else if (tag == "OUT") {
            std::string h;
            is >> h;
            auto want = unhex(h);
            for (auto& p : pages) {
                if (p.error || p.encoding != ENC_DELTA_BYTE_ARRAY) continue;
                u64 a = offsets[p.row_start], b = offsets[p.row_start + p.num_values];
                if (b > want.size() || memcmp(&out[a], &want[a], b - a) != 0) {
                    fail("out bytes of page at row " + std::to_string(p.row_start));
                }
            }
        }
    }
    std::cout << "block " << block << ": ran " << run << " of " << cases << " cases, " << failures << " failures\n";
    return failures != 0;
}
