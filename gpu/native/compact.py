"""The compact, replicated matrices as the kernels of gpu/kernels/compact.cuh read them, and the
host build of those kernels (gpu/native/compact_host.cpp) for the CPU tests and small circuits.

``parts(m)`` flattens a ``synthesis.compact.Replicated`` (or a plain ``CompactMatrix``: a header
with no copies) into the arrays the device holds: header CSR (int64 row pointer, int32 global
columns, uint32 table indices), block CSR (template-local columns), one table of canonical Fr
coefficients (the block's indices follow the header's), and the shared base/stride column map.
``transpose(p)`` adds the transposed (CSC) block and header for the setup's A^T L.

Why the replicated form and not compact CSR on the device: sdr-32g's 727.6 M nonzeros are one
challenge block of ~40 M replicated 18 times; the device then holds ~0.3 GiB instead of 6.95 GiB
(6 bytes a nonzero) or 29.8 GiB (full CSR), and the row kernel computes each copy's columns.
"""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import numpy as np

from arith import native

_HERE = Path(__file__).resolve().parent
_KERNELS = _HERE.parent / "kernels"
_lib = None
_lock = threading.Lock()


class CompactFormError(ValueError):
    """A compact matrix the kernels cannot take (names the matrix and what is wrong)."""


def is_compact(m) -> bool:
    """A synthesis.compact Replicated or CompactMatrix (duck-typed: gpu never needs the class)."""
    return hasattr(m, "header") and hasattr(m, "block") or (hasattr(m, "cols") and hasattr(m, "table"))


def compact_of(obj):
    """The compact matrices' owner for ``obj``: a circuit with ``compact_r1cs()``, or an object
    whose ``a``, ``b``, ``c`` are compact; None when ``obj`` offers only full CSR."""
    if hasattr(obj, "compact_r1cs"):
        return obj.compact_r1cs()
    if all(is_compact(getattr(obj, k, None)) for k in "abc"):
        return obj
    return None


def parts(m, what: str = "matrix") -> dict:
    """The device arrays of one compact matrix (see the module docstring)."""
    if hasattr(m, "header"):
        h, b, base, stride, copies = m.header, m.block, m.base, m.stride, int(m.copies)
    else:
        h, b, base, stride, copies = m, None, np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    ht = np.ascontiguousarray(h.table, dtype=np.uint64).reshape(-1, 4)
    out = {
        "hrows": int(h.rows), "copies": copies,
        "h_ptr": np.ascontiguousarray(h.indptr, dtype=np.int64),
        "h_col": np.ascontiguousarray(h.cols, dtype=np.int32),
        "h_coef": np.ascontiguousarray(h.coef, dtype=np.uint32),
        "base": np.ascontiguousarray(base, dtype=np.int64),
        "stride": np.ascontiguousarray(stride, dtype=np.int64),
    }
    if b is None:
        out.update(brows=0, b_ptr=np.zeros(1, np.int64), b_col=np.zeros(0, np.int32),
                   b_coef=np.zeros(0, np.uint32), table=ht)
    else:
        bt = np.ascontiguousarray(b.table, dtype=np.uint64).reshape(-1, 4)
        out.update(brows=int(b.rows), b_ptr=np.ascontiguousarray(b.indptr, dtype=np.int64),
                   b_col=np.ascontiguousarray(b.cols, dtype=np.int32),
                   b_coef=(np.asarray(b.coef, dtype=np.uint32) + np.uint32(len(ht))),
                   table=np.concatenate([ht, bt]))
    out["rows"] = out["hrows"] + copies * out["brows"]
    out["nnz"] = len(out["h_col"]) + copies * len(out["b_col"])
    if len(out["h_ptr"]) != out["hrows"] + 1 or int(out["h_ptr"][-1]) != len(out["h_col"]):
        raise CompactFormError(f"{what}: malformed header row pointer")
    if len(out["b_ptr"]) != out["brows"] + 1 or int(out["b_ptr"][-1]) != len(out["b_col"]):
        raise CompactFormError(f"{what}: malformed block row pointer")
    if copies and len(out["b_col"]) and int(out["b_col"].max()) >= len(out["base"]):
        raise CompactFormError(f"{what}: a block column outside its column map")
    return out


def check_columns(p: dict, num_vars: int, what: str = "matrix") -> None:
    """Every column inside 0..num_vars-1, and the copies' columns laid out so that the transposed
    product's tasks never write one element twice: per stride s != 0 the columns of that stride
    have consecutive bases (s of them), so the copies tile [b0, b0 + copies s); those tiles and
    the shared (stride 0) columns' images are pairwise disjoint."""
    if len(p["h_col"]) and (int(p["h_col"].min()) < 0 or int(p["h_col"].max()) >= num_vars):
        raise CompactFormError(f"{what}: a header column outside 0..{num_vars - 1}")
    base, stride, copies = p["base"], p["stride"], p["copies"]
    if not copies or not len(base):
        return
    shared = base[stride == 0]
    lo, hi = [shared], [shared + 1]
    for s in np.unique(stride[stride != 0]):
        b = np.sort(base[stride == s])
        if int(s) < 0 or len(b) != int(s) or int(b[-1] - b[0]) + 1 != len(b):
            raise CompactFormError(f"{what}: columns of stride {int(s)} do not tile their copies")
        lo.append(b[:1])
        hi.append(b[:1] + copies * int(s))
    lo, hi = np.concatenate(lo), np.concatenate(hi)
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], hi[o]
    bad = np.flatnonzero(lo[1:] < hi[:-1])
    if len(bad):
        raise CompactFormError(f"{what}: copies' columns overlap at variable {int(lo[1 + bad[0]])}")
    if len(lo) and (int(lo[0]) < 0 or int(hi[-1]) > num_vars):
        raise CompactFormError(f"{what}: copies' columns outside 0..{num_vars - 1}")


#: entries of a block column one thread sums in the setup's transposed product (a piece)
PIECE = 2048


def transpose(p: dict, piece: int = PIECE) -> dict:
    """The block's CSC over its local columns, cut into pieces of at most ``piece`` entries
    (``piece_lo``: each piece's first entry, and the end; ``piece_ptr``: each column's first
    piece), and the header's CSC over the distinct global columns it uses (host numpy; the block
    is one challenge's ~40 M nonzeros at most)."""
    nloc = len(p["base"])
    rows_b = np.repeat(np.arange(p["brows"], dtype=np.int32), np.diff(p["b_ptr"]))
    o = np.argsort(p["b_col"], kind="stable")
    counts = np.bincount(p["b_col"], minlength=nloc) if nloc else np.zeros(0, np.int64)
    bt_ptr = np.zeros(nloc + 1, np.int64)
    np.cumsum(counts, out=bt_ptr[1:])
    npc = -(-counts // piece)
    piece_ptr = np.zeros(nloc + 1, np.int64)
    np.cumsum(npc, out=piece_ptr[1:])
    # piece k of column x starts at bt_ptr[x] + (k - piece_ptr[x]) * piece
    col_of = np.repeat(np.arange(nloc, dtype=np.int64), npc)
    piece_lo = np.empty(len(col_of) + 1, np.int64)
    piece_lo[:-1] = bt_ptr[col_of] + (np.arange(len(col_of)) - piece_ptr[col_of]) * piece
    piece_lo[-1] = bt_ptr[-1]
    rows_h = np.repeat(np.arange(p["hrows"], dtype=np.int32), np.diff(p["h_ptr"]))
    oh = np.argsort(p["h_col"], kind="stable")
    gcol, hcounts = np.unique(p["h_col"], return_counts=True)
    ht_ptr = np.zeros(len(gcol) + 1, np.int64)
    np.cumsum(hcounts, out=ht_ptr[1:])
    return {"piece_lo": piece_lo, "piece_ptr": piece_ptr, "npieces": len(col_of),
            "bt_row": rows_b[o], "bt_coef": p["b_coef"][o],
            "gcol": gcol.astype(np.int64), "ht_ptr": ht_ptr, "ht_row": rows_h[oh],
            "ht_coef": p["h_coef"][oh]}


def row_terms(p: dict, i: int) -> list[tuple[int, int]]:
    """(global column, coefficient) of row i: the host names a failing constraint's values."""
    from synthesis import field
    if i < p["hrows"]:
        lo, hi = int(p["h_ptr"][i]), int(p["h_ptr"][i + 1])
        cols, coef = p["h_col"][lo:hi].astype(np.int64), p["h_coef"][lo:hi]
    else:
        q = i - p["hrows"]
        j, rr = divmod(q, p["brows"])
        lo, hi = int(p["b_ptr"][rr]), int(p["b_ptr"][rr + 1])
        x = p["b_col"][lo:hi]
        cols, coef = p["base"][x] + j * p["stride"][x], p["b_coef"][lo:hi]
    vals = field.vec_to_ints(p["table"][coef]) if len(coef) else []
    return list(zip((int(c) for c in cols), vals))


def nbytes(p: dict, *, with_map: bool = True) -> int:
    """Device bytes of one matrix's arrays (the column map once per circuit: with_map)."""
    keys = ["h_ptr", "h_col", "h_coef", "b_ptr", "b_col", "b_coef", "table"]
    if with_map:
        keys += ["base", "stride"]
    return sum(p[k].nbytes for k in keys)


# --- the host build ------------------------------------------------------------------------

def lib() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            L = ctypes.CDLL(str(native.build(_HERE / "compact_host.cpp", stem="compact",
                                             include_dirs=(_KERNELS,))))
            i64, vp = ctypes.c_int64, ctypes.c_void_p
            L.host_rep_spmv.argtypes = [i64, i64, i64] + [vp] * 11
            L.host_rep_spmv_lanes.argtypes = [i64, i64, i64] + [vp] * 11 + [ctypes.c_int]
            L.host_rep_spmv_planes.argtypes = [i64, i64, i64] + [vp] * 14 + [ctypes.c_int]
            L.host_rep_spmv_t.argtypes = [i64] * 5 + [vp] * 7 + [i64] + [vp] * 7
            L.host_lagrange.argtypes = [i64, i64] + [vp] * 5
            L.host_powers.argtypes = [i64, i64] + [vp] * 3
            L.host_lincomb.argtypes = [i64] + [vp] * 5
            L.host_expand.argtypes = [i64] + [vp] * 5
            L.host_planes.argtypes = [i64, i64] + [vp] * 5
            L.host_planes.restype = ctypes.c_int
            _lib = L
    return _lib


def _p(a: np.ndarray):
    return a.ctypes.data


def spmv(p: dict, z: np.ndarray, *, lanes: int = 0) -> np.ndarray:
    """(rows, 4) canonical: the matrix times z, through the kernels' own row code (lanes > 0:
    each row as that many strided parts summed, the device's warp-a-row order for long rows)."""
    z = np.ascontiguousarray(z, dtype=np.uint64)
    out = np.zeros((p["rows"], 4), np.uint64)
    args = [p["rows"], p["hrows"], max(p["brows"], 1), *(_p(p[k]) for k in (
        "h_ptr", "h_col", "h_coef", "b_ptr", "b_col", "b_coef", "table", "base", "stride")),
        _p(z), _p(out)]
    if lanes:
        lib().host_rep_spmv_lanes(*args, int(lanes))
    else:
        lib().host_rep_spmv(*args)
    return out


def spmv_planes(p: dict, blob: bytes, num_vars: int, *, lanes: int = 0) -> np.ndarray:
    """The matrix times z where z is read from a compact assignment's planes (:func:`planes`,
    checked as the device's upload checks them), through the kernels' own row code
    (compact.cuh z_planes_t: the device's rep_spmv_planes; lanes > 0: rep_spmv_long_planes'
    order). Equal to spmv(p, expand(blob, num_vars))."""
    other, one, offs, fes = planes(blob, num_vars)
    f = np.ascontiguousarray(fes, dtype=np.uint64)
    out = np.zeros((p["rows"], 4), np.uint64)
    lib().host_rep_spmv_planes(p["rows"], p["hrows"], max(p["brows"], 1), *(_p(p[k]) for k in (
        "h_ptr", "h_col", "h_coef", "b_ptr", "b_col", "b_coef", "table", "base", "stride")),
        _p(other), _p(one), _p(offs), _p(f), _p(out), int(lanes))
    return out


#: the most device bytes of planes the products read z from: they live beside z, a, b, c
#: during the matvec, inside the proof working set's room for partial sums (gpu/budget.py
#: ProofShape: 128 MiB), and go before the MSMs use that room (filecoin-32g's: 87 MB)
PLANES_ROOM = 128 << 20
#: ZKHIVE_MATVEC_PLANES=auto takes the planes where at most this share of z are field elements
#: (each one read through its word offset: a dependent gather more than z's own)
PLANES_MAX_OTHER = 0.25


def matvec_reads_planes(num_vars: int, other: int, nbytes: int) -> bool:
    """Whether the matvec reads z from the compact assignment's planes (DeviceCompactR1CS.spmv
    with planes) for a blob of ``other`` field elements among num_vars values whose planes take
    nbytes on the device: ZKHIVE_MATVEC_PLANES=1 (where they fit PLANES_ROOM), auto or unset (the
    default: and at most PLANES_MAX_OTHER of z field elements), 0: the expanded z. A 32 GiB
    partition's A z + B z + C z on an H100 (bench/gpu_matvec.py, 2026-12-06): 36.9 ms over z,
    23.2 over the planes, the products equal word for word."""
    v = os.environ.get("ZKHIVE_MATVEC_PLANES", "auto") or "auto"
    if v not in ("0", "1", "auto"):
        raise ValueError(f"ZKHIVE_MATVEC_PLANES={v!r}: expected 0, 1 or auto")
    if v == "0" or nbytes > PLANES_ROOM:
        return False
    return v == "1" or other <= PLANES_MAX_OTHER * num_vars


#: rows longer than this go to the device's warp-a-row kernel (compact.cuh REP_LONG)
REP_LONG = 32


def long_rows(p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(header rows, block rows) of more than REP_LONG terms, as int64 row indices (block rows
    template-local: rep_spmv_long runs each once per copy)."""
    h = np.flatnonzero(np.diff(p["h_ptr"]) > REP_LONG).astype(np.int64)
    b = np.flatnonzero(np.diff(p["b_ptr"]) > REP_LONG).astype(np.int64) if p.get("copies") else \
        np.zeros(0, np.int64)
    return h, b


def spmv_t(p: dict, t: dict, L: np.ndarray, num_vars: int) -> np.ndarray:
    """(num_vars, 4): M^T L over the rows of the matrix, through the kernels' column code."""
    L = np.ascontiguousarray(L, dtype=np.uint64)
    out = np.zeros((num_vars, 4), np.uint64)
    scratch = np.zeros((max(1, p["copies"] * t["npieces"]), 4), np.uint64)
    lib().host_rep_spmv_t(len(p["base"]), p["copies"], p["hrows"], max(p["brows"], 1), t["npieces"],
                          _p(t["piece_lo"]), _p(t["piece_ptr"]), _p(t["bt_row"]), _p(t["bt_coef"]),
                          _p(p["table"]), _p(p["base"]), _p(p["stride"]), len(t["gcol"]), _p(t["gcol"]),
                          _p(t["ht_ptr"]), _p(t["ht_row"]), _p(t["ht_coef"]), _p(L), _p(scratch), _p(out))
    return out


def mont(x: int) -> np.ndarray:
    """x R mod r as 8 u32 limbs: how the kernels take a constant."""
    from synthesis import field
    v = (int(x) << 256) % field.MODULUS
    return np.frombuffer(v.to_bytes(32, "little"), dtype=np.uint32).copy()


def lagrange_consts(n: int, tau: int) -> tuple[np.ndarray, ...]:
    """(w, w^-1, tau, (tau^n - 1)/n) in Montgomery limbs for the Lagrange kernels."""
    from synthesis import field
    r = field.MODULUS
    w = field.root_of_unity(n)
    c = (pow(tau, n, r) - 1) * pow(n, r - 2, r) % r
    return mont(w), mont(pow(w, r - 2, r)), mont(tau), mont(c)


PER = 64  # elements a thread in the Lagrange and powers kernels (one inversion / one pow each)


def lagrange(n: int, tau: int) -> np.ndarray:
    out = np.zeros((n, 4), np.uint64)
    w, wi, t, c = lagrange_consts(n, tau)
    lib().host_lagrange(n, PER, _p(w), _p(wi), _p(t), _p(c), _p(out))
    return out


def powers(n: int, c: int, x: int) -> np.ndarray:
    """c x^i for i < n (canonical)."""
    out = np.zeros((n, 4), np.uint64)
    mx, mc = mont(x), mont(c)
    lib().host_powers(n, PER, _p(mx), _p(mc), _p(out))
    return out


def lincomb(u, v, w, beta: int, alpha: int, k: int) -> np.ndarray:
    """(beta u + alpha v + w) k, elementwise."""
    u, v, w = (np.ascontiguousarray(a, dtype=np.uint64) for a in (u, v, w))
    out = np.zeros_like(u)
    consts = np.concatenate([mont(beta), mont(alpha), mont(k)])
    lib().host_lincomb(len(u), _p(u), _p(v), _p(w), _p(consts), _p(out))
    return out


def planes(blob: bytes, num_vars: int):
    """The compact assignment's parts as the expansion kernel reads them: (other bits, one bits,
    per-32-bit-word offsets of the field elements, the field elements), as uint32 arrays; the
    blob is checked as synthesis.assignment.decode_compact checks it (AssignmentError)."""
    from synthesis import assignment, field
    A = assignment
    count, m, plane = A.read_header(blob, num_vars)
    words = -(-count // 32)
    raw = np.frombuffer(blob, dtype=np.uint8, offset=A._HEADER.size, count=2 * plane)
    other = np.zeros(4 * words, np.uint8)
    one = np.zeros(4 * words, np.uint8)
    other[:plane], one[:plane] = raw[:plane], raw[plane:]
    # bits past the count must be clear (encode writes zeros there)
    if count % 8 and ((int(other[plane - 1]) | int(one[plane - 1])) >> (count % 8)):
        raise A.AssignmentError("assignment blob has bits set past its last value")
    both = np.flatnonzero(other & one)
    if len(both):
        byte = int(both[0])
        bit = (int(other[byte]) & int(one[byte])) & -(int(other[byte]) & int(one[byte]))
        raise A.AssignmentError(f"assignment value {8 * byte + bit.bit_length() - 1} is marked "
                                "both one and a field element")
    ow = other.view(np.uint32)
    per_word = np.bitwise_count(ow).astype(np.int64)
    if int(per_word.sum()) != m:
        raise A.AssignmentError(f"assignment marks {int(per_word.sum())} values as field elements, "
                                f"its header says {m}")
    offs = np.zeros(words, np.uint32)
    if words > 1:
        offs[1:] = np.cumsum(per_word[:-1])
    fes = np.frombuffer(blob, dtype="<u8", offset=A._HEADER.size + 2 * plane, count=4 * m)
    fes = field.check_vec(fes.reshape(m, 4).astype(np.uint64), what="assignment field elements")
    if count and ((int(ow[0]) & 1) or not (int(one[0]) & 1)):
        raise A.AssignmentError("assignment[0] must be the constant 1")
    return ow, one.view(np.uint32), offs, fes


def _offsets(num_vars: int, m: int) -> tuple[int, int, int]:
    words = -(-num_vars // 32)
    off = (12 * words + 15) & ~15
    return words, off, off + 32 * int(m)


def planes_layout(blob, num_vars: int) -> tuple[int, int, int]:
    """(words, byte offset of the field elements, total bytes) of :func:`planes_into`'s buffer
    for this blob. Its header and length are checked here (``assignment.read_header``), so that
    no buffer is sized from a header that the blob's length does not bear out."""
    from synthesis import assignment as A
    _, m, _ = A.read_header(blob, num_vars)
    return _offsets(num_vars, m)


def planes_into(blob, num_vars: int, out: np.ndarray) -> tuple[int, int]:
    """:func:`planes`' arrays and checks on every core, written into one byte buffer ``out``
    (page-locked, so that one copy takes them to the device): other words, one words, offsets,
    then the field elements at the 16-byte boundary after them (:func:`planes_layout`). Returns
    (words, element offset). A bad blob raises planes()' AssignmentError (the same words)."""
    from synthesis import assignment as A
    from synthesis import field
    count, m, plane = A.read_header(blob, num_vars)
    words, off, total = _offsets(num_vars, m)
    if out.dtype != np.uint8 or not out.flags.c_contiguous or out.nbytes < total:
        raise ValueError(f"planes_into needs a contiguous uint8 buffer of {total} bytes")
    raw = np.frombuffer(blob, np.uint8)
    at = np.zeros(1, np.int64)
    base = raw.ctypes.data
    code = lib().host_planes(count, m, base + A._HEADER.size, base + A._HEADER.size + 2 * plane,
                             _p(field._MOD_LIMBS), _p(out), _p(at))
    if code:
        planes(blob, num_vars)  # names what is wrong, as the numpy checks word it
        raise A.AssignmentError(f"assignment blob rejected (check {code} at {int(at[0])})")
    return words, off


def expand(blob: bytes, num_vars: int) -> np.ndarray:
    """z (num_vars, 4) from a compact blob, through the kernels' expansion code."""
    other, one, offs, fes = planes(blob, num_vars)
    z = np.zeros((num_vars, 4), np.uint64)
    f = np.ascontiguousarray(fes, dtype=np.uint64)
    lib().host_expand(num_vars, _p(other), _p(one), _p(offs), _p(f), _p(z))
    return z


_fb_lib = None


def fixed_base_batched(base, scalars: np.ndarray):
    """[s * base] through the host build of gpu/kernels/fixed_base_batch.cuh (the device setup's
    fixed-base with one inversion per FB_BATCH points): a PointArray, as
    gpu.groth16.fixed_base.host_fixed_base returns it (tests compare the two)."""
    global _fb_lib
    from py_arkworks_bls12381 import G1Point

    from gpu.groth16.fixed_base import table
    from gpu.groth16.points import PointArray
    with _lock:
        if _fb_lib is None:
            L = ctypes.CDLL(str(native.build(_HERE / "fixed_base_batch_host.cpp", stem="fixed_base_batch",
                                             include_dirs=(_KERNELS,))))
            for name in ("host_fb_batch_g1", "host_fb_batch_g2"):
                getattr(L, name).argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 3
            _fb_lib = L
    kind = type(base)
    scalars = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
    t = table(base)
    out = PointArray.empty(kind, len(scalars))
    fn = _fb_lib.host_fb_batch_g1 if kind is G1Point else _fb_lib.host_fb_batch_g2
    fn(len(scalars), t.ctypes.data, scalars.ctypes.data, out.raw.ctypes.data)
    return out
