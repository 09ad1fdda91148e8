// Experiment:
// the H2D copy rate of back-to-back copies of one piece
// size from pinned memory, on 1 or 12 streams, alone and beside threads doing memcpy (the staged path's
// `pread`s copy the page cache so). Build on the GPU machine: nvcc -O2 -arch=sm_90 -o copyrate copyrate.cu
#include <cuda_runtime.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  const size_t total = 2851ull << 20, hsz = 512ull << 20;
  char* h; CK(cudaHostAlloc((void**)&h, hsz, 0)); memset(h, 1, hsz);
  char* d; CK(cudaMalloc((void**)&d, total));
  std::vector<cudaStream_t> ss(16); for (auto& s : ss) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto run = [&](size_t piece, int streams) {
    double t = now();
    size_t k = 0;
    for (size_t off = 0; off < total; off += piece, k++) {
      size_t len = std::min(piece, total - off);
      CK(cudaMemcpyAsync(d + off, h + (off % (hsz - piece + 1)) / 4096 * 4096 /* pieces up to the host buffer's size */, len, cudaMemcpyHostToDevice, ss[k % streams]));
    }
    for (int i = 0; i < streams; i++) CK(cudaStreamSynchronize(ss[i]));
    return total / (now() - t) / 1e9;
  };
  run(64 << 20, 1);
  for (size_t p : {1, 2, 4, 8, 64, 512}) for (int s : {1, 12}) printf("piece %zu MiB, %d streams: %.2f GB/s\n", p, s, run(p << 20, s));
  // beside CPU load: T threads memcpy 64 MiB blocks from a 2 GiB pageable source
  const size_t src_sz = 2ull << 30; char* src = (char*)malloc(src_sz); memset(src, 2, src_sz);
  for (int T : {4, 8, 12}) {
    std::atomic<bool> stop{false}; std::atomic<size_t> moved{0};
    std::vector<std::thread> ws;
    for (int i = 0; i < T; i++) ws.emplace_back([&, i] {
      char* dst = (char*)malloc(4 << 20); memset(dst, 0, 4 << 20);
      size_t o = (size_t)i * (64 << 20);
      while (!stop) { memcpy(dst, src + o % (src_sz - (4 << 20)), 4 << 20); o += 4 << 20; moved += 4 << 20; }
      free(dst);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    double t = now(); size_t m0 = moved;
    double r = run(4 << 20, 12);
    double dt = now() - t; size_t m = moved - m0;
    stop = true; for (auto& w : ws) w.join();
    printf("piece 4 MiB, 12 streams, beside %d memcpy threads: copy %.2f GB/s, memcpy %.2f GB/s\n", T, r, m / dt / 1e9);
  }
  return 0;
}
