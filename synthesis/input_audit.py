"""Input-binding audit of a whole circuit: every public input is bound, shown on a satisfying
witness (issue 35). ``synthesis.audit`` checks a gadget's own variables; this checks what a
proof claims: that a verifier's input cannot be swapped with the witness following it.

    rep = audit_inputs(r1cs, z)              # z: a full satisfying assignment (1, public, aux)
    rep.problems                             # [] when every input is bound; else one line each
    rep.refused[i]                           # the constraints that refuse input i's change
    assert_inputs_bound(r1cs, z, expected_free=...)

The argument. Every auxiliary variable v of a circuit built by our gadgets is either *defined*
by a constraint from other variables, or a *free choice* of the prover (a Merkle sibling, a
column value: what the witness brings). The audit finds the definitions:

- a **single definition** of v: a row linear in v with a non-zero coefficient on the witness,
  ``(a0 + a1 v)(b0 + b1 v) = c0 + c1 v`` with ``a1 b1 = 0`` and ``k1 = a1 b0 + a0 b1 - c1 != 0``:
  given the row's other variables, v is ``-k0 / k1`` and nothing else. In variable order a row
  defines its highest variable; then, repeated to a fixpoint, a row not yet used defines its
  one undefined variable (bellpepper's maj: the result is allocated before the product it is
  computed from);
- a **packing definition** of a group G: a linear row (A or B a constant) whose undefined
  variables are bits bound by booleanity rows, coefficients ``f 2^e`` for distinct e <= 254,
  numbered after the row's other variables (``to_bits``, an input packed from bits): the row
  fixes G up to the representation x or x + r (bellpepper's non-strict ``to_bits_le``, as
  Filecoin's), and the witness's representation is kept;
- a **carry definition** (a MultiEq of additions): a linear row of bits with small integer
  coefficients whose positive and negative sums stay below the modulus, an integer identity;
  read modulo 2^(e+1) it fixes the result bit whose coefficient's lowest set bit is e from the
  terms whose coefficients have a bit at or below e. Each member depends only on its own
  addition's operands and the lower results, never on the later additions that read it.

Each row defines one variable or one group. The definitions are put in an order where each
comes after what it reads (Kahn's algorithm); one on a cycle is dropped. What is left undefined
is the prover's free set F. By induction in that order, the public inputs and F fix every
defined variable: a satisfying assignment is a function of (inputs, F). So for input x_i and a
new value x' the audit recomputes x_i's *cone* (the defined variables whose definitions reach
x_i) in order, everything else kept, and evaluates every row the changes touch. If some row
fails, no satisfying assignment has x' with the other inputs and F unchanged: **x_i is bound
relative to F**. If none fails, x_i can be changed with the witness following it: the input is
*unbound* (named in ``problems``). A carry row is only an integer identity over bits: a
recomputation that leaves a non-bit in one proves nothing, and the input is reported unbound.

Checked on SHA-256 (45k constraints): a message bit flipped, the recomputation satisfies every
row (the digest follows), and only the 512 message bits are free.

Bound relative to F is as strong as the circuit's hashes: a prover who changes F as well
(other siblings, other columns) must make the failing rows (a Merkle root equality, comm_r =
H(comm_c, comm_r_last)) hold again through a hash. That only holds if F is the set the circuit
means to leave free: a constraint removed from inside a hash (a Poseidon round) or a bit's
booleanity makes its variable undefined, a new member of F, and through it the hash is
invertible. ``expected_free`` (F of the real circuit, counted by the caller) closes that hole:
every free variable outside it is reported, and so is every input whose refusing rows are all
reached (through definitions) from one of them: the input is bound only by what the extra
freedom can satisfy.

A defined variable that no row reads besides its definition (and booleanity) is *dangling*:
a computation nothing checks (a Merkle root whose equality was removed). With
``expected_dangling`` (the real circuit's), each new one is a problem naming the inputs it
follows. ``weakened``: the inputs an unexpected free or dangling variable reaches.

Each input is tried with ``x + 1`` and, for an input below 2^64 (an index, a packed challenge),
with its lowest bit flipped (``x ^ 1``) and its highest set bit cleared: an index's change
moves the Merkle path's position, the label's node. The cone is found by a breadth-first walk
of the definition graph (numpy, level by level) and recomputed with Python integers.

``without`` drops rows (as if removed from the R1CS) for the tests that remove each header or
input constraint and expect the audit to name the input.
"""
from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field as dc_field
from typing import Iterable, Sequence

import numpy as np

from . import field
from .r1cs import R1CS

P = field.MODULUS
#: a packing's bits: sum 2^e over distinct e <= 254 is below 2^255 < 2 r, so the row fixes the
#: bits up to one representation choice (x or x + r: bellpepper's non-strict ``to_bits_le``)
MAX_EXPONENT = 254


@dataclass
class InputReport:
    """What ``audit_inputs`` found. ``problems``: one line per finding (empty: every input
    bound). ``refused``: input -> the rows that refused its changes (first change's rows).
    ``free``: the auxiliary variables no row defines (the prover's choices)."""

    num_constraints: int
    num_public: int
    free: list[int] = dc_field(default_factory=list)
    unexpected_free: list[int] = dc_field(default_factory=list)
    refused: dict[int, list[int]] = dc_field(default_factory=dict)
    cone: dict[int, int] = dc_field(default_factory=dict)       # input -> cone size
    unbound: list[int] = dc_field(default_factory=list)         # inputs (1-based variables)
    dangling: list[int] = dc_field(default_factory=list)        # defined, read by no other row
    unexpected_dangling: list[int] = dc_field(default_factory=list)
    weakened: list[int] = dc_field(default_factory=list)        # inputs an unexpected finding reaches
    trials: dict = dc_field(default_factory=dict, repr=False)   # (input, new) -> (rows, cone)
    problems: list[str] = dc_field(default_factory=list)


def _coef_ints(coeffs: np.ndarray) -> list[int]:
    """An (nnz, 4) Fr vector as Python ints, one object per distinct value."""
    if not len(coeffs):
        return []
    uniq, inv = np.unique(np.ascontiguousarray(coeffs).reshape(-1, 4), axis=0, return_inverse=True)
    vals = field.vec_to_ints(uniq)
    return [vals[i] for i in inv.reshape(-1).tolist()]


def _z_ints(z: np.ndarray) -> list[int]:
    z = np.ascontiguousarray(z, dtype="<u8").reshape(-1, 4)
    out = z[:, 0].tolist()
    for i in np.flatnonzero(z[:, 1:].any(axis=1)).tolist():
        out[i] = field.vec_to_ints(z[i:i + 1])[0]
    return out


def _pow2(q: int) -> int | None:
    """e when q = 2^e (e <= MAX_EXPONENT), -e when q = 2^-e mod P, else None."""
    if q and q & (q - 1) == 0 and q.bit_length() - 1 <= MAX_EXPONENT:
        return q.bit_length() - 1
    r = pow(q, -1, P) if q else 0
    if r and r & (r - 1) == 0 and r.bit_length() - 1 <= MAX_EXPONENT:
        return -(r.bit_length() - 1)
    return None


class InputAudit:
    """The definitions of one circuit on one witness; ``check(i, new)`` tries an input's change."""

    def __init__(self, r1cs: R1CS, z: np.ndarray, *, without: Iterable[int] = ()):
        bad = r1cs.first_unsatisfied(z)
        if bad is not None:
            raise ValueError(f"the witness does not satisfy constraint {bad}")
        self.r1cs = r1cs
        self.n = r1cs.num_variables
        self.m = r1cs.num_constraints
        self.first_aux = 1 + r1cs.num_public
        self.z = _z_ints(z)
        self.dropped = np.zeros(self.m, dtype=bool)
        self.dropped[list(without)] = True
        mats = (r1cs.a, r1cs.b, r1cs.c)
        self.ptr = [m.indptr.tolist() for m in mats]
        self.cols = [m.indices.tolist() for m in mats]
        self.coefs = [_coef_ints(m.coeffs) for m in mats]
        # rows by variable (any of A, B, C), as CSR over variables
        rows = np.concatenate([np.repeat(np.arange(self.m), np.diff(m.indptr)) for m in mats])
        cols = np.concatenate([m.indices for m in mats])
        keep = cols > 0
        rows, cols = rows[keep], cols[keep]
        order = np.lexsort((rows, cols))
        self.var_rows = rows[order]
        self.var_ptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=self.n))])
        # each row's highest variable: the candidate definition rows of that variable
        rowmax = np.full(self.m, -1, dtype=np.int64)
        np.maximum.at(rowmax, rows, cols)
        rowmin = np.full(self.m, self.n, dtype=np.int64)
        np.minimum.at(rowmin, rows, cols)
        self.rowmax = rowmax
        self.single_var_rows = np.flatnonzero((rowmax == rowmin) & ~self.dropped)
        cand = np.flatnonzero((rowmax >= self.first_aux) & ~self.dropped)
        cand = cand[np.argsort(rowmax[cand], kind="stable")]
        self.cand_rows = cand
        self.cand_ptr = np.concatenate([[0], np.cumsum(np.bincount(rowmax[cand], minlength=self.n))])
        self.boolean = self._booleanity()
        self.defn: dict[int, tuple] = {}   # v -> ("s", row) or ("g", row, members, exps, f, k)
        self.extra: dict[int, list[int]] = {}  # definition edges added by ``without``
        self._cones: dict[tuple, np.ndarray] = {}
        self._define_all()
        self._graph()

    def without(self, rows: Iterable[int]) -> "InputAudit":
        """This audit with ``rows`` dropped, derived without a rebuild: the booleanity and the
        definitions that used them are redone (a variable left undefined joins the free set);
        the definition graph keeps its old edges (a cone can only grow: a larger recomputation)."""
        rows = sorted(set(rows))
        new = copy.copy(self)
        new.dropped = self.dropped.copy()
        new.dropped[rows] = True
        gone = set(rows)
        lost = {v for v in self.boolean if set(self.bool_rows[v]) <= gone}
        new.boolean = self.boolean - lost
        new.bool_rows = {v: [r for r in rs if r not in gone] for v, rs in self.bool_rows.items() if v not in lost}
        hit = set()
        for v in lost:
            d = self.defn.get(v)
            if d is not None and d[0] in ("g", "c"):
                hit.update(d[2])
        for r in rows:
            for v in self._defined_by(r):
                hit.add(v)
        new.defn = dict(self.defn)
        new.extra = {k: list(v) for k, v in self.extra.items()}
        new._defmask = None
        new._cones = self._cones  # keyed by the undefined variables they start from
        for v in hit:
            new.defn.pop(v, None)
        for v in sorted(hit):
            if v in new.defn:
                continue
            for r in self.cand_rows[self.cand_ptr[v]:self.cand_ptr[v + 1]].tolist():
                if new.dropped[r]:
                    continue
                d = new._definition(r, v, new.z)
                if d is not None:
                    targets = d[2] if d[0] in ("g", "c") else (v,)
                    for u in targets:
                        new.defn[u] = d
                    a, b, c = new.row(r)
                    for u in (set(a) | set(b) | set(c)) - {0} - set(targets):
                        new.extra.setdefault(u, []).extend(targets)
                    break
        new.free = sorted(set(self.free) | {v for v in hit if v not in new.defn})
        new._parent_dangling = self.dangling()
        new._dangling = None
        touched = set()
        for r in rows:
            a, b, c = self.row(r)
            touched |= (set(a) | set(b) | set(c)) - {0}
        new._touched = touched | hit
        new.changed_defs = set(self.changed_defs) | hit
        return new

    def dangling(self) -> list[int]:
        """Defined variables that no row reads besides their definition and booleanity: a
        computation nothing checks (a Merkle root whose equality is missing)."""
        if getattr(self, "_dangling", None) is not None:
            return self._dangling
        parent = getattr(self, "_parent_dangling", None)
        if parent is not None:  # derived: only the variables of the dropped rows can change
            vs = set(parent) | set(self._touched)
            cands = [(v, self.defn[v]) for v in sorted(vs) if v in self.defn]
        else:
            cands = self.defn.items()
        out = []
        for v, d in cands:
            rows = self.var_rows[self.var_ptr[v]:self.var_ptr[v + 1]]
            rows = rows[~self.dropped[rows]]
            if len(rows) <= 1 + len(self.bool_rows.get(v, ())) and \
                    all(r == d[1] or r in self.bool_rows.get(v, ()) for r in rows.tolist()):
                out.append(v)
        self._dangling = sorted(out)
        return self._dangling

    def _defined_by(self, r: int) -> list[int]:
        """The variables row r defines (its highest variable, or its packed group)."""
        v = int(self.rowmax[r])
        d = self.defn.get(v)
        if d is None or d[1] != r:
            return []
        return list(d[2]) if d[0] in ("g", "c") else [v]

    # -- rows ------------------------------------------------------------------------------------
    def row(self, r: int) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        out = []
        for w in range(3):
            lo, hi = self.ptr[w][r], self.ptr[w][r + 1]
            out.append(dict(zip(self.cols[w][lo:hi], self.coefs[w][lo:hi])))
        return tuple(out)

    def describe(self, r: int) -> str:
        names = self.r1cs.names
        name = names[r] if names and r < len(names) else None
        return f"constraint {r}" + (f" ({name})" if name else "")

    def _booleanity(self) -> set[int]:
        out = set()
        self.bool_rows: dict[int, list[int]] = {}
        for r in self.single_var_rows.tolist():
            a, b, c = self.row(r)
            v = int(self.rowmax[r])
            a0, a1, b0, b1 = a.get(0, 0), a.get(v, 0), b.get(0, 0), b.get(v, 0)
            c0, c1 = c.get(0, 0), c.get(v, 0)
            if a1 * b1 % P and (a0 * b0 - c0) % P == 0 and ((a0 + a1) * (b0 + b1) - c0 - c1) % P == 0:
                out.add(v)
                self.bool_rows.setdefault(v, []).append(r)
        return out

    # -- definitions -------------------------------------------------------------------------------
    def _define_all(self) -> None:
        z = self.z
        for v in range(self.first_aux, self.n):
            if v in self.defn:
                continue
            for r in self.cand_rows[self.cand_ptr[v]:self.cand_ptr[v + 1]].tolist():
                d = self._definition(r, v, z)
                if d is not None:
                    for u in (d[2] if d[0] in ("g", "c") else (v,)):
                        self.defn[u] = d
                    break
        # a variable used by a row numbered before its own (bellpepper's maj: the result, then
        # the product it is computed from): defined once every other variable of a row is
        self._fixpoint([v for v in range(self.first_aux, self.n) if v not in self.defn])
        self.free = [v for v in range(self.first_aux, self.n) if v not in self.defn]
        self.changed_defs: set[int] = set()

    def _fixpoint(self, todo: list[int]) -> list[int]:
        """Single definitions of ``todo``'s variables by rows whose other variables are all
        defined (or inputs); repeated while one is found. Returns the newly defined."""
        z, found = self.z, []
        used = {d[1] for d in self.defn.values()}  # a row defines one variable (or one group)
        changed = True
        while changed and todo:
            changed, left = False, []
            for v in todo:
                d = None
                for r in self.rows_of([v]).tolist():
                    if r in used:
                        continue
                    a, b, c = self.row(r)
                    others = (set(a) | set(b) | set(c)) - {0, v}
                    if all(k < self.first_aux or k in self.defn for k in others):
                        d = self._single(r, v, a, b, c, z)
                        if d is not None:
                            break
                if d is None:
                    left.append(v)
                else:
                    self.defn[v] = d
                    used.add(d[1])
                    found.append(v)
                    changed = True
            todo = left
        return found

    def _definition(self, r: int, v: int, z: list[int]) -> tuple | None:
        a, b, c = self.row(r)
        group = self._packing(r, a, b, c, z)
        if group is not None:
            return group
        return self._single(r, v, a, b, c, z)

    @staticmethod
    def _single(r: int, v: int, a: dict, b: dict, c: dict, z: list[int]) -> tuple | None:
        a1, b1, c1 = a.get(v, 0), b.get(v, 0), c.get(v, 0)
        if not a1 * b1 % P:
            a0 = sum(co * z[k] for k, co in a.items() if k != v)
            b0 = sum(co * z[k] for k, co in b.items() if k != v)
            if (a1 * b0 + a0 * b1 - c1) % P:
                return ("s", r)
        return None

    def _packing(self, r: int, a: dict, b: dict, c: dict, z: list[int]) -> tuple | None:
        """A linear row whose undefined variables are bound bits, powers of two apart."""
        if set(b) <= {0}:
            lin = {k: co * b.get(0, 0) % P for k, co in a.items()}
        elif set(a) <= {0}:
            lin = {k: co * a.get(0, 0) % P for k, co in b.items()}
        else:
            return None
        for k, co in c.items():
            lin[k] = (lin.get(k, 0) - co) % P
        group = sorted(k for k, co in lin.items() if k >= self.first_aux and co and k not in self.defn)
        if len(group) < 2:
            return None
        if max((k for k, co in lin.items() if co and k not in group), default=0) > group[0] \
                or not all(k in self.boolean for k in group):
            return self._carries(r, lin, group, z)
        ref = lin[group[0]]
        rinv = pow(ref, -1, P)
        exps = [_pow2(lin[k] * rinv % P) for k in group]
        if None in exps:
            return None
        low = min(exps)
        exps = [e - low for e in exps]
        if len(set(exps)) != len(exps) or max(exps) > MAX_EXPONENT:
            return None
        f = ref * pow(2, low, P) % P  # lin[k] = f 2^e_k
        rest = sum(co * z[k] for k, co in lin.items() if k not in group) % P
        t = -rest * pow(f, -1, P) % P
        held = sum(z[k] << e for k, e in zip(group, exps))
        return ("g", r, tuple(group), tuple(exps), f, (held - t) // P)  # the representation: t + k r

    def _carries(self, r: int, lin: dict[int, int], group: list[int], z: list[int]) -> tuple | None:
        """A row of bits that is an integer identity (a MultiEq of additions: operands' bits and
        results' bits with small integer coefficients, each side's sum below the modulus; a
        result's coefficient is +-2^e). Read modulo 2^(e+1) it fixes the result bit at exponent
        e from the terms whose coefficients have a bit at or below e (its addition's operands,
        the lower results), not from the later additions that read it."""
        half = P // 2
        coef = {k: (co if co <= half else co - P) for k, co in lin.items() if co}
        const = coef.pop(0, 0)
        if any(abs(c) >> MAX_EXPONENT for c in coef.values()):
            return None
        if sum(c for c in coef.values() if c > 0) + max(const, 0) >= P \
                or sum(-c for c in coef.values() if c < 0) + max(-const, 0) >= P:
            return None  # the row could wrap: not an integer identity
        # members: undefined bound bits, one per exponent (the lowest set bit of its coefficient:
        # a result read again as a later addition's operand has 2^a - 2^e); of two undefined
        # bits at one exponent the later allocated is the result, the other a free operand
        mexp: dict[int, int] = {}
        by_exp: dict[int, int] = {}
        for k in sorted(group):
            c = coef.get(k, 0)
            if not c or k not in self.boolean:
                continue
            e = (c & -c).bit_length() - 1
            if e in by_exp:
                del mexp[by_exp[e]]
            by_exp[e] = k
            mexp[k] = e
        top = max(coef)
        if top not in mexp:
            return None
        if len(mexp) < 2 or any(z[k] not in (0, 1) for k in coef):
            return None
        # the terms by the lowest set bit of their coefficients: a member's dependencies are a prefix
        terms = tuple(sorted(((k, c, (c & -c).bit_length() - 1) for k, c in coef.items()), key=lambda t: t[2]))
        return ("c", r, tuple(sorted(mexp)), mexp, terms, const)

    @staticmethod
    def _carry_value(d: tuple, v: int, get, memo: dict) -> int | None:
        """Member v of a carry row from the terms at or below its exponent. A row's members come
        in order of exponent (the definition graph chains them), so the prefix sum is kept in
        ``memo`` and extended; None: no bit fits."""
        mexp, terms, const = d[3], d[4], d[5]
        ev = mexp[v]
        at, acc = memo.get(d[1], (0, const))
        cv = 0
        while at < len(terms) and terms[at][2] <= ev:
            k, c, _ = terms[at]
            if k == v:
                cv = c
            else:
                acc += c * get(k)
            at += 1
        low = acc & ((2 << ev) - 1)
        if low & ((1 << ev) - 1):
            return None
        bit = ((-low) >> ev) & 1
        memo[d[1]] = (at, acc + cv * bit)
        return bit

    def _graph(self) -> None:
        """users: u -> the variables whose definition row holds u (CSR)."""
        src, dst = [], []
        seen = set()
        for v, d in self.defn.items():
            if d[0] == "c":
                if d[1] in seen:
                    continue
                seen.add(d[1])
                # each term to the first member at or above its exponent, the members chained
                members = sorted(d[2], key=lambda m: d[3][m])
                exps = [d[3][m] for m in members]
                for k, _, e in d[4]:
                    at = bisect.bisect_left(exps, e)
                    if at < len(members) and members[at] == k:
                        at += 1
                    if at < len(members):
                        src.append(k)
                        dst.append(members[at])
                continue
            if d[0] == "g":
                if d[1] in seen:
                    continue
                seen.add(d[1])
                targets = d[2]
            else:
                targets = (v,)
            a, b, c = self.row(d[1])
            for u in set(a) | set(b) | set(c):
                if u and u not in targets:
                    src.extend([u] * len(targets))
                    dst.extend(targets)
        src = np.array(src, dtype=np.int64)
        dst = np.array(dst, dtype=np.int64)
        order = np.argsort(src, kind="stable")
        self.users = dst[order]
        self.users_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=self.n))])
        self._order(src, dst)

    def _order(self, src: np.ndarray, dst: np.ndarray) -> None:
        """``pos``: each variable's place in an order where every definition comes after what it
        reads (Kahn's, level by level). A definition on a cycle has no place: it is dropped (its
        variables join the free set)."""
        defined = np.zeros(self.n, dtype=bool)
        defined[list(self.defn)] = True
        keep = defined[src]
        s2, d2 = src[keep], dst[keep]
        o = np.argsort(s2, kind="stable")
        s2, d2 = s2[o], d2[o]
        ptr = np.concatenate([[0], np.cumsum(np.bincount(s2, minlength=self.n))])
        indeg = np.bincount(d2, minlength=self.n)
        pos = np.full(self.n, -1, dtype=np.int64)
        front = np.flatnonzero(~defined)
        pos[front] = 0
        front = np.flatnonzero(defined & (indeg == 0))
        level = 1
        while len(front):
            pos[front] = level
            level += 1
            lo, hi = ptr[front], ptr[front + 1]
            counts = hi - lo
            idx = np.repeat(lo - np.cumsum(np.concatenate([[0], counts[:-1]])), counts) + np.arange(counts.sum())
            nxt = d2[idx]
            np.subtract.at(indeg, nxt, 1)
            nxt = np.unique(nxt)
            front = nxt[indeg[nxt] == 0]
        cyclic = np.flatnonzero(defined & (pos < 0)).tolist()
        for v in cyclic:
            self.defn.pop(v, None)
        if cyclic:
            self.free = sorted(set(self.free) | set(cyclic))
            pos[cyclic] = 0
        self.pos = pos

    def cone(self, starts: Sequence[int]) -> np.ndarray:
        """The variables whose definitions reach ``starts`` (sorted, starts included)."""
        seen = np.zeros(self.n, dtype=bool)
        front = np.unique(np.asarray(starts, dtype=np.int64))
        seen[front] = True
        defined = getattr(self, "_defmask", None)
        if defined is None or len(defined) != self.n:
            defined = self._defmask = np.zeros(self.n, dtype=bool)
            defined[list(self.defn)] = True
        first = True
        while len(front):
            if not first:  # an undefined variable keeps its value: nothing flows through it
                front = front[defined[front]]
            first = False
            lo, hi = self.users_ptr[front], self.users_ptr[front + 1]
            counts = hi - lo
            if not counts.sum() and not self.extra:
                break
            idx = np.repeat(lo - np.cumsum(np.concatenate([[0], counts[:-1]])), counts) + np.arange(counts.sum())
            nxt = self.users[idx]
            if self.extra:
                more = [t for f in front.tolist() if f in self.extra for t in self.extra[f]]
                nxt = np.concatenate([nxt, np.array(more, dtype=np.int64)])
            nxt = np.unique(nxt)
            front = nxt[~seen[nxt]]
            seen[front] = True
        return np.flatnonzero(seen)

    def rows_of(self, vs: np.ndarray) -> np.ndarray:
        vs = np.asarray(vs, dtype=np.int64)
        lo, hi = self.var_ptr[vs], self.var_ptr[vs + 1]
        counts = hi - lo
        if not counts.sum():
            return np.zeros(0, dtype=np.int64)
        idx = np.repeat(lo - np.cumsum(np.concatenate([[0], counts[:-1]])), counts) + np.arange(counts.sum())
        rows = np.unique(self.var_rows[idx])
        return rows[~self.dropped[rows]]

    # -- one change ------------------------------------------------------------------------------
    def check(self, x: int, new: int) -> tuple[list[int], np.ndarray]:
        """Input (or any variable) x set to ``new``, its cone recomputed in order: (the rows
        that fail, the cone). [] : the change satisfies every constraint."""
        z = self.z
        vals = {x: new % P}
        get = lambda k: vals[k] if k in vals else z[k]  # noqa: E731
        failing: set[int] = set()
        cone = self.cone([x])
        done_groups, carry_rows, carry_memo = set(), set(), {}
        for v in cone[np.argsort(self.pos[cone], kind="stable")].tolist():
            if v == x or v not in self.defn:
                continue
            d = self.defn[v]
            r = d[1]
            if d[0] == "s":
                a, b, c = self.row(r)
                a1, b1, c1 = a.get(v, 0), b.get(v, 0), c.get(v, 0)
                a0 = sum(co * get(k) for k, co in a.items() if k != v)
                b0 = sum(co * get(k) for k, co in b.items() if k != v)
                c0 = sum(co * get(k) for k, co in c.items() if k != v)
                k1 = (a1 * b0 + a0 * b1 - c1) % P
                k0 = (a0 * b0 - c0) % P
                if k1:
                    val = -k0 * pow(k1, -1, P) % P
                    if val != z[v]:
                        vals[v] = val
                elif k0:
                    failing.add(r)  # no value of v satisfies its definition
                else:
                    return [], cone  # v is left free by x's change: unbound
                continue
            if d[0] == "c":
                carry_rows.add(r)
                val = self._carry_value(d, v, get, carry_memo)
                if val is None:
                    failing.add(r)
                elif val != z[v]:
                    vals[v] = val
                continue
            if r in done_groups:
                continue
            done_groups.add(r)
            a, b, c = self.row(r)  # once a group: a packing's row is read for all its bits
            _, _, group, exps, f, rep = d
            gs = set(group)
            if set(b) <= {0}:
                lin = {k: co * b.get(0, 0) % P for k, co in a.items()}
            else:
                lin = {k: co * a.get(0, 0) % P for k, co in b.items()}
            for k, co in c.items():
                lin[k] = (lin.get(k, 0) - co) % P
            rest = sum(co * get(k) for k, co in lin.items() if k not in gs) % P
            t = -rest * pow(f, -1, P) % P + rep * P  # the witness's representation kept
            mask = sum(1 << e for e in exps)
            if t & ~mask:
                failing.add(r)  # the bits cannot hold the new value
                continue
            for k, e in zip(group, exps):
                bit = (t >> e) & 1
                if bit != z[k]:
                    vals[k] = bit
        for r in carry_rows:  # the integer identity holds for bits only
            a, b, c = self.row(r)
            if any(get(k) not in (0, 1) for k in (set(a) | set(b) | set(c)) - {0}):
                return [], cone
        self.last_values = vals  # the recomputed values (tests compare them with the real function)
        changed = np.array(sorted(vals), dtype=np.int64)
        for r in self.rows_of(changed).tolist():
            if r in failing:
                continue
            a, b, c = self.row(r)
            av = sum(co * get(k) for k, co in a.items())
            bv = sum(co * get(k) for k, co in b.items())
            cv = sum(co * get(k) for k, co in c.items())
            if (av * bv - cv) % P:
                failing.add(r)
        return sorted(failing), cone


def changes_of(x: int) -> list[int]:
    """The new values an input is tried with: x + 1; for an index (below 2^64) also its lowest
    bit flipped and its highest set bit cleared."""
    out = [(x + 1) % P]
    if x < 1 << 64:
        out.append(x ^ 1)
        if x > 1:
            out.append(x & ~(1 << (x.bit_length() - 1)))
    return list(dict.fromkeys(v for v in out if v != x))


def audit_inputs(r1cs: R1CS, z: np.ndarray, *, inputs: Iterable[int] | None = None,
                 expected_free: Iterable[int] | None = None,
                 expected_dangling: Iterable[int] | None = None, without: Iterable[int] = (),
                 state: InputAudit | None = None, base: InputReport | None = None) -> InputReport:
    """The argument of the module docstring for each public input (1-based variable indices;
    default all). ``expected_free``: the free variables the circuit means to have; any other is
    a problem, and so is an input refused only by rows it reaches. ``state``: a built
    ``InputAudit`` (``without`` then derives from it); ``base``: the report of ``state``'s own
    audit, whose trials are reused where a dropped row cannot change them (the removal tests)."""
    A = state or InputAudit(r1cs, z)
    if without:
        A = A.without(without)
    rep = InputReport(r1cs.num_constraints, r1cs.num_public, free=list(A.free))
    rep.dangling = A.dangling()
    if expected_dangling is not None:
        exp = set(expected_dangling)
        rep.unexpected_dangling = [v for v in rep.dangling if v not in exp]
    inputs = list(range(1, 1 + r1cs.num_public)) if inputs is None else list(inputs)
    tainted = np.zeros(A.m, dtype=bool)
    if expected_free is not None:
        exp = set(expected_free)
        rep.unexpected_free = [v for v in A.free if v not in exp]
        for v in rep.unexpected_free[:10]:
            rep.problems.append(f"variable {v} is defined by no constraint (appears in "
                                f"{_list(A, A.rows_of([v]).tolist())}): a free choice the circuit does not mean")
        if len(rep.unexpected_free) > 10:
            rep.problems.append(f"... and {len(rep.unexpected_free) - 10} more undefined variables")
        if rep.unexpected_free:
            key = tuple(rep.unexpected_free)
            cone = A._cones.get(key)
            if cone is None:
                cone = A._cones[key] = A.cone(rep.unexpected_free)
            tainted[A.rows_of(cone)] = True
    changed = np.array(sorted(A.changed_defs | set(A.extra)), dtype=np.int64)
    for i in inputs:
        x = A.z[i]
        for new in changes_of(x):
            old = base.trials.get((i, new)) if base is not None else None
            if old is not None and not (len(changed) and np.isin(changed, old[1], assume_unique=True).any()):
                rows = [r for r in old[0] if not A.dropped[r]]
                cone = old[1]
            else:
                rows, cone = A.check(i, new)
            rep.trials[(i, new)] = (rows, cone)
            rep.cone[i] = max(rep.cone.get(i, 0), len(cone))
            if not rows:
                rep.unbound.append(i)
                rep.problems.append(f"public input {i} can be changed from {_short(x)} to {_short(new)} "
                                    f"with the {len(cone) - 1} variables that follow it recomputed, and every constraint holds")
                break
            if tainted[rows].all():
                rep.unbound.append(i)
                rep.problems.append(f"public input {i} changed to {_short(new)} is refused only by "
                                    f"{_list(A, rows)}, which undefined variables reach")
                break
            rep.refused.setdefault(i, rows)
    # what the unexpected findings reach: inputs whose refusing rows an undefined variable
    # reaches, inputs whose change flows into a variable nothing checks
    dang = np.array(rep.unexpected_dangling, dtype=np.int64)
    for (i, _), (rows, cone) in rep.trials.items():
        if i in rep.weakened:
            continue
        if (rows and tainted[rows].any()) or (len(dang) and np.isin(dang, cone).any()):
            rep.weakened.append(i)
    rep.weakened.sort()
    for v in rep.unexpected_dangling[:10]:
        rep.problems.append(f"variable {v} is computed by {_list(A, [A.defn[v][1]])} and checked by no "
                            f"constraint{_reach(rep, v)}")
    if len(rep.unexpected_dangling) > 10:
        rep.problems.append(f"... and {len(rep.unexpected_dangling) - 10} more variables checked by no constraint")
    if rep.unexpected_free and rep.weakened:
        rep.problems.append("undefined or unchecked variables reach the binding of public input(s) "
                            + ", ".join(map(str, rep.weakened)))
    return rep


def _reach(rep: InputReport, v: int) -> str:
    ins = sorted({i for (i, _), (_, cone) in rep.trials.items() if np.isin(v, cone)})
    return f" (it follows public input(s) {', '.join(map(str, ins))})" if ins else ""


def assert_inputs_bound(r1cs: R1CS, z: np.ndarray, **kw) -> InputReport:
    rep = audit_inputs(r1cs, z, **kw)
    if rep.problems:
        raise AssertionError("public inputs not bound:\n" + "\n".join(rep.problems[:20]))
    return rep


def _short(x: int) -> str:
    return hex(x) if x < 1 << 64 else f"{hex(x)[:12]}..."


def _list(A: InputAudit, rows: list[int], n: int = 3) -> str:
    if not rows:
        return "no constraint"
    s = ", ".join(A.describe(r) for r in rows[:n])
    return s + (f" and {len(rows) - n} more" if len(rows) > n else "")


__all__ = ["InputAudit", "InputReport", "audit_inputs", "assert_inputs_bound", "changes_of"]
