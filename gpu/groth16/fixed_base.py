"""Batched fixed-base multiplication [s_i * P]: how setup computes a proving key's queries.

One table per base (gpu/kernels/fixed_base.cuh: k * 2^(8j) * P for the 32 byte-windows j and
k < 256), then 32 mixed additions a scalar. The kernel code runs on the device (the CUDA backend)
and, through its host build (``host_fixed_base``), in the CPU tests of that code. The CPU
backend's setup runs ``cpu_fixed_base``: the same algorithm on 64-bit limbs
(gpu/native/fixed_base_cpu.cpp) on every core; point by point through arkworks it would be
0.21 ms a G1 point and 0.63 ms a G2 point on this machine.
"""
from __future__ import annotations

import ctypes
import threading

from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G1Point

from arith import native

from .points import WIDTH, PointArray

WINDOWS, ENTRIES = 32, 256
_lib = None
_cpu_lib = None
_lock = threading.Lock()


def table(base) -> np.ndarray:
    """(WINDOWS * ENTRIES, width) bytes: entry j * 256 + k is k * 2^(8j) * base."""
    kind = type(base)
    rows = []
    window_base = base
    for _ in range(WINDOWS):
        acc = kind.identity()
        for _k in range(ENTRIES):
            rows.append(acc.to_xy_bytes_le())
            acc = acc + window_base
        window_base = acc  # 256 * (2^(8j) P) = 2^(8(j+1)) P
    return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(-1, WIDTH[kind])


_NATIVE = Path(__file__).resolve().parent.parent / "native"
_KERNELS = _NATIVE.parent / "kernels"


def _host():
    global _lib
    with _lock:
        if _lib is None:
            L = ctypes.CDLL(str(native.build(_NATIVE / "setup_host.cpp", stem="setup",
                                             include_dirs=(_KERNELS,))))
            for name in ("host_fixed_base_g1", "host_fixed_base_g2"):
                getattr(L, name).argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 3
            _lib = L
    return _lib


def host_fixed_base(base, scalars: np.ndarray) -> PointArray:
    """[s * base for s in scalars] on the CPU cores (zeros give the identity)."""
    kind = type(base)
    scalars = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
    t = table(base)
    out = PointArray.empty(kind, len(scalars))
    fn = _host().host_fixed_base_g1 if kind is G1Point else _host().host_fixed_base_g2
    fn(len(scalars), t.ctypes.data, scalars.ctypes.data, out.raw.ctypes.data)
    return out


def _cpu():
    global _cpu_lib
    with _lock:
        if _cpu_lib is None:
            L = ctypes.CDLL(str(native.build(_NATIVE / "fixed_base_cpu.cpp", stem="fixed_base_cpu")))
            for name in ("cpu_fixed_base_g1", "cpu_fixed_base_g2"):
                getattr(L, name).argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 3
            _cpu_lib = L
    return _cpu_lib


def cpu_fixed_base(base, scalars: np.ndarray) -> PointArray:
    """[s * base for s in scalars] on every CPU core, 64-bit limbs (zeros give the identity):
    what the CPU backend's setup computes a proving key's queries with. ``scalars``: canonical
    Fr, (n, 4) uint64; the result equals arkworks' point by point, byte for byte."""
    kind = type(base)
    scalars = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
    out = PointArray.empty(kind, len(scalars))
    if len(scalars):
        t = table(base)
        fn = _cpu().cpu_fixed_base_g1 if kind is G1Point else _cpu().cpu_fixed_base_g2
        fn(len(scalars), t.ctypes.data, scalars.ctypes.data, out.raw.ctypes.data)
    return out
