"""A small constraint-system builder: allocate variables, form linear combinations, enforce.

    cs = ConstraintSystem()
    x = cs.alloc_input(3)            # public input
    y = cs.alloc(9)                  # auxiliary (witness) variable
    cs.enforce(x, x, y, "y = x^2")   # <a,z> * <b,z> = <c,z>
    r1cs, z = cs.to_r1cs(), cs.assignment()

Values are optional: ``ConstraintSystem(with_values=False)`` records only the shape, which is how
a circuit's matrices are built once per parameter set while per-proof witnesses come from a
separate (vectorised) witness generator. Public inputs are numbered 1..P and auxiliary variables
P+1.. in the order they were allocated, whatever order the two kinds were interleaved in.
"""
from __future__ import annotations

from typing import Iterable, Union

import numpy as np

from . import field
from .r1cs import R1CS, SparseMatrix, UnsatisfiedConstraint

P = field.MODULUS


class Variable:
    """A handle to one variable. ``_key`` is 0 for the constant one, k > 0 for the k-th public
    input, -(k + 1) for the k-th auxiliary variable (renumbered in ``to_r1cs``)."""

    __slots__ = ("_key",)

    def __init__(self, key: int):
        self._key = key

    def lc(self) -> "LinearCombination":
        return LinearCombination({self._key: 1})

    def __add__(self, other): return self.lc() + other
    __radd__ = __add__
    def __sub__(self, other): return self.lc() - other
    def __rsub__(self, other): return LinearCombination.of(other) - self.lc()
    def __mul__(self, k: int): return self.lc() * k
    __rmul__ = __mul__
    def __neg__(self): return self.lc() * -1
    def __repr__(self): return f"Variable({self._key})"


class LinearCombination:
    """sum of coeff * variable, coefficients reduced mod r, zero terms dropped."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[int, int] | None = None):
        self.terms = terms or {}

    @staticmethod
    def of(x: "Term") -> "LinearCombination":
        if isinstance(x, LinearCombination):
            return x
        if isinstance(x, Variable):
            return x.lc()
        if isinstance(x, int):
            return LinearCombination({0: x % P} if x % P else {})
        raise TypeError(f"cannot use {type(x).__name__} in a linear combination")

    def __add__(self, other):
        out = dict(self.terms)
        for k, c in LinearCombination.of(other).terms.items():
            v = (out.get(k, 0) + c) % P
            if v:
                out[k] = v
            else:
                out.pop(k, None)
        return LinearCombination(out)

    __radd__ = __add__

    def __sub__(self, other):
        return self + LinearCombination.of(other) * -1

    def __rsub__(self, other):
        return LinearCombination.of(other) - self

    def __mul__(self, k: int):
        if not isinstance(k, int):
            raise TypeError("a linear combination can only be scaled by a constant; "
                            "products of variables need a constraint")
        k %= P
        return LinearCombination({v: c * k % P for v, c in self.terms.items()} if k else {})

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1


Term = Union[LinearCombination, Variable, int]
ONE = Variable(0)


class ConstraintSystem:
    def __init__(self, *, with_values: bool = True):
        self.with_values = with_values
        self._inputs: list[int | None] = []
        self._aux: list[int | None] = []
        self._rows: list[tuple[dict, dict, dict]] = []
        self._names: list[str | None] = []

    # -- allocation ---------------------------------------------------------------------------
    def alloc_input(self, value: int | None = None) -> Variable:
        self._inputs.append(self._value(value))
        return Variable(len(self._inputs))

    def alloc(self, value: int | None = None) -> Variable:
        self._aux.append(self._value(value))
        return Variable(-len(self._aux))

    def _value(self, value):
        if self.with_values:
            if value is None:
                raise ValueError("this constraint system records values: pass one to alloc")
            return int(value) % P
        return None

    def value(self, x: Term) -> int:
        """The current value of a variable or linear combination (needs with_values)."""
        if not self.with_values:
            raise ValueError("this constraint system records no values")
        total = 0
        for k, c in LinearCombination.of(x).terms.items():
            total += c * self._key_value(k)
        return total % P

    def _key_value(self, k: int) -> int:
        if k == 0:
            return 1
        return self._inputs[k - 1] if k > 0 else self._aux[-k - 1]

    # -- constraints --------------------------------------------------------------------------
    def enforce(self, a: Term, b: Term, c: Term, name: str | None = None) -> None:
        """Add the constraint <a,z> * <b,z> = <c,z>."""
        self._rows.append(tuple(LinearCombination.of(x).terms for x in (a, b, c)))
        self._names.append(name)

    @property
    def num_constraints(self) -> int:
        return len(self._rows)

    @property
    def num_public(self) -> int:
        return len(self._inputs)

    @property
    def num_aux(self) -> int:
        return len(self._aux)

    def check(self) -> None:
        """Raise UnsatisfiedConstraint for the first failing constraint (Python-int check;
        fine for the small systems this builder is used with directly)."""
        for i, (a, b, c) in enumerate(self._rows):
            va, vb, vc = (sum(co * self._key_value(k) for k, co in t.items()) % P for t in (a, b, c))
            if va * vb % P != vc:
                raise UnsatisfiedConstraint(i, self._names[i], va * vb % P, vc)

    # -- export -------------------------------------------------------------------------------
    def _index(self, k: int) -> int:
        return k if k >= 0 else self.num_public - k  # aux k-th -> P + 1 + k

    def to_r1cs(self) -> R1CS:
        mats = []
        for which in range(3):
            mats.append(SparseMatrix.from_rows(
                [{self._index(k): c for k, c in row[which].items()} for row in self._rows]))
        r1cs = R1CS(self.num_public, self.num_aux, *mats,
                    names=tuple(self._names) if any(self._names) else None)
        r1cs.validate()
        return r1cs

    def public_inputs(self) -> list[int]:
        return list(self._inputs)

    def assignment(self) -> np.ndarray:
        """z = (1, public inputs, aux) as an Fr vector."""
        if not self.with_values:
            raise ValueError("this constraint system records no values")
        return field.vec_from_ints([1, *self._inputs, *self._aux])


def lc_sum(terms: Iterable[Term]) -> LinearCombination:
    out = LinearCombination()
    for t in terms:
        out = out + t
    return out
