"""The host library: vectorised Fr arithmetic in C++ (from the same ff.cuh as the CUDA kernels).

The shared layer below ``synthesis`` (witness generation) and ``gpu`` (the CPU backend, the
kernels' host tests): it imports nothing of ours.

Built on first use with the system C++ compiler into a per-user cache keyed by a digest of the
sources and flags, so a rebuilt checkout never loads a stale library. Vectors are Fr vectors in
the ``synthesis.field`` layout (which this module does not import): uint64 arrays of shape (n, 4), canonical little-endian.

Set ``ZKHIVE_CACHE_DIR`` to move the cache; ``CXX`` to pick the compiler.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from arith import FR_MODULUS

HERE = Path(__file__).resolve().parent
#: the field headers (ff.cuh, fr.cuh, fq2.cuh, ...) that host builds and CUDA kernels include
INCLUDE = HERE / "include"
FLAGS = ["-O3", "-std=c++17", "-fopenmp", "-shared", "-fPIC"]


class NativeBuildError(RuntimeError):
    """The host library failed to compile; the message holds the compiler's output."""


def cache_dir(sub: str = "") -> Path:
    """zkhive's one cache directory (``$ZKHIVE_CACHE_DIR``, default ``~/.cache/zkhive``), or a
    folder in it (cubins, matrices, device ledgers), created on first use."""
    d = Path(os.environ.get("ZKHIVE_CACHE_DIR", Path.home() / ".cache" / "zkhive")) / sub
    d.mkdir(parents=True, exist_ok=True)
    return d


def build(source: Path, *, stem: str, flags: list[str] | None = None,
          include_dirs: tuple[Path, ...] = ()) -> Path:
    """Compile ``source`` into a shared library in the cache and return its path, with
    ``arith/include`` and ``include_dirs`` on the include path. The cache key covers the source,
    every header in those folders (a host build may include any of them: a stale library must
    never load) and the flags."""
    flags = list(flags or FLAGS)
    dirs = (INCLUDE, *map(Path, include_dirs))
    h = hashlib.sha256()
    for s in (source, *sorted(p for d in dirs for p in d.glob("*.cuh"))):
        h.update(s.name.encode() + b"\0" + s.read_bytes())
    # the flags without the include folders' paths: their headers are in the key by content,
    # and a library built from one copy of the sources serves another (an image builds its
    # libraries from /src, its workers import the installed package: with the paths in the key
    # every container built field and Poseidon again in its first job: 41.5 s against 3.9 s)
    h.update(" ".join(flags).encode() + sys.platform.encode())
    flags += [f"-I{d}" for d in dirs]
    out = cache_dir() / f"zkhive-{stem}-{h.hexdigest()[:16]}.so"
    if out.exists():
        return out
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise NativeBuildError("no C++ compiler found: install g++ (apt-get install g++) "
                               "or set CXX")
    # compile to a private temp file, then rename: concurrent workers never see a partial .so
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        res = subprocess.run([cxx, *flags, "-o", tmp, str(source)], capture_output=True, text=True)
    except OSError as e:  # CXX names no program that runs
        os.unlink(tmp)
        raise NativeBuildError(f"building {source}: the C++ compiler {cxx} cannot be run ({e}): "
                               "install g++ or set CXX to one that runs") from None
    if res.returncode != 0:
        os.unlink(tmp)
        raise NativeBuildError(f"building {source} failed:\n{res.stderr}")
    os.replace(tmp, out)
    return out


_loaded: dict[str, ctypes.CDLL] = {}
_loaded_lock = threading.Lock()


def load(source: Path, *, stem: str, signatures: dict | None = None,
         include_dirs: tuple[Path, ...] = ()) -> ctypes.CDLL:
    """``source`` built (``build``) and loaded once a process, the same library for every
    caller; ``signatures``: {function: (argtypes, restype)} set when it is loaded."""
    with _loaded_lock:
        lib = _loaded.get(stem)
        if lib is None:
            lib = ctypes.CDLL(str(build(source, stem=stem, include_dirs=include_dirs)))
            for name, (argtypes, restype) in (signatures or {}).items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = argtypes, restype
            _loaded[stem] = lib
    return lib


def _build() -> Path:
    return build(HERE / "host.cpp", stem="host")


_lib = None
_lock = threading.Lock()
_i64, _p = ctypes.c_int64, ctypes.c_void_p


def lib() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            # Idle OpenMP threads sleep instead of spinning: the CPU prover runs arkworks' MSM
            # threads beside the NTTs, and spinning workers would steal their cores.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            L = ctypes.CDLL(str(_build()))
            for name in ("fr_vec_add", "fr_vec_sub", "fr_vec_mul", "fr_vec_pow"):
                getattr(L, name).argtypes = [_i64, _p, _p, _p]
            L.fr_vec_inv.argtypes = [_i64, _p, _p]
            L.fr_vec_inv.restype = _i64
            L.fr_spmv.argtypes = [_i64, _p, _p, _p, _p, _p]
            L.fr_spmv_t.argtypes = [_i64, _i64, _p, _p, _p, _p, _p]
            L.fr_ntt.argtypes = [ctypes.c_int, _p, ctypes.c_int, ctypes.c_int]
            L.fr_compute_h.argtypes = [ctypes.c_int, _p, _p, _p, _p]
            L.fr_lagrange_at.argtypes = [ctypes.c_int, _p, _p]
            L.fr_powers.argtypes = [_i64, _p, _p, _p]
            L.fr_op.argtypes = [ctypes.c_int, _p, _p, _p]
            L.fq_op.argtypes = [ctypes.c_int, _p, _p, _p]
            L.fq2_op.argtypes = [ctypes.c_int, _p, _p, _p]
            _lib = L
    return _lib


def _vec(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.uint64)
    if x.ndim != 2 or x.shape[1] != 4:
        raise ValueError(f"expected an Fr vector of shape (n, 4), got {x.shape}")
    return x


def _ptr(x: np.ndarray) -> int:
    return x.ctypes.data


def _binary(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = _vec(a), _vec(b)
    if len(b) == 1 and len(a) != 1:
        b = np.ascontiguousarray(np.broadcast_to(b, a.shape))
    if a.shape != b.shape:
        raise ValueError(f"{name}: lengths differ ({len(a)} and {len(b)})")
    out = np.empty_like(a)
    getattr(lib(), name)(len(a), _ptr(a), _ptr(b), _ptr(out))
    return out


def add(a, b): return _binary("fr_vec_add", a, b)
def sub(a, b): return _binary("fr_vec_sub", a, b)
def mul(a, b): return _binary("fr_vec_mul", a, b)


def _scalar(k: int) -> np.ndarray:
    k %= FR_MODULUS
    return np.array([[(k >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(4)]], dtype=np.uint64)


def scale(a, k: int): return mul(a, _scalar(k))


def pow(a, e: int) -> np.ndarray:  # noqa: A001 - the field's own pow, elementwise
    a = _vec(a)
    if e < 0:
        raise ValueError("negative exponent: use inv")
    ev = np.frombuffer(int(e).to_bytes(32, "little"), dtype=np.uint64).copy()
    out = np.empty_like(a)
    lib().fr_vec_pow(len(a), _ptr(a), _ptr(ev), _ptr(out))
    return out


def inv(a) -> np.ndarray:
    """Elementwise inverse (batch); raises ZeroDivisionError naming the first zero."""
    a = _vec(a)
    out = np.empty_like(a)
    bad = lib().fr_vec_inv(len(a), _ptr(a), _ptr(out))
    if bad >= 0:
        raise ZeroDivisionError(f"element {bad} is zero and has no inverse")
    return out


def spmv(indptr, indices, coeffs, z) -> np.ndarray:
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    coeffs, z = _vec(coeffs.reshape(-1, 4)), _vec(z)
    if len(indices) and int(indices.max()) >= len(z):
        raise ValueError(f"matrix refers to variable {int(indices.max())}, vector has {len(z)}")
    rows = len(indptr) - 1
    out = np.empty((rows, 4), dtype=np.uint64)
    lib().fr_spmv(rows, _ptr(indptr), _ptr(indices), _ptr(coeffs), _ptr(z), _ptr(out))
    return out


def spmv_t(indptr, indices, coeffs, x, cols: int) -> np.ndarray:
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    coeffs, x = _vec(coeffs.reshape(-1, 4)), _vec(x)
    rows = len(indptr) - 1
    if len(x) != rows:
        raise ValueError(f"vector has {len(x)} entries, matrix {rows} rows")
    out = np.empty((cols, 4), dtype=np.uint64)
    lib().fr_spmv_t(rows, cols, _ptr(indptr), _ptr(indices), _ptr(coeffs), _ptr(x), _ptr(out))
    return out


def _log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"NTT size {n} is not a power of two")
    return n.bit_length() - 1


def ntt(a, *, inverse: bool = False, coset: bool = False) -> np.ndarray:
    """(Coset) NTT or its inverse, natural order in and out; returns a new vector."""
    out = _vec(a).copy()
    if lib().fr_ntt(_log2(len(out)), _ptr(out), int(inverse), int(coset)) != 0:
        raise ValueError(f"unsupported NTT size {len(out)}")
    return out


def compute_h(a, b, c) -> np.ndarray:
    """H coefficients from the evaluations of A z, B z, C z over the domain (see host.cpp)."""
    a, b, c = _vec(a), _vec(b), _vec(c)
    if not (a.shape == b.shape == c.shape):
        raise ValueError("compute_h: a, b, c must have the same length")
    h = np.empty_like(a)
    if lib().fr_compute_h(_log2(len(a)), _ptr(a), _ptr(b), _ptr(c), _ptr(h)) != 0:
        raise ValueError(f"unsupported domain size {len(a)}")
    return h


def lagrange_at(n: int, tau: int) -> np.ndarray | None:
    t = _scalar(tau)
    out = np.empty((n, 4), dtype=np.uint64)
    return None if lib().fr_lagrange_at(_log2(n), _ptr(t), _ptr(out)) else out


def powers(n: int, base: int, ratio: int) -> np.ndarray:
    b, r = _scalar(base), _scalar(ratio)
    out = np.empty((n, 4), dtype=np.uint64)
    lib().fr_powers(n, _ptr(b), _ptr(r), _ptr(out))
    return out


OPS = {"add": 0, "sub": 1, "mul": 2, "sqr": 3, "inv": 4, "neg": 5, "to_mont": 6,
       "from_mont": 7, "mont_mul": 8, "mul_by_xi": 9, "conj": 10, "dbl": 11, "mul_lean": 12,
       "sqr_lean": 13}


def field_op(field: str, op: str, a: int, b: int = 0) -> int:
    """One host-build field operation on raw limbs (for the unit tests of ff.cuh and fq2.cuh).
    Inputs are passed as-is, so tests can feed non-canonical values; an Fq2 value is the int
    c0 + c1 * 2^384."""
    nbytes = {"fr": 32, "fq": 48, "fq2": 96}[field]
    buf = [np.frombuffer(int(x).to_bytes(nbytes, "little"), dtype=np.uint32).copy() for x in (a, b)]
    out = np.zeros(nbytes // 4, dtype=np.uint32)
    getattr(lib(), f"{field}_op")(OPS[op], _ptr(buf[0]), _ptr(buf[1]), _ptr(out))
    return int.from_bytes(out.tobytes(), "little")
