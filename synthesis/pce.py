"""cuzk's pre-compiled circuit files (PCE), a digest of our matrices in their order, and a
row-by-row comparison of the two.

The format is filecoin-project/curio ``extern/cuzk/cuzk-pce`` (mirror commit e0294b0),
``disk.rs`` version 2, every integer little-endian:

    header (32 B)  magic b"PCE\\x02", u32 version (2), u32 num_inputs (ONE included),
                   u32 num_aux, u32 num_constraints (the input rows included), u64 total_nnz,
                   u32 reserved (0)
    A, B, C        each: u64 n + u32 row_ptrs[n] (n = num_constraints + 1),
                         u64 nnz + u32 cols[nnz], u64 nnz + vals[nnz] (32 B each)
    density        a_aux, b_input, b_aux: each u64 n + u64 words[n] (bitvec, Lsb0),
                   then u64 bit_len, u64 popcount

``vals`` are ``blstrs::Scalar`` as it sits in memory (``write_vec_scalar`` dumps the slice): four
u64 limbs of the Montgomery form x * 2^256 mod r, least significant first; ours are canonical
(synthesis/field.py), so the reader converts. Columns are bellpepper's unified space (csr.rs:
``col < num_inputs`` an input, ONE at 0, else aux ``col - num_inputs``): our z = (ONE | public |
aux) numbers the same. ``recording_cs.rs``: rows are the ``enforce`` calls in synthesis order
then one row per input (``input_i`` in A, B and C empty: bellperson's input constraints), a
row's entries the linear combination's input terms then its aux terms (bellpepper's Indexer keeps
each sorted by index), zero coefficients dropped. Ours drop zeros too and hold rows sorted by
column; both sides are put in that order before comparing (``canonical``), so only what the
circuit means is compared, not how a writer happened to order a row.

``digest``: SHA-256 over the sizes and the canonical A, B, C (row pointers, columns, canonical
values), input rows included: the same number from our matrices (``zkhive circuits --digest``)
and from a PCE file (``zkhive circuits --pce FILE``), so two installations, or zkhive and cuzk,
compare without exchanging files. Variable order is in it: exchanging two variables changes
the columns.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import field

MAGIC = b"PCE\x02"
VERSION = 2
HEADER = struct.Struct("<4sIIIIQI")  # 32 bytes
MATRICES = ("A", "B", "C")
#: Montgomery's R = 2^256 mod r and its inverse (blstrs' in-memory Scalar)
R_MONT = (1 << 256) % field.MODULUS
R_INV = pow(R_MONT, -1, field.MODULUS)
DIGEST_TAG = b"zkhive-r1cs-pce-order-v1"


class PCEError(ValueError):
    """A PCE file that is not cuzk's format, or not self-consistent; names the field and offset."""


@dataclass
class Matrix:
    """One CSR matrix in the unified column space; ``vals`` canonical (n, 4) uint64."""
    row_ptrs: np.ndarray   # int64 (rows + 1,)
    cols: np.ndarray       # int64 (nnz,)
    vals: np.ndarray       # uint64 (nnz, 4)

    @property
    def rows(self) -> int:
        return len(self.row_ptrs) - 1

    @property
    def nnz(self) -> int:
        return len(self.cols)

    def row(self, i: int) -> list[tuple[int, int]]:
        lo, hi = int(self.row_ptrs[i]), int(self.row_ptrs[i + 1])
        return list(zip(self.cols[lo:hi].tolist(), field.vec_to_ints(self.vals[lo:hi])))


@dataclass
class PCE:
    num_inputs: int        # ONE included
    num_aux: int
    num_constraints: int   # the input rows included
    a: Matrix
    b: Matrix
    c: Matrix
    #: (a_aux, b_input, b_aux) popcounts as the file states them (None: computed here)
    density: tuple[int, int, int] | None = None

    def matrices(self):
        return zip(MATRICES, (self.a, self.b, self.c))

    def total_nnz(self) -> int:
        return self.a.nnz + self.b.nnz + self.c.nnz


# --- the field encoding ----------------------------------------------------------------------

def _convert(vals: np.ndarray, factor: int, *, where: str | None = None) -> np.ndarray:
    """x * factor mod r for each row of an (n, 4) uint64 vector; a circuit's matrices hold few
    distinct coefficients, so each distinct one is converted once. ``where``: refuse a value
    not below r, naming its index in ``where``."""
    if len(vals) == 0:
        return vals.reshape(0, 4).astype(np.uint64)
    vals = np.ascontiguousarray(vals, dtype=np.uint64)
    uniq, inv = np.unique(vals, axis=0, return_inverse=True)
    ints = field.vec_to_ints(uniq)
    if where is not None:
        big = [u for u, x in enumerate(ints) if x >= field.MODULUS]
        if big:
            k = int(np.flatnonzero(inv.reshape(-1) == big[0])[0])
            raise PCEError(f"{where}[{k}] is {ints[big[0]]:#x}, not below r: not a blstrs Scalar")
    conv = field.vec_from_ints([x * factor % field.MODULUS for x in ints])
    return conv.reshape(-1, 4)[inv.reshape(-1)]


def to_montgomery(vals: np.ndarray) -> np.ndarray:
    return _convert(vals, R_MONT)


def from_montgomery(vals: np.ndarray, *, where: str = "vals") -> np.ndarray:
    return _convert(vals, R_INV, where=where)


# --- ours in cuzk's shape ---------------------------------------------------------------------

def from_r1cs(r1cs) -> PCE:
    """Our R1CS as cuzk records it: the input rows appended (A: input i, coefficient 1)."""
    nin = 1 + int(r1cs.num_public)
    rows = int(r1cs.num_constraints)

    def extend(m, with_inputs: bool) -> Matrix:
        ptr = np.asarray(m.indptr, dtype=np.int64)
        cols = np.asarray(m.indices, dtype=np.int64)
        vals = np.asarray(m.coeffs, dtype=np.uint64).reshape(-1, 4)
        if with_inputs:
            extra_ptr = ptr[-1] + np.arange(1, nin + 1, dtype=np.int64)
            one = np.zeros((nin, 4), dtype=np.uint64)
            one[:, 0] = 1
            return Matrix(np.concatenate([ptr, extra_ptr]), np.concatenate([cols, np.arange(nin)]),
                          np.concatenate([vals, one]))
        return Matrix(np.concatenate([ptr, np.full(nin, ptr[-1], dtype=np.int64)]), cols, vals)

    return PCE(nin, int(r1cs.num_aux), rows + nin, extend(r1cs.a, True), extend(r1cs.b, False),
               extend(r1cs.c, False))


def canonical(m: Matrix) -> Matrix:
    """Each row's entries sorted by column, zero coefficients dropped (both writers' rule)."""
    nz = m.vals.any(axis=1)
    row_of = np.repeat(np.arange(m.rows, dtype=np.int64), np.diff(m.row_ptrs))
    if nz.all() and (m.nnz < 2 or np.all((np.diff(row_of) > 0) | (np.diff(m.cols) > 0))):
        return m
    order = np.lexsort((m.cols, row_of))
    order = order[nz[order]]
    counts = np.bincount(row_of[order], minlength=m.rows)
    ptr = np.zeros(m.rows + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return Matrix(ptr, m.cols[order], m.vals[order])


def densities(p: PCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a_aux, b_input, b_aux) as boolean vectors: density.rs ``from_csr``."""
    a_aux = np.zeros(p.num_aux, dtype=bool)
    cols = p.a.cols[p.a.cols >= p.num_inputs]
    a_aux[cols - p.num_inputs] = True
    b_in = np.zeros(p.num_inputs, dtype=bool)
    b_in[p.b.cols[p.b.cols < p.num_inputs]] = True
    b_aux = np.zeros(p.num_aux, dtype=bool)
    cols = p.b.cols[p.b.cols >= p.num_inputs]
    b_aux[cols - p.num_inputs] = True
    return a_aux, b_in, b_aux


def digest(p: PCE) -> str:
    """SHA-256 over the sizes and the canonical matrices (module doc), hex."""
    h = hashlib.sha256(DIGEST_TAG)
    h.update(struct.pack("<QQQ", p.num_inputs, p.num_aux, p.num_constraints))
    for _, m in p.matrices():
        m = canonical(m)
        h.update(struct.pack("<Q", m.nnz))
        h.update(m.row_ptrs.astype("<u8").tobytes())
        h.update(m.cols.astype("<u4").tobytes())
        h.update(np.ascontiguousarray(m.vals).astype("<u8").tobytes())
    return h.hexdigest()


# --- the file -------------------------------------------------------------------------------

def _bits_to_words(bits: np.ndarray) -> np.ndarray:
    packed = np.packbits(bits.astype(np.uint8), bitorder="little")
    packed = np.concatenate([packed, np.zeros(-len(packed) % 8, dtype=np.uint8)])
    return packed.view("<u8")


def write(p: PCE, path) -> Path:
    """``p`` as cuzk's save_to_disk writes it (the writer our tests use; ``zkhive circuits
    --write-pce`` dumps ours)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(HEADER.pack(MAGIC, VERSION, p.num_inputs, p.num_aux, p.num_constraints,
                            p.total_nnz(), 0))
        for _, m in p.matrices():
            for arr, dt in ((m.row_ptrs, "<u4"), (m.cols, "<u4")):
                f.write(struct.pack("<Q", len(arr)) + np.asarray(arr).astype(dt).tobytes())
            f.write(struct.pack("<Q", m.nnz) + to_montgomery(m.vals).astype("<u8").tobytes())
        for bits in densities(p):
            f.write(struct.pack("<Q", (len(bits) + 63) // 64) + _bits_to_words(bits).tobytes())
            f.write(struct.pack("<QQ", len(bits), int(bits.sum())))
    tmp.replace(path)
    return path


class _Reader:
    def __init__(self, path: Path):
        self.path, self.size = path, path.stat().st_size
        self.mm = np.memmap(path, dtype=np.uint8, mode="r") if self.size else np.zeros(0, np.uint8)
        self.at = 0

    def take(self, n: int, what: str) -> np.ndarray:
        if n < 0 or self.at + n > self.size:
            raise PCEError(f"{self.path}: {what} at byte offset {self.at} needs {n} bytes, the file "
                           f"ends at {self.size}")
        out = self.mm[self.at:self.at + n]
        self.at += n
        return out

    def u64(self, what: str) -> int:
        return int(self.take(8, what).view("<u8")[0])

    def vec(self, width: int, what: str, *, want: int | None = None) -> np.ndarray:
        at = self.at
        n = self.u64(f"{what}'s length")
        if want is not None and n != want:
            raise PCEError(f"{self.path}: {what} at byte offset {at} holds {n} elements, expected {want}")
        return self.take(n * width, what)


def read(path) -> PCE:
    """A PCE file, checked: the header (magic, version), every length against the header and
    the file's size, row pointers non-decreasing from 0 to nnz, columns below num_inputs +
    num_aux, values below r, the density section against the matrices; PCEError names the
    field and its byte offset."""
    path = Path(path)
    r = _Reader(path)
    magic, version, nin, naux, rows, total, _ = HEADER.unpack(bytes(r.take(HEADER.size, "header")))
    if magic != MAGIC:
        raise PCEError(f"{path}: magic {magic!r} at byte offset 0, not {MAGIC!r} (cuzk-pce disk.rs)")
    if version != VERSION:
        raise PCEError(f"{path}: version {version} at byte offset 4, this reader knows {VERSION}")
    mats = []
    for name in MATRICES:
        at = r.at
        ptr = r.vec(4, f"{name}.row_ptrs", want=rows + 1).view("<u4").astype(np.int64)
        cols_at = r.at
        cols = r.vec(4, f"{name}.cols").view("<u4").astype(np.int64)
        if len(ptr) == 0 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != len(cols):
            raise PCEError(f"{path}: {name}.row_ptrs at byte offset {at}: not non-decreasing from "
                           f"0 to {len(cols)} (its cols' length)")
        if len(cols) and int(cols.max()) >= nin + naux:
            k = int(np.argmax(cols >= nin + naux))
            raise PCEError(f"{path}: {name}.cols[{k}] at byte offset {cols_at + 8 + 4 * k} is "
                           f"{int(cols[k])}, beyond the {nin + naux} variables")
        vals_at = r.at
        raw = r.vec(32, f"{name}.vals", want=len(cols)).view("<u8").reshape(-1, 4)
        mats.append(Matrix(ptr, cols, from_montgomery(np.array(raw), where=f"{path}: {name}.vals (from byte offset {vals_at + 8}) element")))
    if sum(m.nnz for m in mats) != total:
        raise PCEError(f"{path}: total_nnz {total} at byte offset 20 differs from the matrices' "
                       f"{sum(m.nnz for m in mats)}")
    p = PCE(nin, naux, rows, *mats)
    stated = []
    for name, bits in zip(("a_aux", "b_input", "b_aux"), densities(p)):
        at = r.at
        words = r.vec(8, f"density {name}", want=(len(bits) + 63) // 64).view("<u8")
        bit_len, pop = r.u64(f"density {name}'s bit_len"), r.u64(f"density {name}'s popcount")
        if bit_len != len(bits) or pop != int(bits.sum()) or not np.array_equal(words, _bits_to_words(bits)):
            raise PCEError(f"{path}: density {name} at byte offset {at} (bit_len {bit_len}, popcount "
                           f"{pop}) is not the matrices' ({len(bits)}, {int(bits.sum())})")
        stated.append(pop)
    if r.at != r.size:
        raise PCEError(f"{path}: {r.size - r.at} bytes after the density section at byte offset {r.at}")
    p.density = tuple(stated)
    return p


# --- the comparison -------------------------------------------------------------------------

def compare(ours: PCE, theirs: PCE, *, describe=None) -> str | None:
    """None when equal; else one line naming the first difference: a size, or the matrix, row,
    column and coefficients of the first differing row (``describe(row)`` says where our row
    comes from)."""
    for what in ("num_inputs", "num_aux", "num_constraints"):
        if getattr(ours, what) != getattr(theirs, what):
            return f"{what}: ours {getattr(ours, what)}, the file's {getattr(theirs, what)}"
    for (name, m1), (_, m2) in zip(ours.matrices(), theirs.matrices()):
        m1, m2 = canonical(m1), canonical(m2)
        len1, len2 = np.diff(m1.row_ptrs), np.diff(m2.row_ptrs)
        dl = np.flatnonzero(len1 != len2)
        first_len = int(dl[0]) if len(dl) else m1.rows
        upto = int(m1.row_ptrs[first_len])  # entries aligned up to that row
        de = np.flatnonzero((m1.cols[:upto] != m2.cols[:upto]) | (m1.vals[:upto] != m2.vals[:upto]).any(axis=1))
        row = first_len
        if len(de):
            row = min(row, int(np.searchsorted(m1.row_ptrs, int(de[0]), side="right") - 1))
        if row == m1.rows:
            continue
        r1, r2 = m1.row(row), m2.row(row)
        j = next((j for j, (x, y) in enumerate(zip(r1, r2)) if x != y), min(len(r1), len(r2)))
        ours_at = f"column {r1[j][0]} coefficient {_coef(r1[j][1])}" if j < len(r1) else "no more entries"
        theirs_at = f"column {r2[j][0]} coefficient {_coef(r2[j][1])}" if j < len(r2) else "no more entries"
        where = f" ({describe(row)})" if describe is not None and row < ours.num_constraints - ours.num_inputs else ""
        if row >= ours.num_constraints - ours.num_inputs:
            where = f" (input row {row - (ours.num_constraints - ours.num_inputs)})"
        return (f"matrix {name} row {row}{where}, entry {j}: ours {ours_at}, the file's {theirs_at} "
                f"(ours {len(r1)} entries, the file's {len(r2)})")
    return None


def _coef(x: int) -> str:
    """A coefficient as a small signed number where it is one (-1 rather than r - 1)."""
    if x > field.MODULUS - (1 << 64):
        return str(x - field.MODULUS)
    return str(x) if x < 1 << 64 else hex(x)
