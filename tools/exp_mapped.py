#!/usr/bin/env python3
"""Experiment: DMA straight from the page cache (mmap + cuMemHostRegister READ_ONLY) against a
pinned-buffer copy. Usage: exp_mapped.py FILE [CHUNK_MB] [THREADS...]"""
import ctypes, os, sys, time, threading

cuda = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
cuda.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
cuda.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
cuda.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
cuda.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
cuda.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
cuda.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
cuda.cuStreamSynchronize.argtypes = [ctypes.c_void_p]


def ck(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")


ck(cuda.cuInit(0), "cuInit")
dev = ctypes.c_int()
ck(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
ck(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
ck(cuda.cuCtxSetCurrent(ctx), "set")

path = sys.argv[1]
chunk = int(sys.argv[2] if len(sys.argv) > 2 else 64) << 20
threads_list = [int(x) for x in sys.argv[3:]] or [1, 4, 8]
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
GB = size / 1e9
dptr = ctypes.c_uint64()
ck(cuda.cuMemAlloc_v2(ctypes.byref(dptr), size), "cuMemAlloc")
READ_ONLY = 0x08


def now():
    return time.perf_counter()


# Pinned ceiling: one 256 MiB pinned buffer copied over the device buffer.
pin = ctypes.c_void_p()
ck(cuda.cuMemHostAlloc(ctypes.byref(pin), 256 << 20, 0), "cuMemHostAlloc")
ctypes.memset(pin, 1, 256 << 20)
for rep in range(2):
    t = now()
    off = 0
    while off < size:
        n = min(256 << 20, size - off)
        ck(cuda.cuMemcpyHtoD_v2(dptr.value + off, pin, n), "copy")
        off += n
    dt = now() - t
    print(f"pinned buffer -> device, sync copies: {dt*1e3:.1f} ms, {GB/dt:.1f} GB/s")

# Whole file read with os.preadv in one thread into pinned memory? (the staged path's own figure is
# gpu-parquet's; here only the mapped path's parts)
for rep in range(2):
    t = now()
    p = libc.mmap(None, size, 1, 1 | 0x8000, fd, 0)  # PROT_READ, MAP_SHARED|MAP_POPULATE
    t_map = now() - t
    t = now()
    r = cuda.cuMemHostRegister_v2(p, size, READ_ONLY)
    t_reg = now() - t
    if r != 0:
        print(f"cuMemHostRegister(READ_ONLY) of the mapping: CUresult {r}")
        libc.munmap(p, size)
        break
    t = now()
    ck(cuda.cuMemcpyHtoD_v2(dptr.value, p, size), "copy mapped")
    t_cp = now() - t
    t = now()
    ck(cuda.cuMemHostUnregister(p), "unregister")
    t_unreg = now() - t
    libc.munmap(p, size)
    print(f"whole mapping: mmap+populate {t_map*1e3:.1f} ms, register {t_reg*1e3:.1f} ms, "
          f"copy {t_cp*1e3:.1f} ms ({GB/t_cp:.1f} GB/s), unregister {t_unreg*1e3:.1f} ms, "
          f"all {(t_map+t_reg+t_cp+t_unreg)*1e3:.1f} ms ({GB/(t_map+t_reg+t_cp+t_unreg):.1f} GB/s)")


def pipeline(nthreads, populate):
    """Each thread takes chunks: register, async copy on its stream, sync, unregister."""
    flags = 1 | (0x8000 if populate else 0)
    t0 = now()
    p = libc.mmap(None, size, 1, flags, fd, 0)
    chunks = [(o, min(chunk, size - o)) for o in range(0, size, chunk)]
    lock = threading.Lock()
    stats = {"reg": 0.0, "cp": 0.0, "unreg": 0.0}
    errors = []

    def work():
        ck(cuda.cuCtxSetCurrent(ctx), "set")
        s = ctypes.c_void_p()
        ck(cuda.cuStreamCreate(ctypes.byref(s), 1), "stream")
        while True:
            with lock:
                if not chunks:
                    return
                o, n = chunks.pop(0)
            a = now()
            r = cuda.cuMemHostRegister_v2(p + o, n, READ_ONLY)
            if r != 0:
                errors.append(r)
                return
            b = now()
            ck(cuda.cuMemcpyHtoDAsync_v2(dptr.value + o, p + o, n, s), "copy")
            ck(cuda.cuStreamSynchronize(s), "sync")
            c = now()
            ck(cuda.cuMemHostUnregister(p + o), "unreg")
            d = now()
            with lock:
                stats["reg"] += b - a
                stats["cp"] += c - b
                stats["unreg"] += d - c

    ts = [threading.Thread(target=work) for _ in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = now() - t0
    libc.munmap(p, size)
    print(f"pipeline {nthreads} threads, {chunk>>20} MiB chunks, populate={populate}: {dt*1e3:.1f} ms "
          f"({GB/dt:.1f} GB/s); summed reg {stats['reg']*1e3:.0f} cp {stats['cp']*1e3:.0f} "
          f"unreg {stats['unreg']*1e3:.0f} ms{'; errors ' + str(errors) if errors else ''}")


for n in threads_list:
    for populate in (False, True):
        pipeline(n, populate)
