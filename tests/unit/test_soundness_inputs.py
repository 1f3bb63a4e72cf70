"""Every public input bound, for whole circuits (``synthesis.input_audit``; issue 35): on an
honest witness each input's change, with the witness recomputed after it, is refused; and
removing any one header or input constraint fails the audit, naming the input.

CI: porep-lite's test partition (9k constraints, every input row and a sample of the header's
rows removed) and Filecoin's PoRep header (571 constraints, every row removed: the known
survivor of issue 35, the comm_r tie, among them). ``ZKHIVE_LONG_AUDIT=1``: every header row of
porep-lite, and the whole filecoin-2k partition (2.69 M constraints) with each of its header
and input constraints removed (docs/testing.md)."""
from __future__ import annotations

import gc
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from synthesis.input_audit import InputAudit, audit_inputs, changes_of

LONG = os.environ.get("ZKHIVE_LONG_AUDIT") == "1"


def _inputs_of(A: InputAudit, r: int) -> set[int]:
    a, b, c = A.row(r)
    return {k for k in (set(a) | set(b) | set(c)) if 1 <= k < A.first_aux}


def _removed(r1cs, z, A, base, r, **kw):
    return audit_inputs(r1cs, z, state=A, base=base, without=[r], expected_free=A.free,
                        expected_dangling=A.dangling(), **kw)


def audit_procs() -> int:
    """The processes the removal loops use: $ZKHIVE_AUDIT_PROCS, default every CPU."""
    v = os.environ.get("ZKHIVE_AUDIT_PROCS", "").strip()
    if not v:
        return os.cpu_count() or 1
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"ZKHIVE_AUDIT_PROCS={v!r}: a number of processes >= 1")
    return int(v)


#: (verdict, its leading arguments): set before the fork, the children inherit the built audit
_FORKED: tuple | None = None


def _one_row(r: int) -> tuple[int, str | None, float]:
    """Row r's verdict (an AssertionError's text, or None) and its CPU seconds."""
    verdict, args = _FORKED
    t0 = time.process_time()
    try:
        verdict(*args, r)
        msg = None
    except AssertionError as e:
        msg = str(e) or "assertion failed"
    except Exception as e:  # noqa: BLE001 - a crash in one row is reported with the others
        msg = f"{type(e).__name__}: {e}"
    return r, msg, time.process_time() - t0


def each_row(verdict, args: tuple, rows, procs: int | None = None) -> tuple[list[tuple[int, str]], list[float]]:
    """``verdict(*args, r)`` for every r in rows, over ``procs`` forked processes (the state in
    args built once, before the fork, shared copy-on-write): (every failing row with its message,
    in row order; each row's CPU seconds). One process: in this one, no fork."""
    global _FORKED
    rows = list(rows)
    procs = min(procs or audit_procs(), max(1, len(rows)))
    _FORKED = (verdict, args)
    try:
        if procs == 1:
            out = [_one_row(r) for r in rows]
        else:
            gc.collect()
            gc.freeze()  # the children's collections leave the inherited objects' pages shared
            try:  # a worker that dies (killed for memory) fails the call: BrokenProcessPool
                with ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("fork")) as pool:
                    out = list(pool.map(_one_row, rows))
            finally:
                gc.unfreeze()
    finally:
        _FORKED = None
    out.sort()
    return [(r, m) for r, m, _ in out if m is not None], [t for _, _, t in out]


def _report(failures, n: int, describe=str) -> str:
    return f"{len(failures)} of {n} removed rows failed:\n" + "\n".join(f"{describe(r)}: {m}" for r, m in failures)


# --- porep-lite --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lite():
    from synthesis.porep import PorepLite, c1_document, generate
    from tests.unit.test_porep import CHALLENGE_SEED, SEED, SMALL, direct_partition

    circuit = PorepLite(SMALL)
    c1 = circuit.parse_c1(c1_document(generate(SMALL, SEED), CHALLENGE_SEED))
    r1cs, z = direct_partition(SMALL, c1, 0)
    A = InputAudit(r1cs, z)
    return r1cs, z, A, audit_inputs(r1cs, z, state=A)


def test_porep_lite_every_public_input_is_bound(lite):
    r1cs, z, A, rep = lite
    assert not rep.problems and not rep.unbound and not rep.dangling
    assert sorted(rep.refused) == list(range(1, 1 + r1cs.num_public))
    names = lambda i: {r1cs.names[r] for r in rep.refused[i]}  # noqa: E731
    assert names(3) == {"comm_r = H(comm_c, comm_r_last)"}            # comm_r: the header's tie
    assert names(2) == {"TreeD root = comm_d"}                        # comm_d: both challenges
    # the free set: the prover's siblings and columns, nothing inside a hash
    assert len(A.free) == 72 and all(A.rows_of([v]).size for v in A.free)
    # an index moves the Merkle paths: the challenge's TreeD root refuses it
    assert "TreeD root = comm_d" in {r1cs.names[r] for r in rep.trials[(4, changes_of(A.z[4])[0])][0]}


def _lite_row_verdict(r1cs, z, A, base, r):
    rep = _removed(r1cs, z, A, base, r)
    want = _inputs_of(A, r) or {3}  # a header row without an input: comm_r's hash
    assert rep.problems, f"constraint {r} ({r1cs.names[r]}) removed and the audit passed"
    if want & set(rep.unbound) or want & set(rep.weakened):
        return
    # comm_d stays bound by the other challenge's TreeD root: this challenge's computed root
    # is left unchecked, and the audit names it and the index it follows
    assert r1cs.names[r] == "TreeD root = comm_d" and rep.unexpected_dangling, (r, rep.problems)
    assert "checked by no constraint (it follows public input(s)" in rep.problems[0]


def test_porep_lite_removing_an_input_or_header_constraint_fails_the_audit(lite):
    """Each row that holds a public input, and the header's rows (comm_r's hash; every one under
    ZKHIVE_LONG_AUDIT=1, every 30th in CI), removed from the R1CS: the audit fails, naming the
    input as unbound, or as reached by the variable the removal left undefined or unchecked."""
    r1cs, z, A, base = lite
    tie = r1cs.names.index("comm_r = H(comm_c, comm_r_last)")
    header = range(tie + 1) if LONG else range(0, tie + 1, 30)
    rows = sorted(set(A.rows_of(np.arange(1, A.first_aux)).tolist()) | set(header) | {tie})
    assert len(rows) >= 30
    failures, _ = each_row(_lite_row_verdict, (r1cs, z, A, base), rows)
    assert not failures, _report(failures, len(rows), lambda r: f"constraint {r} ({r1cs.names[r]})")
    # the tie itself: comm_r unbound, changed with its witness copy and nothing else failing
    rep = _removed(r1cs, z, A, base, tie)
    assert 3 in rep.unbound and any(p.startswith("public input 3 can be changed") for p in rep.problems)
    assert any("checked by no constraint" in p for p in rep.problems)  # and H(comm_c, comm_r_last) unread


# --- Filecoin's PoRep header ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def header():
    """stacked.header_gadget alone: replica_id, comm_d, comm_r inputs; comm_r = H(comm_c,
    comm_r_last) with comm_c and comm_r_last its two free variables."""
    from synthesis import field
    from synthesis.bellpepper.check import assignments
    from synthesis.builder import ConstraintSystem
    from synthesis.filecoin import stacked
    from synthesis.bellpepper.core import Synth

    vals = {k: field.vec_random(1) for k in ("replica_id", "comm_d", "comm_r", "comm_r_last", "comm_c")}

    def build():
        s = Synth(cs=ConstraintSystem(with_values=False), batch=1)
        _, _, h = stacked.header_gadget(s, vals)
        return s, h

    s, h = build()
    vals["comm_r"] = np.ascontiguousarray(h.val)
    s, _ = build()
    r1cs = s.cs.to_r1cs()
    z = np.ascontiguousarray(assignments(s)[0])
    A = InputAudit(r1cs, z)
    return r1cs, z, A, audit_inputs(r1cs, z, state=A)


def test_filecoin_header_binds_comm_r(header):
    r1cs, z, A, rep = header
    assert r1cs.num_constraints == 571 and r1cs.num_public == 3
    assert A.free == [262, 263]                       # comm_r_last, comm_c
    assert r1cs.names[rep.refused[3][0]].endswith("enforce comm_r = H(comm_c || comm_r_last)")
    # the header alone does not bind replica_id and comm_d (the challenges do): the audit says so
    assert rep.unbound == [1, 2]
    assert "with the 256 variables that follow it recomputed" in rep.problems[0]  # rid and its 255 bits


def test_filecoin_header_each_constraint_of_comm_r_removed_names_comm_r(header):
    """Every header row removed: comm_r's inputize, its Poseidon H(comm_c, comm_r_last) and the
    tie name comm_r (unbound, or reached by the variable left undefined); the tie removed is
    issue 35's survivor: any comm_r then satisfies."""
    r1cs, z, A, base = header
    named = []
    for r in range(r1cs.num_constraints):
        rep = _removed(r1cs, z, A, base, r, inputs=[3])
        if 3 in rep.unbound or 3 in rep.weakened:
            named.append(r)
            assert rep.problems
        else:
            assert not ({3} & _inputs_of(A, r)), r  # a row with comm_r in it must name it
    tie = next(r for r in range(r1cs.num_constraints) if r1cs.names[r].endswith("enforce comm_r = H(comm_c || comm_r_last)"))
    rep = _removed(r1cs, z, A, base, tie, inputs=[3])
    assert rep.unbound == [3] and any(p.startswith("public input 3 can be changed") for p in rep.problems)
    # the rows that bind comm_r: its inputize, the tie and the whole Poseidon hash after the
    # replica id's 257 rows (inputize, 255 booleanity, the packing) and comm_d's inputize
    assert named[-1] == tie and len(named) == r1cs.num_constraints - 258, (len(named), named[:5])


# --- filecoin-2k, whole -----------------------------------------------------------------------------

def filecoin_2k_audit():
    """filecoin-2k's partition 0 of a sealed sample sector, its audit state and base report, the
    rows the long test removes (every header row, every row holding an input)."""
    from synthesis.circuits import get_circuit
    from synthesis.filecoin.samples import sample_c1

    circuit = get_circuit("filecoin-2k")
    c1 = circuit.parse_c1(sample_c1(circuit.prm, 3))
    z = circuit.synthesize(c1, 0)
    r1cs = circuit.r1cs()
    A = InputAudit(r1cs, z)
    base = audit_inputs(r1cs, z, state=A)
    head = circuit._rows["header"]
    rows = sorted(set(range(head)) | set(A.rows_of(np.arange(1, A.first_aux)).tolist()))
    return circuit, r1cs, z, A, base, rows


def removed_row_verdict(describe, r1cs, z, A, base, r):
    """Row r removed: the audit fails, and names (unbound or weakened) one of the inputs the row
    holds. Each input's verdict (unbound, weakened) depends on its own trials only, and an
    undefined or unchecked variable is a problem whatever the inputs are: so the audit of the
    row's own inputs (none for a row inside a hash) decides the verdict when it finds a problem,
    and the audit of every input runs only when it finds none. The same verdict as the whole
    audit's (``test_a_rows_own_inputs_decide_its_verdict_as_every_input_does``), without
    recomputing filecoin-2k's replica id cone (1.55 M variables, 13-30 s) for each removed row
    of the replica id's bits and of comm_r's hash, which change a definition inside it."""
    want = _inputs_of(A, r)
    rep = _removed(r1cs, z, A, base, r, inputs=sorted(want))
    if not rep.problems:
        rep = _removed(r1cs, z, A, base, r)
    assert rep.problems, f"{describe(r)} removed and the audit passed"
    if want:
        assert want & (set(rep.unbound) | set(rep.weakened)), (r, rep.problems[:3])


def filecoin_2k_row_verdict(circuit, r1cs, z, A, base, r):
    removed_row_verdict(circuit.describe_row, r1cs, z, A, base, r)


def test_a_rows_own_inputs_decide_its_verdict_as_every_input_does(header):
    """Filecoin's PoRep header, each of its 571 rows removed: the audit of the row's own inputs
    has the same unbound and weakened verdict on them as the audit of every input, and when it
    finds a problem the whole audit does too (the argument of ``removed_row_verdict``)."""
    r1cs, z, A, base = header
    for r in range(r1cs.num_constraints):
        want = sorted(_inputs_of(A, r))
        own = _removed(r1cs, z, A, base, r, inputs=want)
        whole = _removed(r1cs, z, A, base, r)
        assert not own.problems or whole.problems, r
        for i in want:
            assert (i in own.unbound, i in own.weakened) == (i in whole.unbound, i in whole.weakened), (r, i)
        removed_row_verdict(str, r1cs, z, A, base, r)


def test_a_removed_row_without_inputs_that_leaves_nothing_unchecked_is_decided_by_every_input():
    """v = x checked by v = 5 and read by v * 0 = 0: removing v = 5 (no input in it) leaves no
    variable undefined or unchecked, so the audit of the row's own inputs (none) finds nothing;
    the verdict falls back to every input's audit, where x is unbound. With v = 5 kept and
    v * 0 = 0 removed instead, the audit of every input finds nothing: the verdict fails."""
    x, v = 1, 2
    rows = [({v: 1}, {0: 1}, {x: 1}, "v = x"), ({v: 1}, {0: 1}, {0: 5}, "v = 5"), ({v: 1}, {}, {}, "v * 0 = 0")]
    r1cs = _crafted(rows, 1, 1)
    z = _z([1, 5, 5])
    A = InputAudit(r1cs, z)
    base = audit_inputs(r1cs, z, state=A)
    assert not base.problems and _removed(r1cs, z, A, base, 1, inputs=[]).problems == []
    assert _removed(r1cs, z, A, base, 1).unbound == [1]
    removed_row_verdict(str, r1cs, z, A, base, 1)
    with pytest.raises(AssertionError, match="^2 removed and the audit passed"):
        removed_row_verdict(str, r1cs, z, A, base, 2)


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)  # the whole partition's audit alone took 20 min on 2 loaded cores
@pytest.mark.skipif(not LONG, reason="the filecoin-2k input audit takes many minutes: ZKHIVE_LONG_AUDIT=1 runs it")
def test_filecoin_2k_every_input_bound_and_each_header_or_input_constraint_removed_is_named(tmp_path_factory):
    """The removal loop runs over $ZKHIVE_AUDIT_PROCS forked processes (default: every CPU);
    every failing row is reported, not only the first."""
    os.environ.setdefault("ZKHIVE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    t0 = time.monotonic()
    circuit, r1cs, z, A, base, rows = filecoin_2k_audit()
    assert not base.problems, base.problems
    tie = circuit._rows["header"] - 1
    assert [circuit.describe_row(r) for r in base.refused[3]] == [circuit.describe_row(tie)]
    t1 = time.monotonic()
    procs = audit_procs()
    failures, cpu = each_row(filecoin_2k_row_verdict, (circuit, r1cs, z, A, base), rows, procs)
    print(f"filecoin-2k input audit: base {t1 - t0:.0f} s; {len(rows)} rows removed over {procs} "
          f"processes in {time.monotonic() - t1:.0f} s (CPU per row: mean {sum(cpu) / len(cpu):.2f} s, "
          f"max {max(cpu):.2f} s); {len(failures)} failed")
    assert not failures, _report(failures, len(rows), circuit.describe_row)


def test_a_sha256_recomputation_follows_a_flipped_message_bit():
    """The definitions hold a whole SHA-256 (two compressions, MultiEq carries, maj computed
    after its result is allocated): only the 512 message bits are free, and a message bit
    flipped with its cone recomputed satisfies every row (nothing here checks the digest) with
    the digest of the flipped message, bit for bit as hashlib computes it: a carry or an XOR
    recomputed wrongly would fail a row or change the digest."""
    import hashlib

    from synthesis.bellpepper import check as ck, sha256 as sh
    from synthesis.builder import ConstraintSystem
    from synthesis.bellpepper.core import Synth
    from tests.unit.test_bellpepper_sha256 import alloc_message

    data = np.random.default_rng(35).integers(0, 256, (1, 64), dtype=np.uint8)
    s = Synth(cs=ConstraintSystem(with_values=False), batch=1)
    out = sh.sha256(s, alloc_message(s, data))
    r1cs = s.cs.to_r1cs()
    A = InputAudit(r1cs, np.ascontiguousarray(ck.assignments(s)[0]))
    assert A.free == list(range(1, 513))
    assert sum(1 for d in A.defn.values() if d[0] == "c") > 10_000  # the additions' result bits
    rows, cone = A.check(77, 1 - A.z[77])                              # message bit 76
    assert rows == [] and len(cone) > 40_000
    flipped = bytearray(data[0].tobytes())
    flipped[76 // 8] ^= 0x80 >> (76 % 8)
    want = np.unpackbits(np.frombuffer(hashlib.sha256(bytes(flipped)).digest(), np.uint8)).tolist()
    got = []
    for b in out:
        if b.const is not None:
            got.append(b.const)
            continue
        v = A.last_values.get(-b.bit.key, A.z[-b.bit.key])
        got.append(1 - v if b.neg else v)
    assert got == want and all(v in (0, 1) for v in A.last_values.values())


def _crafted(rows, num_public, num_aux):
    from synthesis.r1cs import R1CS, SparseMatrix

    a, b, c = ([r[w] for r in rows] for w in range(3))
    return R1CS(num_public, num_aux, SparseMatrix.from_rows(a), SparseMatrix.from_rows(b),
                SparseMatrix.from_rows(c), names=tuple(r[3] for r in rows))


def _z(vals):
    from synthesis import field

    return np.ascontiguousarray(field.vec_from_ints([v % field.MODULUS for v in vals]))


def test_a_recomputation_that_leaves_a_non_bit_in_a_carry_row_is_unbound_not_refused():
    """A MultiEq row is an integer identity over bits only. Here input x (0) reaches the
    addition a + y = s + 2 c through y = -x; x changed to 1 makes y = -1, a non-bit: the
    integer recomputation gives s = 1, c = 0, which fails the row, yet s = c = 0 satisfies it
    in the field (a - 1 = 0). The input is unbound (the assignment below proves it): the audit
    must say so, not take the failed recomputation for a refusal."""
    from synthesis import field

    P = field.MODULUS
    x, a, y, s, c = 1, 2, 3, 4, 5
    bit = lambda v: ({v: 1}, {v: 1, 0: P - 1}, {}, f"boolean {v}")  # noqa: E731
    rows = [bit(a), ({x: P - 1}, {0: 1}, {y: 1}, "y = -x"), bit(s), bit(c),
            ({a: 1, y: 1, s: P - 1, c: P - 2}, {0: 1}, {}, "a + y = s + 2c")]
    r1cs = _crafted(rows, 1, 4)
    z = _z([1, 0, 1, 0, 1, 0])                       # x = 0, a = 1, y = 0, s = 1, c = 0
    A = InputAudit(r1cs, z)
    assert A.free == [a] and A.defn[s][0] == "c" and A.defn[c][0] == "c"   # the carry definition
    assert r1cs.first_unsatisfied(_z([1, 1, 1, -1, 0, 0])) is None         # x = 1 satisfies
    rep = audit_inputs(r1cs, z)
    assert rep.unbound == [1] and 1 not in rep.refused
    assert rep.problems == ["public input 1 can be changed from 0x0 to 0x1 with the 3 variables "
                            "that follow it recomputed, and every constraint holds"]


@pytest.mark.parametrize("side", ["B", "A"])
def test_a_packing_row_with_an_empty_side_reads_as_zero_times_the_other(side):
    """(x)(0) = b0 + 2 b1 (B empty; or A empty, B = x): the row says the bits are 0, whatever
    x is. x's change recomputes the packed bits from the row's linear form, 0 x: they stay 0 and
    every row holds, x is unbound (one line, however many changes are tried). Reading the empty
    side as 1 would pack x into the bits and take the failing row for a refusal."""
    from synthesis import field

    P = field.MODULUS
    x, b0, b1 = 1, 2, 3
    bit = lambda v: ({v: 1}, {v: 1, 0: P - 1}, {}, f"boolean {v}")  # noqa: E731
    lin = ({x: 1}, {}) if side == "B" else ({}, {x: 1})
    rows = [bit(b0), bit(b1), (*lin, {b0: 1, b1: 2}, "x * 0 = b0 + 2 b1")]
    r1cs = _crafted(rows, 1, 2)
    z = _z([1, 2, 0, 0])                              # x = 2: tried as 3 and 0
    A = InputAudit(r1cs, z)
    assert A.defn[b0][0] == "g" and A.free == []
    assert changes_of(2) == [3, 0]
    rep = audit_inputs(r1cs, z)
    assert rep.unbound == [1] and rep.refused == {}
    assert rep.problems == ["public input 1 can be changed from 0x2 to 0x3 with the 2 variables "
                            "that follow it recomputed, and every constraint holds"]


def test_a_single_definition_through_a_alone_and_the_row_that_refuses():
    """v defined by (v)(1) = x (v in A only, not in C) and checked by (v)(1) = 5: x's change
    recomputes v = x' and the check refuses it, named as the refusing row (not v's definition)."""
    x, v = 1, 2
    rows = [({v: 1}, {0: 1}, {x: 1}, "v = x"), ({v: 1}, {0: 1}, {0: 5}, "v = 5")]
    r1cs = _crafted(rows, 1, 1)
    z = _z([1, 5, 5])
    rep = audit_inputs(r1cs, z)
    assert not rep.problems and rep.refused == {1: [1]}
    assert [r1cs.names[r] for r in rep.refused[1]] == ["v = 5"]


@pytest.mark.parametrize("n", [10, 11, 12])
def test_the_report_lists_ten_undefined_and_ten_unchecked_variables_then_counts_the_rest(n):
    """n free variables the circuit does not expect and n copies of x that nothing checks:
    ten lines each, then "... and n - 10 more" (none at 10), the unbound input once, and the
    closing line."""
    x = 1
    free = list(range(2, 2 + n))
    copies = list(range(2 + n, 2 + 2 * n))
    rows = [({x: 1}, {0: 1}, {d: 1}, f"copy {d}") for d in copies]
    r1cs = _crafted(rows, 1, 2 * n)
    z = _z([1, 7] + [0] * n + [7] * n)
    rep = audit_inputs(r1cs, z, expected_free=[], expected_dangling=[])
    assert rep.unexpected_free == free and rep.unexpected_dangling == copies
    assert rep.unbound == [1] and rep.weakened == [1]
    p, more = rep.problems, n > 10
    assert len(p) == 10 + more + 1 + 10 + more + 1, p
    assert p[:10] == [f"variable {v} is defined by no constraint (appears in no constraint): "
                      "a free choice the circuit does not mean" for v in free[:10]]
    p = p[10:]
    if more:
        assert p.pop(0) == f"... and {n - 10} more undefined variables"
    assert p[0].startswith(f"public input 1 can be changed from 0x7 to 0x8 with the {n} variables")
    assert p[1:11] == [f"variable {d} is computed by constraint {d - 2 - n} (copy {d}) and checked by no "
                       "constraint (it follows public input(s) 1)" for d in copies[:10]]
    p = p[11:]
    if more:
        assert p.pop(0) == f"... and {n - 10} more variables checked by no constraint"
    assert p == ["undefined or unchecked variables reach the binding of public input(s) 1"]


@pytest.mark.parametrize("x0", [1, 0])
def test_an_input_in_a_carry_row_changed_to_a_non_bit_is_unbound_and_on_bits_refused(x0):
    """a + b + x = s + 2c, x on the C side (as MultiEq writes an addition's operands), w = 0 a
    defined term after the bits (so the row reads as carries, not a packing). x = 1 changed to
    2, a non-bit in the row: the guard reports the change unbound (the first change tried, 0x2),
    whatever the integer recomputation says. x = 0 with a check c = 0: x' = 1 stays on bits,
    c is recomputed to 1 and the check refuses it."""
    from synthesis import field

    P = field.MODULUS
    x, a, b, w, s, c = 1, 2, 3, 4, 5, 6
    bit = lambda v: ({v: 1}, {v: 1, 0: P - 1}, {}, f"boolean {v}")  # noqa: E731
    rows = [bit(a), bit(b), ({w: 1}, {0: 1}, {}, "w = 0"), bit(s), bit(c),
            ({s: 1, c: 2}, {0: 1}, {a: 1, b: 1, x: 1, w: 1}, "s + 2c = a + b + x + w")]
    if x0 == 0:
        rows.append(({c: 1}, {0: 1}, {}, "c = 0"))
    r1cs = _crafted(rows, 1, 5)
    ab = (1, 1) if x0 else (1, 0)  # x0 = 1: a + b + 2 = 4 fits no s + 2c (the row fails on bits)
    total = x0 + sum(ab)
    z = _z([1, x0, *ab, 0, total & 1, total >> 1])
    A = InputAudit(r1cs, z)
    assert A.defn[s][0] == "c" and A.defn[c][0] == "c" and A.free == [a, b]
    rep = audit_inputs(r1cs, z)
    if x0:
        assert rep.unbound == [1] and rep.trials[(1, 2)][0] == []
        assert rep.problems[0].startswith("public input 1 can be changed from 0x1 to 0x2 ")
    else:
        assert not rep.problems and [r1cs.names[r] for r in rep.refused[1]] == ["c = 0"]


def test_a_packing_row_with_a_constant_a_side_recomputes_the_bits():
    """(1)(b0 + 2 b1 - x) = 0: x = 2 changed to 3 packs into b0 = b1 = 1, every row holds
    (x is unbound: nothing else reads the bits); the constant side read as 0 would leave the
    bits and take the failing row for a refusal."""
    from synthesis import field

    P = field.MODULUS
    x, b0, b1 = 1, 2, 3
    bit = lambda v: ({v: 1}, {v: 1, 0: P - 1}, {}, f"boolean {v}")  # noqa: E731
    r1cs = _crafted([bit(b0), bit(b1), ({0: 1}, {b0: 1, b1: 2, x: P - 1}, {}, "x = b0 + 2 b1")], 1, 2)
    z = _z([1, 2, 0, 1])
    A = InputAudit(r1cs, z)
    assert A.defn[b0][0] == "g"
    rep = audit_inputs(r1cs, z, state=A)
    assert rep.unbound == [1] and rep.trials[(1, 3)][0] == []
    assert A.last_values == {x: 3, b0: 1}       # b1 stays 1


def test_a_single_definition_through_b_with_a_variable_a_side():
    """(x)(v) = (x) defines v = 1 for any non-zero x: x = 1 changed to 2 keeps v = 1, the check
    v = 1 holds, x is unbound (k1 = a0 b1, the A side's value: its sign matters)."""
    x, v = 1, 2
    rows = [({x: 1}, {v: 1}, {x: 1}, "x v = x"), ({v: 1}, {0: 1}, {0: 1}, "v = 1")]
    r1cs = _crafted(rows, 1, 1)
    z = _z([1, 1, 1])
    A = InputAudit(r1cs, z)
    rep = audit_inputs(r1cs, z, state=A)
    assert rep.unbound == [1] and rep.trials[(1, 2)][0] == [] and A.last_values == {x: 2}


def test_a_packing_held_as_x_plus_r_is_recomputed_in_that_representation():
    """x packed from 255 bits that hold x + r (bellpepper's non-strict to_bits: both are
    allowed): x = 1 changed to 2 recomputes the bits as 2 + r, the representation the witness
    holds, and every row holds (x is unbound here: nothing else reads the bits)."""
    from synthesis import field

    P = field.MODULUS
    x, n = 1, 255
    bits = list(range(2, 2 + n))
    bit = lambda v: ({v: 1}, {v: 1, 0: P - 1}, {}, f"boolean {v}")  # noqa: E731
    pack = {b: pow(2, e, P) for e, b in enumerate(bits)}
    pack[x] = P - 1
    r1cs = _crafted([bit(b) for b in bits] + [({0: 1}, pack, {}, "x = sum 2^e b_e")], 1, n)
    held = 1 + P
    z = _z([1, 1] + [(held >> e) & 1 for e in range(n)])
    A = InputAudit(r1cs, z)
    assert A.defn[bits[0]][0] == "g" and A.defn[bits[0]][5] == 1     # the witness's x + r
    rep = audit_inputs(r1cs, z, state=A)
    assert rep.unbound == [1] and rep.trials[(1, 2)][0] == []
    assert sum(A.last_values.get(b, A.z[b]) << e for e, b in enumerate(bits)) == 2 + P


def _odd_fails(parent, r):
    if r % 2:
        raise AssertionError(f"row {r} is odd")
    if os.getpid() == parent:  # with procs > 1 the verdicts run in the children
        raise AssertionError(f"row {r} ran in the parent")


@pytest.mark.parametrize("procs", [1, 3])
def test_each_row_reports_every_failing_row_in_order_over_forked_processes(procs):
    """The long audits' loop: each row's verdict run in one of ``procs`` forked processes (the
    arguments inherited, not sent), every failing row reported with its message, in row order,
    each row's CPU time returned; with procs > 1 no verdict runs in the parent."""
    parent = os.getpid() if procs > 1 else -1
    failures, cpu = each_row(_odd_fails, (parent,), range(10), procs)
    assert failures == [(r, f"row {r} is odd") for r in (1, 3, 5, 7, 9)]
    assert len(cpu) == 10 and all(t >= 0 for t in cpu)


def _dies_at_3(r):
    if r == 3:
        os._exit(3)  # as a worker killed for memory


def test_each_row_fails_at_once_when_a_worker_dies():
    """A worker process that dies (the kernel's OOM killer on a 16-process run) fails the loop
    with BrokenProcessPool instead of leaving it waiting for a row that never comes."""
    from concurrent.futures.process import BrokenProcessPool

    t0 = time.monotonic()
    with pytest.raises(BrokenProcessPool):
        each_row(_dies_at_3, (), range(6), 2)
    assert time.monotonic() - t0 < 60


def test_audit_procs_reads_its_variable(monkeypatch):
    monkeypatch.delenv("ZKHIVE_AUDIT_PROCS", raising=False)
    assert audit_procs() == (os.cpu_count() or 1)
    monkeypatch.setenv("ZKHIVE_AUDIT_PROCS", "16")
    assert audit_procs() == 16
    for bad in ("0", "-2", "x"):
        monkeypatch.setenv("ZKHIVE_AUDIT_PROCS", bad)
        with pytest.raises(ValueError, match="ZKHIVE_AUDIT_PROCS"):
            audit_procs()


# --- what the report names: every refusing row, a reused trial's cone, each line once ----------

def test_report_lists_every_refusing_row_after_a_packing_that_cannot_hold_the_value():
    """x = 3 packed into two bits (x = b0 + 2 b1) and copied into v (v = x), checked by v = 3.
    x + 1 = 4 does not fit the bits: the packing row refuses it, and the recomputation goes on
    to v = 4, which the check refuses too; the failing packing row does not end the evaluation
    of the other rows. The report lists both rows, for each change (x ^ 1 = 2 and 1 fit the
    bits: the check alone refuses them)."""
    from synthesis import field

    P = field.MODULUS
    x, b0, b1, v = 1, 2, 3, 4
    bit = lambda u: ({u: 1}, {u: 1, 0: P - 1}, {}, f"boolean {u}")  # noqa: E731
    rows = [bit(b0), bit(b1), ({0: 1}, {b0: 1, b1: 2, x: P - 1}, {}, "x = b0 + 2 b1"),
            ({v: 1}, {0: 1}, {x: 1}, "v = x"), ({v: 1}, {0: 1}, {0: 3}, "v = 3")]
    r1cs = _crafted(rows, 1, 3)
    z = _z([1, 3, 1, 1, 3])
    A = InputAudit(r1cs, z)
    assert A.defn[b0][0] == "g" and A.defn[v] == ("s", 3) and A.free == []
    rep = audit_inputs(r1cs, z, state=A)
    assert not rep.problems and rep.unbound == []
    assert rep.refused == {1: [2, 4]}                                # the packing and the check
    assert {new: t[0] for (_, new), t in rep.trials.items()} == {4: [2, 4], 2: [4], 1: [4]}
    assert A.check(x, 4)[0] == [2, 4] and A.last_values == {x: 4, v: 4}
    assert rep.cone == {1: 4}                                         # x, b0, b1, v


def test_report_of_a_reused_trial_keeps_its_cone_and_names_the_input_an_unchecked_variable_follows():
    """x -> v = x -> u = v, checked by u = 5 and v = 5. Removing u = 5 changes no definition, so
    the removal run reuses the base's trials (their rows less the dropped one, their cones):
    x stays bound (v = 5), the cone is still x, v, u (3), and u, now computed and read by
    nothing, is named with the input it follows; x is weakened. No closing line: no variable
    is undefined (that line is for an input bound only by what a free variable can satisfy)."""
    x, v, u = 1, 2, 3
    rows = [({v: 1}, {0: 1}, {x: 1}, "v = x"), ({u: 1}, {0: 1}, {v: 1}, "u = v"),
            ({u: 1}, {0: 1}, {0: 5}, "u = 5"), ({v: 1}, {0: 1}, {0: 5}, "v = 5")]
    r1cs = _crafted(rows, 1, 2)
    z = _z([1, 5, 5, 5])
    A = InputAudit(r1cs, z)
    base = audit_inputs(r1cs, z, state=A)
    assert not base.problems and base.refused == {1: [2, 3]} and base.cone == {1: 3}
    rep = _removed(r1cs, z, A, base, 2)
    assert all(t[1] is base.trials[k][1] for k, t in rep.trials.items())  # reused, not recomputed
    assert rep.refused == {1: [3]} and rep.unbound == [] and rep.cone == {1: 3}
    assert all(t[1].tolist() == [x, v, u] for t in rep.trials.values())
    assert rep.unexpected_dangling == [u] and rep.weakened == [1]
    assert rep.problems == ["variable 3 is computed by constraint 1 (u = v) and checked by no constraint "
                            "(it follows public input(s) 1)"]


def test_report_names_a_tainted_refusal_once_and_every_weakened_input_then_the_closing_line():
    """v = x1 + x2 + f with f free (the circuit does not expect it), checked by v = 7; x1 also
    by x1 = 3. x2's change is refused only by v = 7, which f reaches: x2 is unbound, named once
    (its later changes are not tried). x1 is refused by both rows (all three changes tried):
    bound, but weakened (one refusing row is reached by f), and so is x2: the closing line
    names both."""
    x1, x2, f, v = 1, 2, 3, 4
    rows = [({v: 1}, {0: 1}, {x1: 1, x2: 1, f: 1}, "v = x1 + x2 + f"),
            ({v: 1}, {0: 1}, {0: 7}, "v = 7"), ({x1: 1}, {0: 1}, {0: 3}, "x1 = 3")]
    r1cs = _crafted(rows, 2, 2)
    z = _z([1, 3, 2, 2, 7])
    A = InputAudit(r1cs, z)
    assert A.free == [f]
    rep = audit_inputs(r1cs, z, state=A, expected_free=[])
    assert rep.unexpected_free == [f] and rep.unbound == [2] and rep.refused == {1: [1, 2]}
    assert [k for k in rep.trials] == [(1, 4), (1, 2), (1, 1), (2, 3)]
    assert rep.weakened == [1, 2] and rep.cone == {1: 2, 2: 2}
    assert rep.problems == [
        "variable 3 is defined by no constraint (appears in constraint 0 (v = x1 + x2 + f)): "
        "a free choice the circuit does not mean",
        "public input 2 changed to 0x3 is refused only by constraint 1 (v = 7), which undefined variables reach",
        "undefined or unchecked variables reach the binding of public input(s) 1, 2"]
    # the same with f expected: no problem, both inputs refused
    rep = audit_inputs(r1cs, z, state=A, expected_free=[f])
    assert rep.problems == [] and rep.weakened == [] and rep.refused == {1: [1, 2], 2: [1]}


# --- FallbackPoSt (WindowPoSt, WinningPoSt): every public input bound ------------------------------

@pytest.mark.parametrize("name", ["window-post-2k", "winning-post-2k"])
def test_post_every_public_input_is_bound(name):
    """Issue 35's audit over a whole PoSt partition (a full partition over a benchmark replica,
    bench/gpu_prover.c1_doc: what the H200 benchmark proves): every public input (each sector's
    comm_r and each challenged leaf index) refused by some constraint once changed with the
    witness free to follow; nothing unbound, undefined or unchecked."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.gpu_prover import c1_doc
    from synthesis.circuits import get_circuit

    circuit = get_circuit(name)
    job = circuit.parse_c1(c1_doc(circuit, 5))
    z, r1cs = circuit.synthesize(job, 0), circuit.r1cs()
    rep = audit_inputs(r1cs, z, state=InputAudit(r1cs, z))
    assert not rep.problems and not rep.unbound and not rep.dangling, rep.problems[:3]
    assert sorted(rep.refused) == list(range(1, 1 + r1cs.num_public))
    assert r1cs.num_public == circuit.prm.num_public
