"""Constraint matrices in a compact form: small-integer coefficients by index into a table,
templates recorded once and replicated.

``TemplatingCS`` is a shape-only ConstraintSystem that records a gadget template's instance
(e.g. one SHA-256 compression: 26k constraints) as (template, slot variables, first own
variable) instead of substituting its rows one by one; ``compact_matrices`` expands all
instances of a template at once with numpy. ``CompactMatrix`` stores a matrix as a row pointer,
int32 columns and a coefficient index (uint16 while the table has < 65,536 entries) into a table
of distinct coefficients: 4 + 2 bytes a nonzero, not 8 + 32. ``Replicated`` is a matrix made of a
header block and ``copies`` copies of a per-challenge block whose template-local columns map to
``base + j * stride``: the full matrix is never stored, only expanded on request.
``CompactR1CS`` is a partition's three ``Replicated`` matrices with their digest, the full R1CS
on request and an ``.npz`` cache file: the form the StackedDRG-shaped family (filecoin)
build and every backend takes.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import field
from .builder import ConstraintSystem, LinearCombination, Variable
from .r1cs import R1CS, Sizes, SparseMatrix

P = field.MODULUS
HALF = P // 2


def _signed(c: int) -> int:
    c %= P
    return c - P if c > HALF else c


class TemplatingCS(ConstraintSystem):
    """A ConstraintSystem(with_values=False) that records template instances compactly.

    ``ordered=True``: ``compact_matrices`` keeps the constraints in recording order (an
    instance's rows where it was instantiated, as a prover that synthesizes gadget by gadget
    has them: what a circuit whose keys must match another implementation's needs); by default
    the plain rows come first, then the instances grouped by template."""

    def __init__(self, *, ordered: bool = False):
        super().__init__(with_values=False)
        self.ordered = ordered
        self._instances: list[tuple[object, np.ndarray, np.ndarray, int]] = []
        self._plain_before: list[int] = []  # plain rows recorded before each instance

    def instantiate(self, tmpl, inputs: list[LinearCombination]) -> list[LinearCombination]:
        """Record one instance of ``tmpl`` (with ``rows``, ``slots``, ``num_aux``, ``outputs``);
        each input must be one variable (coefficient 1) or the constant 0 or 1."""
        keys = np.zeros(tmpl.slots, dtype=np.int64)
        coefs = np.zeros(tmpl.slots, dtype=np.int64)
        for i, lc in enumerate(inputs):
            t = lc.terms
            if not t:
                continue
            if len(t) != 1:
                raise ValueError(f"template slot {i}: a linear combination of {len(t)} terms")
            (k, c), = t.items()
            if c != 1:
                raise ValueError(f"template slot {i}: coefficient {c}, slots take 0, 1 or a variable")
            keys[i], coefs[i] = k, 1
        start = len(self._aux)
        self._aux.extend([None] * tmpl.num_aux)
        self._instances.append((tmpl, keys, coefs, start))
        self._plain_before.append(len(self._rows))
        return [Variable(-(start + int(j)) - 1).lc() for j in tmpl.outputs]

    @property
    def num_constraints(self) -> int:
        return len(self._rows) + sum(t.num_constraints for t, *_ in self._instances)


@dataclass
class CompactMatrix:
    indptr: np.ndarray   # int64 (rows + 1,)
    cols: np.ndarray     # int32 (nnz,)
    coef: np.ndarray     # uint16 or int32 (nnz,): index into table
    table: np.ndarray    # (K, 4) uint64 Fr coefficients

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.cols)

    @property
    def nbytes(self) -> int:
        return self.indptr.nbytes + self.cols.nbytes + self.coef.nbytes + self.table.nbytes

    def to_sparse(self) -> SparseMatrix:
        return SparseMatrix(self.indptr.astype(np.int64), self.cols.astype(np.int64),
                            self.table[self.coef])


def _table_of(values: list[int]) -> tuple[np.ndarray, dict[int, int]]:
    index = {v: i for i, v in enumerate(sorted(set(values)))}
    table = field.vec_from_ints([v % P for v in sorted(index)])
    return table, index


def compact_matrices(cs: ConstraintSystem) -> tuple[CompactMatrix, CompactMatrix, CompactMatrix]:
    """A, B, C of ``cs`` (a TemplatingCS or plain shape-only system) in compact form, over
    z = (1, public inputs, aux) as ``ConstraintSystem.to_r1cs`` numbers them."""
    npub = cs.num_public
    ncol = 1 + npub + len(cs._aux)
    instances = getattr(cs, "_instances", [])
    ordered = getattr(cs, "ordered", False)
    nplain = len(cs._rows)
    if ordered:  # each plain row's and each instance's first row in recording order
        nr = np.array([t.num_constraints for t, *_ in instances], dtype=np.int64)
        before = np.array(cs._plain_before, dtype=np.int64)
        cum = np.concatenate([[0], np.cumsum(nr)])
        inst_row0 = before + cum[:-1]
        plain_pos = np.arange(nplain, dtype=np.int64) + cum[np.searchsorted(before, np.arange(nplain),
                                                                             side="right")]
    groups: dict[int, list] = {}
    order = []
    for n_i, inst in enumerate(instances):
        key = id(inst[0])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(inst + ((int(inst_row0[n_i]) if ordered else 0),))
    mats = []
    for which in range(3):
        values: dict[int, int] = {}  # coefficient mod r -> table index
        inv: list[int] = []          # table index -> coefficient

        def gidx(v: int) -> int:
            v %= P
            if v not in values:
                values[v] = len(inv)
                inv.append(v)
            return values[v]

        # -- the plain rows (Fr coefficients of any size)
        rows_d, cols_d, co_d = [], [], []
        for r, row in enumerate(cs._rows):
            for k, c in row[which].items():
                if c % P:
                    rows_d.append(r)
                    cols_d.append(k if k >= 0 else npub - k)
                    co_d.append(gidx(c))
        parts_r = [plain_pos[np.array(rows_d, np.int64)] if ordered else np.array(rows_d, np.int64)]
        parts_c = [np.array(cols_d, np.int64)]
        parts_v = [np.array(co_d, np.int64)]
        row0 = len(cs._rows)
        # -- template instances, all of one template at once
        for key in order:
            insts = groups[key]
            tmpl = insts[0][0]
            er, ekind, eidx, ecoef, ttab = _template_entries(tmpl, which)
            g = np.array([gidx(v) for v in ttab], dtype=np.int64)
            I = len(insts)
            keys = np.stack([x[1] for x in insts])      # (I, slots)
            coefs = np.stack([x[2] for x in insts])
            starts = np.array([x[3] for x in insts], dtype=np.int64)
            nr = tmpl.num_constraints
            if ordered:
                rr = np.array([x[4] for x in insts], dtype=np.int64)[:, None] + er[None, :]
            else:
                rr = row0 + np.arange(I, dtype=np.int64)[:, None] * nr + er[None, :]
            col = np.zeros((I, len(er)), dtype=np.int64)
            keep = np.ones((I, len(er)), dtype=bool)
            s_m = ekind == 1
            sk = keys[:, eidx[s_m]]
            col[:, s_m] = np.where(sk >= 0, sk, npub - sk)
            keep[:, s_m] = coefs[:, eidx[s_m]] != 0
            a_m = ekind == 2
            col[:, a_m] = npub + 1 + starts[:, None] + eidx[a_m][None, :]
            co = np.broadcast_to(g[ecoef], (I, len(er)))
            rr, col, co = rr[keep], col[keep], co[keep].copy()
            # constant-1 slots put a second entry on column 0 of some rows: merge those
            k2 = rr * ncol + col
            o = np.argsort(k2, kind="stable")
            k2s = k2[o]
            dup = np.flatnonzero(k2s[1:] == k2s[:-1])
            if len(dup):
                drop = np.zeros(len(k2), dtype=bool)
                heads = {}
                for d in dup.tolist():
                    head = heads.get(d, d)
                    heads[d + 1] = head
                    h_i, n_i = o[head], o[d + 1]
                    co[h_i] = gidx(inv[int(co[h_i])] + inv[int(co[n_i])])
                    drop[n_i] = True
                zero = values.get(0)
                if zero is not None:
                    drop |= co == zero
                rr, col, co = rr[~drop], col[~drop], co[~drop]
            parts_r.append(rr)
            parts_c.append(col)
            parts_v.append(co)
            row0 += I * nr
        table = field.vec_from_ints(inv)
        rows = np.concatenate(parts_r)
        cols = np.concatenate(parts_c)
        coef = np.concatenate(parts_v)
        if ordered:
            o = np.argsort(rows, kind="stable")
            rows, cols, coef = rows[o], cols[o], coef[o]
        if len(rows) and np.any(np.diff(rows) < 0):
            raise AssertionError("compact_matrices: entries out of row order")
        counts = np.bincount(rows, minlength=row0) if len(rows) else np.zeros(row0, np.int64)
        indptr = np.zeros(row0 + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        cdtype = np.uint16 if len(table) < (1 << 16) else np.int32
        mats.append(CompactMatrix(indptr, cols.astype(np.int32), coef.astype(cdtype), table))
    return tuple(mats)


def _template_entries(tmpl, which: int):
    """(row, kind 0 one / 1 slot / 2 own variable, index, coefficient index, coefficient table)
    per nonzero of one of a template's matrices, cached on the template."""
    cache = tmpl.__dict__.setdefault("_entries", {})
    if which not in cache:
        r, kind, idx, coef = [], [], [], []
        tab: dict[int, int] = {}
        for i, row in enumerate(tmpl.rows):
            for k, c in row[which].items():
                c %= P
                if not c:
                    continue
                r.append(i)
                if k == 0:
                    kind.append(0); idx.append(0)
                elif k > 0:
                    kind.append(1); idx.append(k - 1)
                else:
                    kind.append(2); idx.append(-k - 1)
                coef.append(tab.setdefault(c, len(tab)))
        cache[which] = (np.array(r, np.int64), np.array(kind, np.int8), np.array(idx, np.int64),
                        np.array(coef, np.int64), sorted(tab, key=tab.get))
    return cache[which]


@dataclass
class Replicated:
    """One matrix of a partition: ``header`` rows over global columns, then ``copies`` copies of
    ``block`` whose local column x maps to ``base[x] + j * stride[x]`` in copy j."""
    header: CompactMatrix
    block: CompactMatrix
    base: np.ndarray     # int64 (block columns,)
    stride: np.ndarray   # int64
    copies: int

    @property
    def rows(self) -> int:
        return self.header.rows + self.copies * self.block.rows

    @property
    def nnz(self) -> int:
        return self.header.nnz + self.copies * self.block.nnz

    @property
    def nbytes(self) -> int:
        return self.header.nbytes + self.block.nbytes + self.base.nbytes + self.stride.nbytes

    def copy_columns(self, j: int) -> np.ndarray:
        """Global int64 columns of copy j's nonzeros (in the block's order)."""
        c = self.block.cols
        return self.base[c] + j * self.stride[c]

    def to_sparse(self) -> SparseMatrix:
        """The full CSR matrix with Fr coefficients (nnz x 40 bytes: for the sizes a backend holds)."""
        h, b = self.header, self.block
        rows, nnz = self.rows, self.nnz
        indptr = np.empty(rows + 1, dtype=np.int64)
        indices = np.empty(nnz, dtype=np.int64)
        coeffs = np.empty((nnz, 4), dtype=np.uint64)
        indptr[:h.rows] = h.indptr[:-1]
        indices[:h.nnz] = h.cols
        coeffs[:h.nnz] = h.table[h.coef]
        t_base, t_stride = self.base[b.cols], self.stride[b.cols]
        bco = b.table[b.coef]
        for j in range(self.copies):
            lo, row = h.nnz + j * b.nnz, h.rows + j * b.rows
            out = indices[lo:lo + b.nnz]
            np.multiply(t_stride, j, out=out)
            out += t_base
            coeffs[lo:lo + b.nnz] = bco
            indptr[row:row + b.rows] = lo + b.indptr[:-1]
        indptr[rows] = nnz
        return SparseMatrix(indptr, indices, coeffs)


def replicate(header_mats, block_mats, header_map: np.ndarray, segments: np.ndarray, nvar: int,
              copies: int) -> list[Replicated]:
    """A partition's A, B, C from its recorded blocks (the filecoin family): each
    header matrix with its columns renumbered by ``header_map``, and the challenge block's
    replicated ``copies`` times by the column map ``segments`` (``expand_segments``)."""
    base, stride = expand_segments(segments, nvar)
    return [Replicated(CompactMatrix(hm.indptr, header_map[hm.cols].astype(np.int32), hm.coef, hm.table),
                       cm, base, stride, copies) for hm, cm in zip(header_mats, block_mats)]


@dataclass
class CompactR1CS(Sizes):
    """A partition's matrices, compact: ``a``, ``b``, ``c`` are ``Replicated``."""
    num_public: int
    num_aux: int
    a: Replicated
    b: Replicated
    c: Replicated
    segments: np.ndarray  # the challenge block's column map (see build_compact); base/stride shared

    @property
    def nbytes(self) -> int:
        """Bytes held: three header + block matrices and one shared base/stride map."""
        m = sum(x.header.nbytes + x.block.nbytes for x in (self.a, self.b, self.c))
        return m + self.a.base.nbytes + self.a.stride.nbytes

    def digest(self) -> bytes:
        """SHA-256 over the sizes and the compact arrays (header, block, column map of A, B, C):
        names the circuit in keys. The compact form determines the full matrices, so this is a
        name for them too; ``to_r1cs()`` gives its R1CS this digest, so a key made from either
        form (CPU host setup, CUDA device setup) names the same circuit. Computed once."""
        d = self.__dict__.get("_digest")
        if d is None:
            h = hashlib.sha256(b"zkhive-compact-r1cs-v1")
            h.update(struct.pack("<QQQ", self.num_public, self.num_aux, self.num_constraints))
            for m in (self.a, self.b, self.c):
                h.update(struct.pack("<Q", m.copies))
                for cm in (m.header, m.block):
                    for arr in (cm.indptr, cm.cols, cm.coef, cm.table):
                        h.update(struct.pack("<Q", arr.size) + np.ascontiguousarray(arr).tobytes())
                h.update(np.ascontiguousarray(m.base).tobytes() + np.ascontiguousarray(m.stride).tobytes())
            d = self.__dict__["_digest"] = h.digest()
        return d

    def to_r1cs(self) -> R1CS:
        """The full CSR matrices with Fr coefficients, as every backend takes them (carrying the
        compact form's digest: see ``digest``)."""
        r = R1CS(self.num_public, self.num_aux, self.a.to_sparse(), self.b.to_sparse(),
                 self.c.to_sparse())
        r.validate()
        r.__dict__["_digest"] = self.digest()  # R1CS.digest's cached value (frozen dataclass)
        return r

    def save(self, path: Path) -> None:
        """The arrays into ``path`` (npz), the column maps as their segments: ValueError where
        the segments do not give back each matrix's column map (a file that would load as
        other matrices, under this one's stored digest)."""
        base, stride = expand_segments(self.segments, len(self.a.base))
        for name, m in (("A", self.a), ("B", self.b), ("C", self.c)):
            if not (np.array_equal(m.base, base) and np.array_equal(m.stride, stride)):
                raise ValueError(f"matrix {name}'s column map is not the one its segments give "
                                 f"({len(self.segments)} segments): these matrices cannot be saved")
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {"sizes": np.array([self.num_public, self.num_aux, len(self.a.base), self.a.copies],
                                    dtype=np.int64), "segments": self.segments}
        for name, m in (("a", self.a), ("b", self.b), ("c", self.c)):
            for part, cm in (("h", m.header), ("t", m.block)):
                for f in ("indptr", "cols", "coef", "table"):
                    arrays[f"{name}_{part}_{f}"] = getattr(cm, f)
        # the digest of these arrays, so a load need not hash them again (1.3 s at 32 GiB, on
        # a prover's path to ready); the zip's CRC-32 of every member is checked as it is read,
        # so a damaged array refuses the file (rebuilt) rather than leave this digest stale
        arrays["digest"] = np.frombuffer(self.digest(), dtype=np.uint8)
        fd, tmp = tempfile.mkstemp(suffix=".npz.tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: Path) -> "CompactR1CS":
        with np.load(path, allow_pickle=False) as z:
            num_public, num_aux, nvar, copies = (int(x) for x in z["sizes"])
            segments = z["segments"]
            base, stride = expand_segments(segments, nvar)
            mats = []
            for name in "abc":
                parts = [CompactMatrix(*(z[f"{name}_{part}_{f}"] for f in ("indptr", "cols", "coef", "table")))
                         for part in ("h", "t")]
                mats.append(Replicated(parts[0], parts[1], base, stride, copies))
            digest = bytes(z["digest"]) if "digest" in z.files else b""
        cr = cls(num_public, num_aux, *mats, segments=segments)
        if len(digest) == 32:   # saved by ``save`` (an older file: hashed at first use)
            cr.__dict__["_digest"] = digest
        return cr


def expand_segments(segments: np.ndarray, nvar: int) -> tuple[np.ndarray, np.ndarray]:
    """base, stride per template column from (start, end, first global column, stride) rows."""
    base = np.zeros(nvar, dtype=np.int64)
    stride = np.zeros(nvar, dtype=np.int64)
    for lo, hi, b0, st in segments.tolist():
        base[lo:hi] = b0 + np.arange(hi - lo)
        stride[lo:hi] = st
    return base, stride
