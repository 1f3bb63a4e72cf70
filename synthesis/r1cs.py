"""Rank-1 constraint systems: sparse A, B, C over Fr with z = (1, public inputs, aux).

Constraint i holds when <A_i, z> * <B_i, z> = <C_i, z>. Variable 0 is the constant one, variables
1..num_public are the public inputs, the rest (num_aux of them) the prover's auxiliary values.
Matrices are CSR (row pointer, column index, coefficient) so the prover can form A z, B z, C z
in one sparse matrix-vector product each, on the host or the device.
"""
from __future__ import annotations

import functools
import hashlib
import struct
from dataclasses import dataclass

import numpy as np

from . import field


class UnsatisfiedConstraint(ValueError):
    """An assignment violates a constraint; ``index`` names the first one that fails."""

    def __init__(self, index: int, name: str | None, lhs: int, rhs: int):
        self.index, self.name, self.lhs, self.rhs = index, name, lhs, rhs
        label = f" ({name})" if name else ""
        super().__init__(f"constraint {index}{label} is not satisfied: "
                         f"<A,z>*<B,z> = {lhs:#x} but <C,z> = {rhs:#x}")


class R1CSError(ValueError):
    """The constraint system or an assignment has the wrong shape."""


@dataclass(frozen=True)
class SparseMatrix:
    """CSR matrix over Fr: row i's entries are ``indices[indptr[i]:indptr[i+1]]`` with
    coefficients ``coeffs[...]`` (an (nnz, 4) uint64 Fr vector)."""

    indptr: np.ndarray   # int64, (rows + 1,)
    indices: np.ndarray  # int64, (nnz,)
    coeffs: np.ndarray   # uint64, (nnz, 4)

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @classmethod
    def from_rows(cls, rows: list[dict[int, int]]) -> "SparseMatrix":
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        idx: list[int] = []
        vals: list[int] = []
        for i, row in enumerate(rows):
            for var in sorted(row):
                c = row[var] % field.MODULUS
                if c:
                    idx.append(var)
                    vals.append(c)
            indptr[i + 1] = len(idx)
        return cls(indptr, np.array(idx, dtype=np.int64), field.vec_from_ints(vals).reshape(-1, 4))

    def row(self, i: int) -> list[tuple[int, int]]:
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        return list(zip(self.indices[lo:hi].tolist(), field.vec_to_ints(self.coeffs[lo:hi])))

    def digest_update(self, h) -> None:
        for arr in (self.indptr, self.indices, self.coeffs):
            h.update(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes())


class Sizes:
    """The sizes both R1CS forms answer alike (R1CS here, compact.CompactR1CS): constraints,
    variables (1 + public + aux) and nonzeros, from their ``a``, ``b``, ``c`` and counts."""

    @property
    def num_constraints(self) -> int:
        return self.a.rows

    @property
    def num_variables(self) -> int:
        return 1 + self.num_public + self.num_aux

    @property
    def nnz(self) -> int:
        return self.a.nnz + self.b.nnz + self.c.nnz


@dataclass(frozen=True)
class R1CS(Sizes):
    num_public: int       # public inputs, not counting the constant one
    num_aux: int
    a: SparseMatrix
    b: SparseMatrix
    c: SparseMatrix
    names: tuple[str | None, ...] | None = None  # optional per-constraint labels for errors

    def validate(self) -> None:
        n = self.num_variables
        for label, m in (("A", self.a), ("B", self.b), ("C", self.c)):
            if m.rows != self.num_constraints:
                raise R1CSError(f"matrix {label} has {m.rows} rows, A has {self.num_constraints}")
            if m.nnz and (int(m.indices.min()) < 0 or int(m.indices.max()) >= n):
                raise R1CSError(f"matrix {label} refers to a variable outside 0..{n - 1}")
            if np.any(np.diff(m.indptr) < 0) or int(m.indptr[-1]) != m.nnz:
                raise R1CSError(f"matrix {label} has a malformed row pointer")

    @functools.cached_property
    def _digest(self) -> bytes:
        h = hashlib.sha256(b"zkhive-r1cs-v1")
        h.update(struct.pack("<QQQ", self.num_public, self.num_aux, self.num_constraints))
        for m in (self.a, self.b, self.c):
            m.digest_update(h)
        return h.digest()

    def digest(self) -> bytes:
        """SHA-256 over the sizes and the three matrices: names the circuit in key files.
        Computed once per object (the matrices are immutable by contract): the prover checks
        it against the key on every proof, and hashing 2^24-constraint matrices takes seconds."""
        return self._digest

    def check_assignment_shape(self, z: np.ndarray) -> np.ndarray:
        z = field.check_vec(z, what="assignment")
        if len(z) != self.num_variables:
            raise R1CSError(f"assignment has {len(z)} values, the circuit has "
                            f"{self.num_variables} variables (1 + {self.num_public} public + "
                            f"{self.num_aux} aux)")
        if field.vec_to_ints(z[:1])[0] != 1:
            raise R1CSError("assignment[0] must be the constant 1")
        return z

    def evaluate(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A z, B z, C z) as Fr vectors, through the host library's sparse product."""
        from arith import native  # the same C++ field code the CUDA kernels use

        z = self.check_assignment_shape(z)
        return tuple(native.spmv(m.indptr, m.indices, m.coeffs, z) for m in (self.a, self.b, self.c))

    def first_unsatisfied(self, z: np.ndarray) -> int | None:
        az, bz, cz = self.evaluate(z)
        from arith import native

        bad = np.flatnonzero(np.any(native.mul(az, bz) != cz, axis=1))
        return int(bad[0]) if len(bad) else None

    def check(self, z: np.ndarray) -> None:
        """Raise UnsatisfiedConstraint naming the first failing constraint, if any."""
        i = self.first_unsatisfied(z)
        if i is not None:
            zi = field.vec_to_ints(z)
            dot = lambda m: sum(c * zi[v] for v, c in m.row(i)) % field.MODULUS  # noqa: E731
            name = self.names[i] if self.names else None
            raise UnsatisfiedConstraint(i, name, dot(self.a) * dot(self.b) % field.MODULUS,
                                        dot(self.c))

    def is_satisfied(self, z: np.ndarray) -> bool:
        return self.first_unsatisfied(z) is None
