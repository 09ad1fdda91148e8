#!/usr/bin/env python3
"""On the GPU machine: what a consumer sees in gpu_parquet's __arrow_c_device_array__ export: each
buffer's address as the CUDA runtime knows it (cupy's pointerGetAttributes), then pylibcudf's import.
Usage: device_export_probe.py FILE"""
import ctypes
import sys

import cupy as cp

import gpu_parquet


class ArrowArray(ctypes.Structure):
    pass


ArrowArray._fields_ = [
    ("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)), ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p),
]


class ArrowDeviceArray(ctypes.Structure):
    _fields_ = [("array", ArrowArray), ("device_id", ctypes.c_int64), ("device_type", ctypes.c_int32),
                ("sync_event", ctypes.c_void_p), ("reserved", ctypes.c_int64 * 3)]


get = ctypes.pythonapi.PyCapsule_GetPointer
get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]

t = gpu_parquet.read(sys.argv[1], steps=1, backend="staged")
schema_capsule, array_capsule = t.__arrow_c_device_array__()
dev = ArrowDeviceArray.from_address(get(array_capsule, b"arrow_device_array"))
print(f"device_type {dev.device_type} device_id {dev.device_id} sync_event {dev.sync_event:#x} length {dev.array.length}")


def walk(a, depth):
    for b in range(a.n_buffers):
        p = a.buffers[b]
        try:
            attr = cp.cuda.runtime.pointerGetAttributes(p) if p else None
            what = f"type {attr.type} device {attr.device}" if attr else "null"
        except Exception as e:  # noqa: BLE001
            what = f"runtime: {e}"
        print(f"{'  ' * depth}buffer {b}: {p or 0:#x} {what}")
    for c in range(a.n_children):
        print(f"{'  ' * depth}child {c}: length {a.children[c].contents.length} offset {a.children[c].contents.offset}")
        walk(a.children[c].contents, depth + 1)


walk(dev.array, 0)
import pylibcudf as plc  # noqa: E402

try:
    plc.Table.from_arrow(t)
    print("pylibcudf Table.from_arrow: ok")
except Exception as e:  # noqa: BLE001
    print(f"pylibcudf Table.from_arrow: {e}")
