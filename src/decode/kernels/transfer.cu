// Transfers run by the SMs instead of a copy engine. While the staged reads keep the copy engines busy
// with megabytes of queued host-to-device copies, a small cuMemcpy or cuMemset from the decoder waits
// behind them; these kernels do not. Either side of a copy may be page-locked host memory mapped into
// the device's address space. Host reference: the host executor's own upload, read and alloc
// (exec.rs), which the decode tests compare the GPU's results with.

namespace gpcore {
__device__ inline u64 grid_thread() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline u64 grid_threads() { return (u64)gridDim.x * blockDim.x; }
}  // namespace gpcore

// Grid-stride (any grid and block): dst[i] = src[i] for i < n; 16-byte words when both are 16-byte
// aligned. The ranges must not overlap.
extern "C" __global__ void gp_copy_bytes(const u8* __restrict__ src, u8* __restrict__ dst, u64 n) {
    using namespace gpcore;
    const u64 first = grid_thread(), stride = grid_threads();
    u64 done = 0;
    if ((((u64)src | (u64)dst) & 15) == 0) {
        const u64 words = n >> 4;
        for (u64 i = first; i < words; i += stride) ((uint4*)dst)[i] = ((const uint4*)src)[i];
        done = words << 4;
    }
    for (u64 i = done + first; i < n; i += stride) dst[i] = src[i];
}

// Grid-stride (any grid and block): dst[i] = 0 for i < n; 16-byte words from the first aligned byte.
extern "C" __global__ void gp_fill_zero(u8* dst, u64 n) {
    using namespace gpcore;
    const u64 first = grid_thread(), stride = grid_threads();
    const u64 head = ((16 - ((u64)dst & 15)) & 15) < n ? ((16 - ((u64)dst & 15)) & 15) : n;
    for (u64 i = first; i < head; i += stride) dst[i] = 0;
    const u64 words = (n - head) >> 4;
    uint4* w = (uint4*)(dst + head);
    for (u64 i = first; i < words; i += stride) w[i] = make_uint4(0, 0, 0, 0);
    for (u64 i = head + (words << 4) + first; i < n; i += stride) dst[i] = 0;
}

// Block per item (grid n, any block): items holds n triples (src, dst, len) of u64; copies each, like
// gp_copy_bytes. The ranges must not overlap.
extern "C" __global__ void gp_copy_batch(const u64* items, u32 n) {
    if (blockIdx.x >= n) return;
    const u8* src = (const u8*)items[3 * blockIdx.x];
    u8* dst = (u8*)items[3 * blockIdx.x + 1];
    const u64 len = items[3 * blockIdx.x + 2];
    u64 done = 0;
    if ((((u64)src | (u64)dst) & 15) == 0) {
        const u64 words = len >> 4;
        for (u64 i = threadIdx.x; i < words; i += blockDim.x) ((uint4*)dst)[i] = ((const uint4*)src)[i];
        done = words << 4;
    }
    for (u64 i = done + threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
}
