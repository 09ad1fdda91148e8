// Experiment:
// copies straight from a hot file's page cache (the file
// mmapped, each piece pinned with cudaHostRegister read-only, copied, unpinned) against the staged
// path's way (pread into pinned buffers, then asynchronous copies), the whole file each way.
// Build on the GPU machine: nvcc -O2 -arch=sm_90 -o hostreg hostreg.cu
// Usage: hostreg FILE PIECE_MIB THREADS [populate: 1 maps with MAP_POPULATE]
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1);} } while (0)
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const char* path = argv[1];
  size_t chunk = (size_t)atof(argv[2]) * (1 << 20);
  int threads = atoi(argv[3]);
  bool populate = argc > 4 && atoi(argv[4]);
  int fd = open(path, O_RDONLY);
  struct stat st; fstat(fd, &st);
  size_t n = st.st_size;
  int ro = 0; CK(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, 0));
  void* d; CK(cudaMalloc(&d, n + (1 << 20)));
  CK(cudaFree(0));
  double t = now();
  char* m = (char*)mmap(nullptr, n, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (m == MAP_FAILED) { perror("mmap"); return 1; }
  double tmap = now() - t;
  size_t nchunks = (n + chunk - 1) / chunk;
  // pass 1: serial, per chunk phases
  double reg = 0, cp = 0, unreg = 0;
  cudaStream_t s0; CK(cudaStreamCreate(&s0));
  for (size_t i = 0; i < nchunks && i < 64; i++) {
    size_t off = i * chunk, len = std::min(chunk, n - off);
    double a = now();
    CK(cudaHostRegister(m + off, len, cudaHostRegisterReadOnly));
    double b = now();
    CK(cudaMemcpyAsync((char*)d + off, m + off, len, cudaMemcpyHostToDevice, s0));
    CK(cudaStreamSynchronize(s0));
    double c = now();
    CK(cudaHostUnregister(m + off));
    double e = now();
    reg += b - a; cp += c - b; unreg += e - c;
  }
  size_t done = std::min(nchunks, (size_t)64);
  double bytes = (double)std::min(n, done * chunk);
  printf("ro_supported=%d mmap%s %.2f ms; serial over %zu chunks of %zu MiB: register %.1f GB/s, copy %.1f GB/s, unregister %.1f GB/s\n",
         ro, populate ? "(populate)" : "", tmap * 1e3, done, chunk >> 20, bytes / reg / 1e9, bytes / cp / 1e9, bytes / unreg / 1e9);
  // pass 2: pipelined, threads each register, copy on own stream, unregister one behind
  for (int rep = 0; rep < 3; rep++) {
    std::atomic<size_t> next{0};
    double t0 = now();
    std::vector<std::thread> ws;
    std::atomic<long> regns{0}, unregns{0};
    for (int w = 0; w < threads; w++) ws.emplace_back([&] {
      cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      std::vector<std::pair<size_t, cudaEvent_t>> pend;
      size_t i;
      while ((i = next.fetch_add(1)) < nchunks) {
        size_t off = i * chunk, len = std::min(chunk, n - off);
        double a = now();
        CK(cudaHostRegister(m + off, len, cudaHostRegisterReadOnly));
        regns += (long)((now() - a) * 1e9);
        CK(cudaMemcpyAsync((char*)d + off, m + off, len, cudaMemcpyHostToDevice, s));
        cudaEvent_t ev; CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)); CK(cudaEventRecord(ev, s));
        pend.push_back({off, ev});
        if (pend.size() > 2) {
          CK(cudaEventSynchronize(pend[0].second));
          double u = now();
          CK(cudaHostUnregister(m + pend[0].first));
          unregns += (long)((now() - u) * 1e9);
          cudaEventDestroy(pend[0].second);
          pend.erase(pend.begin());
        }
      }
      CK(cudaStreamSynchronize(s));
      for (auto& p : pend) { CK(cudaHostUnregister(m + p.first)); cudaEventDestroy(p.second); }
    });
    for (auto& w : ws) w.join();
    double wall = now() - t0;
    printf("pipelined %d threads, %zu MiB chunks: %.2f ms, %.2f GB/s (register %.1f ms, unregister %.1f ms summed over threads)\n",
           threads, chunk >> 20, wall * 1e3, n / wall / 1e9, regns / 1e6, unregns / 1e6);
  }
  // baseline: pread into pinned 4 MiB buffers x3 per thread, async copy
  const size_t pc = 4 << 20;
  std::vector<char*> pins(threads * 3);
  for (auto& p : pins) CK(cudaHostAlloc((void**)&p, pc, 0));
  for (int rep = 0; rep < 3; rep++) {
    std::atomic<size_t> next{0};
    size_t np = (n + pc - 1) / pc;
    double t0 = now();
    std::vector<std::thread> ws;
    for (int w = 0; w < threads; w++) ws.emplace_back([&, w] {
      cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      char* buf[3]; cudaEvent_t ev[3];
      for (int k = 0; k < 3; k++) { buf[k] = pins[w * 3 + k]; CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming)); CK(cudaEventRecord(ev[k], s)); }
      int turn = 0; size_t i;
      while ((i = next.fetch_add(1)) < np) {
        size_t off = i * pc, len = std::min(pc, n - off);
        int k = turn++ % 3;
        CK(cudaEventSynchronize(ev[k]));
        if (pread(fd, buf[k], len, off) != (ssize_t)len) { perror("pread"); exit(1); }
        CK(cudaMemcpyAsync((char*)d + off, buf[k], len, cudaMemcpyHostToDevice, s));
        CK(cudaEventRecord(ev[k], s));
      }
      CK(cudaStreamSynchronize(s));
    });
    for (auto& w : ws) w.join();
    double wall = now() - t0;
    printf("staged baseline %d threads : %.2f ms, %.2f GB/s\n", threads, wall * 1e3, n / wall / 1e9);
  }
  return 0;
}
