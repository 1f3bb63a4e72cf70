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
_libs: dict[str, ctypes.CDLL] = {}
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


def _library(source: str, stem: str, prefix: str, include_dirs: tuple[Path, ...] = ()) -> ctypes.CDLL:
    """The native library built from gpu/native/``source`` (once a process), its
    ``<prefix>_g1`` / ``<prefix>_g2`` entry points typed: (n, table, scalars, out)."""
    with _lock:
        if stem not in _libs:
            L = ctypes.CDLL(str(native.build(_NATIVE / source, stem=stem, include_dirs=include_dirs)))
            for g in ("g1", "g2"):
                getattr(L, f"{prefix}_{g}").argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 3
            _libs[stem] = L
    return _libs[stem]


def _host() -> ctypes.CDLL:
    return _library("setup_host.cpp", "setup", "host_fixed_base", (_KERNELS,))


def _cpu() -> ctypes.CDLL:
    return _library("fixed_base_cpu.cpp", "fixed_base_cpu", "cpu_fixed_base")


def _multiply(fn_of_group, base, scalars: np.ndarray) -> PointArray:
    """[s * base for s in scalars] through ``fn_of_group("g1" | "g2")`` over base's table."""
    kind = type(base)
    scalars = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
    out = PointArray.empty(kind, len(scalars))
    if len(scalars):
        t = table(base)
        fn = fn_of_group("g1" if kind is G1Point else "g2")
        fn(len(scalars), t.ctypes.data, scalars.ctypes.data, out.raw.ctypes.data)
    return out


def host_fixed_base(base, scalars: np.ndarray) -> PointArray:
    """[s * base for s in scalars] on the CPU cores (zeros give the identity), through the
    kernels' host build: what the GPU code is tested against."""
    return _multiply(lambda g: getattr(_host(), f"host_fixed_base_{g}"), base, scalars)


def cpu_fixed_base(base, scalars: np.ndarray) -> PointArray:
    """[s * base for s in scalars] on every CPU core, 64-bit limbs (zeros give the identity):
    what the CPU backend's setup computes a proving key's queries with. ``scalars``: canonical
    Fr, (n, 4) uint64; the result equals arkworks' point by point, byte for byte."""
    return _multiply(lambda g: getattr(_cpu(), f"cpu_fixed_base_{g}"), base, scalars)
