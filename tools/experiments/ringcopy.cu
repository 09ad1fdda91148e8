// Experiment:
// does merging the staged path's copies help? The staged
// way (each of THREADS threads preads 4 MiB pieces of a hot file into 3 pinned buffers of its own and
// copies each on its own stream: one copy per piece) against one pinned ring of the same size (THREADS
// x 3 pieces), pieces placed in file order, their copies issued in that order on one stream, each
// copy taking every piece read by then that follows in the ring (MAXRUN pieces at most). The copy
// engine runs copies one after another, each about 2.7 us beside its bytes (copyrate.cu): 680 copies
// of 4 MiB are some 1.8 ms of a 2.85 GB read.
// Build on the GPU machine: nvcc -O2 -arch=sm_90 -o ringcopy ringcopy.cu
// Usage: ringcopy FILE [THREADS=12] [REPS=5]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1);} } while (0)
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static const size_t PC = 4 << 20;

static void read_all(int fd, char* dst, size_t len, size_t off) {
  while (len) {
    ssize_t r = pread(fd, dst, len, off);
    if (r <= 0) { perror("pread"); exit(1); }
    dst += r; len -= r; off += r;
  }
}

// The staged way: per-thread buffers and streams.
static double staged(int fd, size_t n, char* d, int threads, std::vector<char*>& pins) {
  std::atomic<size_t> next{0};
  size_t np = (n + PC - 1) / PC;
  double t0 = now();
  std::vector<std::thread> ws;
  for (int w = 0; w < threads; w++) ws.emplace_back([&, w] {
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    char* buf[3]; cudaEvent_t ev[3];
    for (int k = 0; k < 3; k++) { buf[k] = pins[w * 3 + k]; CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming)); CK(cudaEventRecord(ev[k], s)); }
    int turn = 0; size_t i;
    while ((i = next.fetch_add(1)) < np) {
      size_t off = i * PC, len = std::min(PC, n - off);
      int k = turn++ % 3;
      CK(cudaEventSynchronize(ev[k]));
      read_all(fd, buf[k], len, off);
      CK(cudaMemcpyAsync(d + off, buf[k], len, cudaMemcpyHostToDevice, s));
      CK(cudaEventRecord(ev[k], s));
    }
    CK(cudaStreamSynchronize(s));
    for (auto& e : ev) cudaEventDestroy(e);
    cudaStreamDestroy(s);
  });
  for (auto& w : ws) w.join();
  return now() - t0;
}

// The ring: pieces in file order in one pinned region, copies in order on one stream, merged.
static double ring(int fd, size_t n, char* d, int threads, char* rbuf, size_t slots, size_t maxrun, cudaStream_t s,
                   std::vector<cudaEvent_t>& evs, size_t* copies) {
  size_t np = (n + PC - 1) / PC;
  std::vector<char> done(np, 0);
  std::vector<int> copy_of(np, -1);
  size_t issued = 0, nev = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<size_t> next{0};
  double t0 = now();
  std::vector<std::thread> ws;
  for (int w = 0; w < threads; w++) ws.emplace_back([&] {
    size_t g;
    while ((g = next.fetch_add(1)) < np) {
      if (g >= slots) {
        // The copy that read this slot on the ring's last lap must be done.
        cudaEvent_t ev;
        {
          std::unique_lock<std::mutex> l(mu);
          cv.wait(l, [&] { return issued > g - slots; });
          ev = evs[copy_of[g - slots]];
        }
        CK(cudaEventSynchronize(ev));
      }
      size_t off = g * PC, len = std::min(PC, n - off);
      read_all(fd, rbuf + (g % slots) * PC, len, off);
      std::lock_guard<std::mutex> l(mu);
      done[g] = 1;
      while (issued < np && done[issued]) {
        size_t a = issued, b = a + 1;
        while (b < np && done[b] && b % slots != 0 && b - a < maxrun) b++;
        size_t bytes = std::min(b * PC, n) - a * PC;
        CK(cudaMemcpyAsync(d + a * PC, rbuf + (a % slots) * PC, bytes, cudaMemcpyHostToDevice, s));
        CK(cudaEventRecord(evs[nev], s));
        for (size_t k = a; k < b; k++) copy_of[k] = (int)nev;
        nev++;
        issued = b;
      }
      cv.notify_all();
    }
  });
  for (auto& w : ws) w.join();
  CK(cudaStreamSynchronize(s));
  *copies = nev;
  return now() - t0;
}

int main(int argc, char** argv) {
  const char* path = argv[1];
  int threads = argc > 2 ? atoi(argv[2]) : 12;
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  int fd = open(path, O_RDONLY);
  struct stat st; fstat(fd, &st);
  size_t n = st.st_size, np = (n + PC - 1) / PC;
  char* d; CK(cudaMalloc(&d, n + PC));
  std::vector<char*> pins(threads * 3);
  for (auto& p : pins) CK(cudaHostAlloc((void**)&p, PC, 0));
  size_t slots = threads * 3;
  char* rbuf; CK(cudaHostAlloc((void**)&rbuf, slots * PC, 0));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> evs(np);
  for (auto& ev : evs) CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  // Warm: page cache and pinned pages touched.
  staged(fd, n, d, threads, pins);
  size_t c = 0;
  ring(fd, n, d, threads, rbuf, slots, 1, s, evs, &c);
  const size_t runs[] = {1, 4, 16, 1000};
  std::vector<std::vector<double>> walls(5);
  std::vector<size_t> ncopies(5);
  for (int r = 0; r < reps; r++) {
    walls[0].push_back(staged(fd, n, d, threads, pins));
    for (int v = 0; v < 4; v++) {
      walls[v + 1].push_back(ring(fd, n, d, threads, rbuf, slots, runs[v], s, evs, &c));
      ncopies[v + 1] += c;
    }
  }
  const char* names[] = {"staged (per-thread buffers, own streams)", "ring, one stream, no merging", "ring, merge up to 4",
                         "ring, merge up to 16", "ring, merge unbounded"};
  printf("%s: %zu bytes, %zu pieces of 4 MiB, %d threads, %d reps (interleaved)\n", path, n, np, threads, reps);
  for (int v = 0; v < 5; v++) {
    auto w = walls[v];
    std::sort(w.begin(), w.end());
    printf("%-44s best %.2f ms (%.2f GB/s), median %.2f ms; copies a read %s%.0f; walls", names[v], w[0] * 1e3, n / w[0] / 1e9,
           w[w.size() / 2] * 1e3, v ? "" : "", v ? (double)ncopies[v] / reps : (double)np);
    for (double x : walls[v]) printf(" %.2f", x * 1e3);
    printf("\n");
  }
  return 0;
}
