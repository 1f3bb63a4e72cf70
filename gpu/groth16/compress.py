"""Compressed points for key files: G1 48 bytes, G2 96 (arkworks' / ZCash's encoding).

``compress`` works on the xy bytes a PointArray holds, vectorised in numpy (no square roots:
x big-endian plus three flag bits). ``decompress`` needs a square root a point: on the device
when a CUDA context is current on this thread (gpu/kernels/decompress.cu: the prover's own
process loads its keys there), else on the host build of the same code
(gpu/native/compress_host.cpp, OpenMP); both raise KeyFormatError naming the first point that
does not decompress. Reading a 2^27 key's 0.5 G points this way halves its file (38 GB instead
of 76) at the price of one square root a point.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

#: the BLS12-381 base field modulus
FQ_MODULUS = int("1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab", 16)

from .errors import KeyFormatError

XY = {1: 96, 2: 192}          # point kind (keys.G1_KIND, G2_KIND) -> xy bytes
COMPRESSED = {1: 48, 2: 96}
_HALF = np.frombuffer(((FQ_MODULUS - 1) // 2).to_bytes(48, "little"), dtype="<u4")

_lib = None
_lock = threading.Lock()


def _larger_half(limbs: np.ndarray) -> np.ndarray:
    """Rows of 12 little-endian limbs (canonical) that exceed (p - 1) / 2."""
    gt = np.zeros(len(limbs), dtype=bool)
    undecided = np.ones(len(limbs), dtype=bool)
    for i in range(11, -1, -1):
        col = limbs[:, i]
        gt |= undecided & (col > _HALF[i])
        undecided &= col == _HALF[i]
    return gt


def compress(raw: np.ndarray, kind: int) -> np.ndarray:
    """(n, 96 | 192) xy bytes -> (n, 48 | 96) compressed bytes."""
    n = len(raw)
    limbs = np.ascontiguousarray(raw).view("<u4").reshape(n, -1)
    ident = ~limbs.any(axis=1)
    if kind == 1:
        x, y = limbs[:, :12], limbs[:, 12:]
        sign = _larger_half(y)
        out = x[:, ::-1].astype(">u4").view(np.uint8).reshape(n, 48).copy()
    else:
        x0, x1, y0, y1 = (limbs[:, 12 * k:12 * (k + 1)] for k in range(4))
        sign = np.where(y1.any(axis=1), _larger_half(y1), _larger_half(y0))
        out = np.concatenate([x1[:, ::-1].astype(">u4").view(np.uint8).reshape(n, 48),
                              x0[:, ::-1].astype(">u4").view(np.uint8).reshape(n, 48)], axis=1)
    out[:, 0] |= np.uint8(0x80) | np.where(sign, np.uint8(0x20), np.uint8(0))
    out[ident] = 0
    out[ident, 0] = 0xC0
    return out


def _host():
    global _lib
    with _lock:
        if _lib is None:
            from arith.native import build
            here = Path(__file__).resolve().parent.parent
            so = build(here / "native" / "compress_host.cpp", stem="compress",
                       flags=["-O3", "-std=c++17", "-fopenmp", "-shared", "-fPIC",
                              "-Wno-unknown-pragmas"], include_dirs=(here / "kernels",))
            L = ctypes.CDLL(str(so))
            for g in ("g1", "g2"):
                for fn in ("decompress", "mirror"):   # mirror: gpu/kernels/mirror.cuh's point
                    f = getattr(L, f"host_{fn}_{g}")
                    f.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
                    f.restype = ctypes.c_int64
            _lib = L
    return _lib


def _cuda_current() -> bool:
    try:
        import pycuda.driver as cuda
        return cuda.Context.get_current() is not None
    except Exception:
        return False


def decompress(comp: np.ndarray, kind: int, *, where: str = "points", device: bool | None = None,
               out: np.ndarray | None = None, first: int = 0) -> np.ndarray:
    """(n, 48 | 96) compressed bytes -> (n, 96 | 192) xy bytes. ``device``: None picks the
    device when a CUDA context is current here. ``first``: the index of comp[0] in messages."""
    comp = np.ascontiguousarray(comp, dtype=np.uint8)
    n = len(comp)
    out = np.empty((n, XY[kind]), dtype=np.uint8) if out is None else out
    if not n:
        return out
    use_device = _cuda_current() if device is None else device
    bad = _device(comp, kind, out) if use_device else int(
        getattr(_host(), f"host_decompress_g{kind}")(n, comp.ctypes.data, out.ctypes.data))
    if bad >= 0:
        raise KeyFormatError(f"{where}: point {first + bad} does not decompress (bad flags, x not below "
                             "the field modulus, or no curve point has that x)")
    return out


def _device(comp: np.ndarray, kind: int, out: np.ndarray) -> int:
    """On the current device, in chunks (page-locked staging is not worth it: a key is read
    once)."""
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer

    cuda = loader.driver()
    fn = loader.get_function(loader.load_module("decompress"), f"g{kind}_decompress")
    n, w_in, w_out = len(comp), COMPRESSED[kind], XY[kind]
    chunk = 1 << 22
    with DeviceBuffer(w_in * min(n, chunk), what="compressed points") as din, \
            DeviceBuffer(w_out * min(n, chunk), what="decompressed points") as dout, \
            DeviceBuffer(8, what="bad point") as bad:
        cuda.memset_d32(bad.ptr, 0xFFFFFFFF, 2)
        for lo in range(0, n, chunk):
            k = min(chunk, n - lo)
            din.upload(comp[lo:lo + k])
            with loader.guard(kernel=f"g{kind}_decompress", shape=k):
                fn(np.int64(k), np.uintp(din.ptr), np.uintp(dout.ptr), np.uintp(bad.ptr),
                   block=(128, 1, 1), grid=(-(-k // 128), 1))
            dout.download(out[lo:lo + k])
            first = np.zeros(1, dtype=np.uint64)
            cuda.memcpy_dtoh(first, bad.ptr)
            if int(first[0]) != 0xFFFFFFFFFFFFFFFF:
                return lo + int(first[0])
    return -1
