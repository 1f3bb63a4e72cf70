"""Soundness audit of a constraint system against honest witnesses: finds what an
under-constrained gadget looks like, whatever built it (our gadgets, bellpepper ports).

    report = audit(r1cs, [z1, z2, ...])    # z: full assignments (1, public, aux) that satisfy r1cs
    report.problems                         # [] when nothing was found; else one line each
    assert_sound(r1cs, [z1, z2])            # the same, raising AssertionError with the lines

What it checks, on the matrices and on the witnesses (several witnesses from random inputs make
the value-based classes reliable):
- every auxiliary (witness) variable appears in some constraint (A, B or C);
- no linear row sums bound bits past the modulus (a packing of more than ~254 bits, a MultiEq
  that holds too many additions): its equation mod r would not fix the bits' integer sum;
- every *bit* variable (0 or 1 in every witness, 1 in at least one) is bound to {0, 1}: by a
  booleanity row (one that involves only that variable and the constant, is quadratic in it and
  vanishes at 0 and 1: ``b (1 - b) = 0`` in any arrangement), or by a row that determines it
  from variables already bound (an AND, an XOR, a selection: for every 0/1 assignment of the
  others the row is linear in it with a solution in {0, 1}); ``assume_boolean`` names variables
  the caller binds (a template's input slots);
- for each variable class a wrong value that keeps its neighbours' types is refused, and by
  which constraint: a bit set to 2 (by its booleanity row), a bit flipped, a field element off
  by one. A variable that can change alone with every constraint still satisfied is free: a
  second witness for the same statement.

Checking one variable's change touches only the rows it appears in (the row values A z, B z,
C z are computed once): a SHA-256 compression (45k constraints, 4 witnesses) takes ~10 s on
a shared 2-core machine, sdr-256k's circuit (193k, the family retired in issue 36) ~2 minutes.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field as dc_field
from typing import Iterable, Sequence

import numpy as np

from . import field
from .r1cs import R1CS

P = field.MODULUS
#: at most this many other bound bits in a row that determines a bit (2^k cases are enumerated)
MAX_DETERMINING = 5
#: a determined bit is kept as a function of at most this many base bits (else it is a base)
MAX_SUPPORT = 8


@dataclass
class Report:
    """What ``audit`` found. ``problems``: one line per soundness finding (empty: none).
    ``refused``: per class of wrong value, (variable, [constraint descriptions]) examples."""

    num_constraints: int
    num_aux: int
    unconstrained: list[int] = dc_field(default_factory=list)
    bits: list[int] = dc_field(default_factory=list)
    booleanity: dict[int, int] = dc_field(default_factory=dict)   # bit -> its booleanity row
    determined: dict[int, int] = dc_field(default_factory=dict)   # bit -> the row binding it
    unbound_bits: list[int] = dc_field(default_factory=list)
    free: list[tuple[int, str]] = dc_field(default_factory=list)  # (variable, the wrong value)
    refused: dict[str, list[tuple[int, list[str]]]] = dc_field(default_factory=dict)
    problems: list[str] = dc_field(default_factory=list)

    def summary(self) -> str:
        head = (f"{self.num_constraints} constraints, {self.num_aux} aux variables, "
                f"{len(self.bits)} bits ({len(self.booleanity)} with a booleanity row, "
                f"{len(self.determined)} determined by bound bits)")
        return "\n".join([head] + self.problems)


class _Matrix:
    """One of A, B, C as Python ints by row and by column."""

    def __init__(self, m, num_vars: int):
        self.ptr = m.indptr.tolist()
        self.cols = m.indices.tolist()
        self.coefs = field.vec_to_ints(m.coeffs) if m.nnz else []
        rows = np.repeat(np.arange(m.rows), np.diff(m.indptr))
        order = np.argsort(m.indices, kind="stable")
        self.col_ptr = np.concatenate([[0], np.cumsum(np.bincount(m.indices, minlength=num_vars))]).tolist()
        self.col_rows = rows[order].tolist()
        self.col_coefs = [self.coefs[i] for i in order.tolist()]

    def row(self, r: int) -> dict[int, int]:
        lo, hi = self.ptr[r], self.ptr[r + 1]
        return dict(zip(self.cols[lo:hi], self.coefs[lo:hi]))

    def column(self, v: int) -> list[tuple[int, int]]:
        lo, hi = self.col_ptr[v], self.col_ptr[v + 1]
        return list(zip(self.col_rows[lo:hi], self.col_coefs[lo:hi]))


def _ints(vec: np.ndarray) -> list[int]:
    """field.vec_to_ints, fast when most values are below 2^64 (bits, small integers)."""
    vec = np.ascontiguousarray(vec, dtype="<u8").reshape(-1, 4)
    out = vec[:, 0].tolist()
    for i in np.flatnonzero(vec[:, 1:].any(axis=1)).tolist():
        out[i] = field.vec_to_ints(vec[i:i + 1])[0]
    return out


def _eval(row: dict[int, int], values: dict[int, int]) -> int:
    return sum(c * (1 if k == 0 else values[k]) for k, c in row.items()) % P


class Audit:
    """The matrices indexed for the checks, and the witnesses' row values."""

    def __init__(self, r1cs: R1CS, witnesses: Sequence[np.ndarray]):
        if not witnesses:
            raise ValueError("audit needs at least one satisfying witness")
        self.r1cs = r1cs
        self.n = r1cs.num_variables
        self.first_aux = 1 + r1cs.num_public
        self.mats = [_Matrix(m, self.n) for m in (r1cs.a, r1cs.b, r1cs.c)]
        self._rows: dict[int, tuple] = {}
        self.zs: list[list[int]] = []
        self.rowvals: list[list[list[int]]] = []  # witness -> (A z, B z, C z) as ints
        for i, z in enumerate(witnesses):
            bad = r1cs.first_unsatisfied(z)
            if bad is not None:
                raise ValueError(f"witness {i} does not satisfy {self.describe(bad)}")
            self.zs.append(_ints(z))
            self.rowvals.append([_ints(v) for v in r1cs.evaluate(z)])

    # -- names ----------------------------------------------------------------------------------
    def describe(self, row: int) -> str:
        names = self.r1cs.names
        name = names[row] if names and row < len(names) else None
        return f"constraint {row}" + (f" ({name})" if name else "")

    def name(self, row: int) -> str | None:
        names = self.r1cs.names
        return names[row] if names and row < len(names) else None

    # -- structure --------------------------------------------------------------------------------
    def rows_of(self, v: int) -> set[int]:
        return {r for m in self.mats for r, _ in m.column(v)}

    def unconstrained(self) -> list[int]:
        return [v for v in range(self.first_aux, self.n)
                if all(m.col_ptr[v] == m.col_ptr[v + 1] for m in self.mats)]

    def row(self, r: int) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        got = self._rows.get(r)
        if got is None:
            got = self._rows[r] = tuple(m.row(r) for m in self.mats)
        return got

    def booleanity_rows(self) -> dict[int, int]:
        """variable -> the first row that allows it exactly the values 0 and 1 by itself."""
        out: dict[int, int] = {}
        for r in range(self.r1cs.num_constraints):
            a, b, c = self.row(r)
            vs = (set(a) | set(b) | set(c)) - {0}
            if len(vs) != 1:
                continue
            (v,) = vs
            if v in out:
                continue
            a0, a1 = a.get(0, 0), a.get(v, 0)
            b0, b1 = b.get(0, 0), b.get(v, 0)
            c0, c1 = c.get(0, 0), c.get(v, 0)
            # (a0 + a1 x)(b0 + b1 x) - (c0 + c1 x): quadratic, zero at 0 and at 1
            if a1 * b1 % P and (a0 * b0 - c0) % P == 0 and ((a0 + a1) * (b0 + b1) - c0 - c1) % P == 0:
                out[v] = r
        return out

    def observed_bits(self) -> list[int]:
        """Aux variables that are 0 or 1 in every witness and 1 in at least one."""
        out = []
        for v in range(self.first_aux, self.n):
            vals = {z[v] for z in self.zs}
            if vals <= {0, 1} and 1 in vals:
                out.append(v)
        return out

    def _binds(self, r: int, v: int, defn: dict[int, tuple]) -> bool:
        """Whether row r forces v into {0, 1} given its other variables' definitions. ``defn``
        holds, per bound bit, (bases, table): its value for each 0/1 assignment of a few base
        bits (a bit bound by its booleanity row is its own base), so correlated bits (p = b c
        and b, in SHA's maj) are enumerated together; v's definition is added when it holds."""
        a, b, c = self.row(r)
        others = ((set(a) | set(b) | set(c)) - {0, v})
        if len(others) > MAX_DETERMINING or not all(u in defn for u in others):
            return False
        a1, b1, c1 = a.get(v, 0), b.get(v, 0), c.get(v, 0)
        if a1 * b1 % P:
            return False  # quadratic in v: not a determination this looks for
        bases = sorted({x for u in others for x in defn[u][0]})
        if len(bases) > MAX_SUPPORT:  # too wide: the others as independent bits (weaker)
            local = {u: ((u,), {(0,): 0, (1,): 1}) for u in others}
            bases = sorted(others)
        else:
            local = defn
        pos = {x: i for i, x in enumerate(bases)}
        proj = {u: [pos[x] for x in local[u][0]] for u in others}
        table: dict[tuple, int] = {}
        for bits in itertools.product((0, 1), repeat=len(bases)):
            env = {u: local[u][1].get(tuple(bits[i] for i in proj[u])) for u in others}
            if None in env.values():
                continue  # an assignment of the bases that an other's own row rules out
            env[v] = 0
            a0, b0, c0 = _eval(a, env), _eval(b, env), _eval(c, env)
            # linear in v: (a0 b0 - c0) + (a1 b0 + a0 b1 - c1) v = 0
            k0, k1 = (a0 * b0 - c0) % P, (a1 * b0 + a0 * b1 - c1) % P
            if k1 == 0:
                if k0 == 0:
                    return False  # this case leaves v free
                continue  # this case of the others is impossible: nothing to bind
            x = -k0 * pow(k1, -1, P) % P
            if x not in (0, 1):
                return False
            table[bits] = x
        if not table:
            return False
        defn[v] = (tuple(bases), table) if local is defn else ((v,), {(0,): 0, (1,): 1})
        return True

    def bind_bits(self, bits: Iterable[int], assume_boolean: Iterable[int] = ()
                  ) -> tuple[dict[int, int], dict[int, int], list[int]]:
        """(booleanity rows, rows that determine a bit from bound bits, unbound bits). Every
        variable that is 0 or 1 in all witnesses may serve to bind others (a bit that happened
        to be 0 in every witness is still a bit)."""
        boolean = self.booleanity_rows()
        bits = list(bits)
        defn = {u: ((u,), {(0,): 0, (1,): 1}) for u in set(assume_boolean) | set(boolean)}
        determined: dict[int, int] = {}
        todo = [v for v in range(self.first_aux, self.n)
                if v not in defn and all(z[v] in (0, 1) for z in self.zs)]
        changed = True
        while todo and changed:
            changed = False
            left = []
            for v in todo:
                row = next((r for r in sorted(self.rows_of(v)) if self._binds(r, v, defn)), None)
                if row is None:
                    left.append(v)
                else:
                    determined[v] = row
                    changed = True
            todo = left
        self.bound = set(defn)
        return ({v: boolean[v] for v in bits if v in boolean},
                {v: determined[v] for v in bits if v in determined},
                sorted(v for v in bits if v not in defn))

    def wrapping_rows(self) -> list[tuple[int, int]]:
        """Linear rows (one side a constant) whose bound bits can sum past the modulus: the
        sum of the absolute values of their coefficients is >= r, so the equation mod r no
        longer fixes the bits' integer sum (a MultiEq holding too many additions, a packing of
        256 bits). Coefficients are read signed (|c| <= r/2: rows mix + and -), so a lone
        coefficient above r/2 (2^254) reads as negative and a 255-bit packing passes: a known
        limit. (row, bit length of that sum)."""
        bound = getattr(self, "bound", set())
        half = P // 2
        out = []
        for r in range(self.r1cs.num_constraints):
            a, b, c = self.row(r)
            if set(b) <= {0}:
                lin, k = a, b.get(0, 0)
            elif set(a) <= {0}:
                lin, k = b, a.get(0, 0)
            else:
                continue
            total = 0
            for side, sign in ((lin, k), (c, P - 1)):
                for v, co in side.items():
                    if v and v in bound:
                        co = co * sign % P
                        total += co if co <= half else P - co
            if total >= P:
                out.append((r, total.bit_length()))
        return out

    # -- changes ----------------------------------------------------------------------------------
    def refusing_rows(self, changes: dict[int, int], witness: int = 0) -> list[int]:
        """Rows not satisfied once the variables in ``changes`` take their new values (the rest
        of witness ``witness`` unchanged); [] means the changed assignment satisfies them all."""
        z = self.zs[witness]
        vals = self.rowvals[witness]
        delta = [dict(), dict(), dict()]
        for v, new in changes.items():
            d = (new - z[v]) % P
            if not d:
                continue
            for which, m in enumerate(self.mats):
                for r, c in m.column(v):
                    delta[which][r] = (delta[which].get(r, 0) + c * d) % P
        out = []
        for r in sorted(set(delta[0]) | set(delta[1]) | set(delta[2])):
            a = (vals[0][r] + delta[0].get(r, 0)) % P
            b = (vals[1][r] + delta[1].get(r, 0)) % P
            c = (vals[2][r] + delta[2].get(r, 0)) % P
            if (a * b - c) % P:
                out.append(r)
        return out


def audit(r1cs: R1CS, witnesses: Sequence[np.ndarray], *, assume_boolean: Iterable[int] = (),
          bits: Iterable[int] | None = None, sample: int | None = None, seed: int = 0,
          examples: int = 3) -> Report:
    """The checks of the module docstring. ``bits``: the bit variables (default: observed in the
    witnesses). ``sample``: check the single-variable changes of at most this many variables
    per class (default: all)."""
    A = Audit(r1cs, witnesses)
    rep = Report(r1cs.num_constraints, r1cs.num_aux)
    rep.unconstrained = A.unconstrained()
    for v in rep.unconstrained:
        rep.problems.append(f"variable {v} appears in no constraint")
    if bits is None:
        # observed, and those with a booleanity row whose witnesses all happen to hold 0
        zero = {v for v in range(A.first_aux, A.n) if all(z[v] == 0 for z in A.zs)}
        bits = set(A.observed_bits()) | (set(A.booleanity_rows()) & zero)
    rep.bits = sorted(bits)
    rep.booleanity, rep.determined, rep.unbound_bits = A.bind_bits(rep.bits, assume_boolean)
    for v in rep.unbound_bits:
        rep.problems.append(f"bit variable {v} has no booleanity constraint and is not determined "
                            f"by bound bits (it appears in {_list(A, sorted(A.rows_of(v)))})")

    for r, nbits in A.wrapping_rows():
        rep.problems.append(f"{A.describe(r)} sums bits with coefficients up to 2^{nbits} in all, "
                            "past the modulus: it does not fix their integer sum")

    rng = np.random.default_rng(seed)
    bitset = set(rep.bits)
    fes = [v for v in range(A.first_aux, A.n) if v not in bitset]

    def pick(vs: list[int]) -> list[int]:
        if sample is None or len(vs) <= sample:
            return vs
        return sorted(rng.choice(vs, sample, replace=False).tolist())

    def witness_for(v: int, label: str) -> int:
        # a bit is flipped from 1 to 0 where some witness has it 1 (0 -> 1 too often lands on
        # a row that allows both), set to 2 from witness 0
        if label == "bit flipped":
            return next((i for i, z in enumerate(A.zs) if z[v] == 1), 0)
        return 0

    wrong = {"bit set to 2": lambda v, z: 2, "bit flipped": lambda v, z: 1 - z[v],
             "field element off by one": lambda v, z: (z[v] + 1) % P}
    for label, vs in (("bit set to 2", pick(rep.bits)), ("bit flipped", pick(rep.bits)),
                      ("field element off by one", pick(fes))):
        rep.refused[label] = []
        for v in vs:
            if v in rep.unconstrained:
                continue
            w = witness_for(v, label)
            new = wrong[label](v, A.zs[w])
            rows = A.refusing_rows({v: new}, w)
            if not rows:
                rep.free.append((v, label))
                rep.problems.append(f"variable {v} can be changed alone ({label}: {new}) and every "
                                    "constraint still holds")
                continue
            if len(rep.refused[label]) < examples:
                rep.refused[label].append((v, [A.describe(r) for r in rows]))
            if label == "bit set to 2":
                binding = rep.booleanity.get(v, rep.determined.get(v))
                if binding is not None and binding not in rows:
                    rep.problems.append(f"bit variable {v} set to 2 is not refused by the row that "
                                        f"binds it, {A.describe(binding)}")
    return rep


def _list(A: Audit, rows: list[int], n: int = 4) -> str:
    s = ", ".join(A.describe(r) for r in rows[:n])
    return s + (f" and {len(rows) - n} more" if len(rows) > n else "") if rows else "no constraint"


def assert_sound(r1cs: R1CS, witnesses: Sequence[np.ndarray], **kw) -> Report:
    """``audit``, raising AssertionError with its summary when it found a problem."""
    rep = audit(r1cs, witnesses, **kw)
    if rep.problems:
        more = f"\n... and {len(rep.problems) - 20} more" if len(rep.problems) > 20 else ""
        raise AssertionError("unsound constraint system: " + "\n".join(
            [rep.summary().split("\n")[0]] + rep.problems[:20]) + more)
    return rep


def refused_by(r1cs: R1CS, z: np.ndarray, changes: dict[int, int]) -> list[str]:
    """The constraints (described: index and name) that refuse ``z`` with ``changes`` applied;
    [] when the changed assignment satisfies every constraint. For a gadget's own wrong-value
    tests (a swapped pair, a sum off by the modulus) that change several variables at once."""
    A = Audit(r1cs, [z])
    return [A.describe(r) for r in A.refusing_rows(changes)]


__all__ = ["Audit", "Report", "audit", "assert_sound", "refused_by"]
