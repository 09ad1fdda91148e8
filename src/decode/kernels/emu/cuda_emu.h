// A CPU emulation of the few CUDA features the decode kernels use, so their source compiles with a host
// C++20 compiler and runs (under AddressSanitizer and UndefinedBehaviorSanitizer) in the
// `kernels::emu` tests. Each CUDA thread of a block is a fiber on one OS thread (x86-64 context
// switch below, announced to ASan); blocks run one after another. So:
// - __shared__ variables become function statics (one block runs at a time, and every kernel sets up
//   its shared state itself before reading it);
// - __syncthreads is a barrier of the block's fibers; warp shuffles and ballots a barrier of the
//   warp's 32 fibers around an exchange (every call site must be reached by all 32 lanes, as the
//   kernels' full masks promise: a kernel that breaks that, or a barrier some threads skip, is reported
//   as a deadlock);
// - atomics are plain read-modify-writes (fibers switch only at barriers).
// Not emulated: the GPU's memory model beyond barriers, and timing. A misaligned typed access is
// caught by UBSan's alignment check (uint4 is 16-aligned, as in CUDA). Runs are deterministic.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the kernel emulation switches fibers with x86-64 assembly"
#endif

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))

// CUDA's device min / max (for the arithmetic types the kernels use).
template <class T>
inline T min(T a, T b) {
    return b < a ? b : a;
}
template <class T>
inline T max(T a, T b) {
    return a < b ? b : a;
}

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};

// Set by the scheduler before it resumes a fiber.
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

// Saves the callee-saved registers and the stack pointer in *save, switches to the stack `to`
// (as saved by an earlier switch, or prepared by emu::prepare) and returns there.
extern "C" void emu_switch(void** save, void* to);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");

namespace emu {

constexpr unsigned MAX_THREADS = 256;
constexpr size_t STACK_BYTES = 256 * 1024;

struct Fiber {
    void* sp = nullptr;
    uint8_t* stack = nullptr;
    void* fake_stack = nullptr;
    bool done = false;
};

struct Barrier {
    unsigned expected = 0, count = 0;
    uint64_t generation = 0;
};

struct Scheduler {
    void* sp = nullptr;  // the scheduler's own stack, while a fiber runs
    void* fake_stack = nullptr;
    const void* main_bottom = nullptr;
    size_t main_size = 0;
    std::vector<Fiber> fibers;
    unsigned current = 0;
    uint64_t progress = 0;  // barrier arrivals and finished fibers
    std::function<void()> body;
    Barrier block;
    std::vector<Barrier> warps;
    std::vector<uint64_t> slots;  // 32 per warp
    ~Scheduler() {
        for (Fiber& f : fibers) std::free(f.stack);
    }
};

inline Scheduler sched;

inline void start_switch(void** fake, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}
inline void finish_switch(void* fake, const void** bottom, size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}

// From the running fiber back to the scheduler (for good when `dying`).
inline void to_scheduler(bool dying) {
    Fiber& f = sched.fibers[sched.current];
    start_switch(dying ? nullptr : &f.fake_stack, sched.main_bottom, sched.main_size);
    emu_switch(&f.sp, sched.sp);
    finish_switch(f.fake_stack, &sched.main_bottom, &sched.main_size);
}

[[noreturn]] inline void fiber_start() {
    finish_switch(nullptr, &sched.main_bottom, &sched.main_size);
    sched.body();
    sched.fibers[sched.current].done = true;
    sched.progress++;
    to_scheduler(true);
    std::abort();  // never resumed
}

// A fresh stack whose first switch lands in fiber_start (with the ABI's call alignment).
inline void* prepare(uint8_t* stack) {
    uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t* p = (uint64_t*)top;
    *--p = 0;                             // fiber_start's (unused) return address
    *--p = (uint64_t)(void*)&fiber_start;  // where emu_switch's ret goes
    for (int i = 0; i < 6; i++) *--p = 0;  // rbp rbx r12 r13 r14 r15
    return p;
}

inline void barrier_wait(Barrier& b) {
    const uint64_t gen = b.generation;
    sched.progress++;
    if (++b.count == b.expected) {
        b.count = 0;
        b.generation++;
        return;
    }
    while (b.generation == gen) to_scheduler(false);
}

inline void run_block(unsigned block_x, unsigned block_dim, unsigned grid_dim) {
    if (sched.fibers.empty()) {
        sched.fibers.resize(MAX_THREADS);
        for (Fiber& f : sched.fibers) f.stack = (uint8_t*)std::malloc(STACK_BYTES);
    }
    for (unsigned t = 0; t < block_dim; t++) {
        sched.fibers[t].done = false;
        sched.fibers[t].sp = prepare(sched.fibers[t].stack);
    }
    unsigned left = block_dim;
    while (left > 0) {
        const uint64_t before = sched.progress;
        for (unsigned t = 0; t < block_dim; t++) {
            Fiber& f = sched.fibers[t];
            if (f.done) continue;
            sched.current = t;
            threadIdx = dim3{t, 0, 0};
            blockIdx = dim3{block_x, 0, 0};
            blockDim = dim3{block_dim, 1, 1};
            gridDim = dim3{grid_dim, 1, 1};
            start_switch(&sched.fake_stack, f.stack, STACK_BYTES);
            emu_switch(&sched.sp, f.sp);
            finish_switch(sched.fake_stack, nullptr, nullptr);
            if (f.done) left--;
        }
        if (sched.progress == before) {
            std::fprintf(stderr, "emu: deadlock in block %u: threads wait at barriers others never reach\n",
                         block_x);
            std::abort();
        }
    }
}

// Launches kernel<<<grid, block>>>(args...) and returns when every block has run.
template <class... P, class... A>
void launch(void (*kernel)(P...), unsigned grid, unsigned block, A... args) {
    if (block == 0 || block > MAX_THREADS || block % 32 != 0) {
        std::fprintf(stderr, "emu: unsupported block size %u\n", block);
        std::abort();
    }
    sched.body = [&] { kernel(static_cast<P>(args)...); };
    for (unsigned b = 0; b < grid; b++) {
        sched.block = Barrier{block, 0, 0};
        sched.warps.assign(block / 32, Barrier{32, 0, 0});
        sched.slots.assign(block, 0);
        run_block(b, block, grid);
    }
}

template <class T>
uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8);
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
T from_bits(uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}

inline Barrier& warp_barrier() { return sched.warps[threadIdx.x / 32]; }
inline uint64_t* warp_slots() { return &sched.slots[(threadIdx.x / 32) * 32]; }

template <class T>
T exchange(T v, unsigned src_lane) {
    uint64_t* s = warp_slots();
    s[threadIdx.x % 32] = to_bits(v);
    barrier_wait(warp_barrier());
    const T r = from_bits<T>(s[src_lane % 32]);
    barrier_wait(warp_barrier());
    return r;
}

}  // namespace emu

inline void __syncthreads() { emu::barrier_wait(emu::sched.block); }
// A barrier of the warp's 32 fibers (the kernels call it with the full mask).
inline void __syncwarp(unsigned = 0xffffffffu) { emu::barrier_wait(emu::warp_barrier()); }

[[noreturn]] inline void __trap() {
    std::fprintf(stderr, "emu: __trap\n");
    std::abort();
}

template <class T>
T __shfl_sync(unsigned, T v, int src_lane) {
    return emu::exchange(v, (unsigned)src_lane);
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta) {
    const unsigned lane = threadIdx.x % 32;
    const T got = emu::exchange(v, lane >= delta ? lane - delta : lane);
    return lane >= delta ? got : v;
}
inline unsigned __ballot_sync(unsigned, int pred) {
    uint64_t* s = emu::warp_slots();
    s[threadIdx.x % 32] = pred ? 1 : 0;
    emu::barrier_wait(emu::warp_barrier());
    unsigned m = 0;
    for (unsigned l = 0; l < 32; l++) m |= (unsigned)s[l] << l;
    emu::barrier_wait(emu::warp_barrier());
    return m;
}

template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    return emu::exchange(v, (threadIdx.x % 32) ^ (unsigned)lane_mask);
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    const unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (shift & 31));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
    const unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (shift < 32 ? shift : 32));
}

inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned val) {
    const unsigned old = *p;
    if (old == cmp) *p = val;
    return old;
}
inline unsigned atomicOr(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = old | v;
    return old;
}
inline unsigned atomicMin(unsigned* p, unsigned v) {
    const unsigned old = *p;
    if (v < old) *p = v;
    return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    const unsigned long long old = *p;
    if (v < old) *p = v;
    return old;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
    const unsigned old = *p;
    if (v > old) *p = v;
    return old;
}
inline unsigned atomicExch(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = v;
    return old;
}
// Blocks run one after another: every write is seen by the next.
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = old + v;
    return old;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    const unsigned long long old = *p;
    *p = old + v;
    return old;
}
