// Shows what libcufile itself does on cuFileDriverOpen/Close, apart from gpu-parquet. On a GPU machine:
//   nvcc -o /tmp/probe tools/cufile_open_close_probe.c -lcuda -lcufile
//   compute-sanitizer --tool memcheck --leak-check full /tmp/probe rocx
// libcufile 1.15 (H200 machine, 2026-11-30): each open leaks 64 KiB of device memory and hits one
// CUDA_ERROR_INVALID_VALUE in cuMemFree, whether or not the driver is closed; and a process that stops
// statistics (t) and then closes (v or c) crashed (SIGSEGV) in 3 of 44 runs; other patterns, 0 of 52.
// Ops: r retain+set the primary context, x release it, o open, c close, v close_v2, l stats level 3,
// s stats start, t stats stop, p driver properties. Example: /tmp/probe rolsptvx
// Which leaks and invalid frees come from libcufile itself: cuFileDriverOpen/Close with no reads,
// in the patterns gpu-parquet uses. argv[1]: sequence of ops: o=open c=close r=retain+set ctx x=release ctx
#include <cuda.h>
#include <cufile.h>
#include <stdio.h>
int main(int argc, char **argv) {
  const char *ops = argc > 1 ? argv[1] : "rocx";
  CUdevice dev; CUcontext ctx = 0;
  cuInit(0); cuDeviceGet(&dev, 0);
  for (const char *p = ops; *p; p++) {
    CUfileError_t e; e.err = CU_FILE_SUCCESS;
    switch (*p) {
      case 'r': cuDevicePrimaryCtxRetain(&ctx, dev); cuCtxSetCurrent(ctx); break;
      case 'x': cuDevicePrimaryCtxRelease(dev); break;
      case 'o': e = cuFileDriverOpen(); break;
      case 'c': e = cuFileDriverClose(); break;
      case 's': e = cuFileStatsStart(); break;
      case 'l': e = cuFileSetStatsLevel(3); break;
      case 't': e = cuFileStatsStop(); break;
      case 'v': e = cuFileDriverClose_v2(); break;
      case 'p': { CUfileDrvProps_t pr; e = cuFileDriverGetProperties(&pr); } break;
    }
    printf("%c -> %d\n", *p, (int)e.err); fflush(stdout);
  }
  return 0;
}
