"""The challenge gadgets of the circuits (porep-lite, Filecoin's PoR and column hash, a filecoin-test partition) through ``synthesis.audit``: the
composition of the gadgets (selection by index bits, Poseidon and SHA-254 Merkle paths, labels)
leaves no variable unconstrained, no bit unbound, none free to change alone.

porep-lite's test partition runs in every CI run. The test-sized Filecoin configuration is 1.2 M
constraints: ``ZKHIVE_LONG_AUDIT=1`` runs its audit (as ``ZKHIVE_LONG_FAULTS`` does for the long
fault campaign; docs/testing.md)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from synthesis.audit import assert_sound, refused_by
from synthesis.r1cs import UnsatisfiedConstraint


def test_porep_lite_challenge_gadget_is_sound():
    from synthesis.porep import PorepLite, c1_document, generate
    from tests.unit.test_porep import CHALLENGE_SEED, SEED, SMALL, direct_partition

    circuit = PorepLite(SMALL)
    c1 = circuit.parse_c1(c1_document(generate(SMALL, SEED), CHALLENGE_SEED))
    r1cs, z0 = direct_partition(SMALL, c1, 0)
    _, z1 = direct_partition(SMALL, c1, 1)
    rep = assert_sound(r1cs, [z0, z1], sample=1500)
    # the challenge and parent index bits are booleans of their own; the insert monomials,
    # products of bits, are bound by their rows
    assert rep.booleanity and rep.determined and not rep.unbound_bits
    names = {r1cs.names[row] for row in rep.booleanity.values()}
    assert names == {"challenge bits[0] is boolean", "challenge bits[1] is boolean",
                     "challenge bits[2] is boolean", "parent bits[0] is boolean",
                     "parent bits[1] is boolean", "parent bits[2] is boolean"}
    # a challenge bit set to 2 is refused by its booleanity first
    v = next(v for v, row in rep.booleanity.items() if r1cs.names[row] == "challenge bits[1] is boolean")
    bad = z0.copy()
    bad[v] = [2, 0, 0, 0]
    with pytest.raises(UnsatisfiedConstraint, match=r"\(challenge bits\[1\] is boolean\)"):
        r1cs.check(bad)
    assert refused_by(r1cs, z0, {v: 2})[0].endswith("(challenge bits[1] is boolean)")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ZKHIVE_LONG_AUDIT") != "1",
                    reason="the filecoin-test-256b audit (1.2 M constraints) takes many minutes: "
                           "ZKHIVE_LONG_AUDIT=1 runs it")
def test_filecoin_test_partition_is_sound():
    from synthesis.circuits import get_circuit
    from synthesis.filecoin.params import TEST
    from synthesis.filecoin.sector import c1_document, generate, interactive_seed

    circuit = get_circuit(TEST)
    sector = generate(circuit.prm, b"\x41" * 32)
    c1 = circuit.parse_c1(json.loads(json.dumps(c1_document(sector, interactive_seed(sector)))))
    r1cs = circuit.r1cs()
    zs = [circuit.synthesize(c1, k) for k in range(circuit.num_partitions())]
    rep = assert_sound(r1cs, zs, sample=2000)
    assert len(rep.booleanity) > 40_000 and len(rep.determined) > 80_000


def test_filecoin_por_and_column_gadgets_are_sound():
    """Filecoin's Poseidon PoR (8-ary: `insert_8`'s nor/and/picks, the index bits packed into an
    input, the root equality) and a column hash (neptune's arity 11, as `hash_single_column`):
    with four honest witnesses, no variable unconstrained, every index bit bound, no single wrong
    value free; an index bit set to 2 is refused by its own booleanity row, and a path checked
    against another node's position fails the root equality."""
    from synthesis import field
    from synthesis.bellpepper import alloc_num
    from synthesis.bellpepper.check import assignments
    from synthesis.builder import ConstraintSystem
    from synthesis.filecoin import stacked
    from synthesis.bellpepper.core import Synth
    from tests.unit.test_filecoin_circuit import _tree, fr_rand

    depth, arity, B = 3, 8, 4
    nodes = np.array([0o000, 0o777, 0o135, 0o642])
    leaves = fr_rand(B)
    paths = [_tree(int(n), arity, depth, leaves[b]) for b, n in enumerate(nodes)]
    roots = field.vec_from_ints([root for _, root in paths])
    sibs = np.stack([sib for sib, _ in paths])      # (B, depth, 7, 4)
    column = fr_rand(B * 11).reshape(B, 11, 4)

    def build(positions):
        s = Synth(cs=ConstraintSystem(with_values=False), batch=B)
        leaf = alloc_num(s, lambda: leaves)
        root = alloc_num(s, lambda: roots)
        stacked.por(s, leaf, root, (arity,) * depth, positions, lambda lv: sibs[:, lv], sha=False)
        stacked.poseidon(s, [alloc_num(s, lambda j=j: column[:, j]) for j in range(11)])
        return s

    s = build(lambda: stacked._positions(nodes, (arity,) * depth))
    r1cs = s.cs.to_r1cs()
    zs = [np.ascontiguousarray(z) for z in assignments(s)]
    rep = assert_sound(r1cs, zs)
    assert not rep.unconstrained and not rep.unbound_bits and not rep.free
    index_bits = [v for v, row in rep.booleanity.items() if "index bit" in r1cs.names[row]]
    assert len(index_bits) == depth * 3
    assert refused_by(r1cs, zs[2], {index_bits[4]: 2})[0].endswith(r1cs.names[rep.booleanity[index_bits[4]]] + ")")

    # the same siblings placed for other positions: the computed root is not the committed one
    wrong = build(lambda: stacked._positions(nodes ^ 1, (arity,) * depth))
    z = np.ascontiguousarray(assignments(wrong)[1])
    with pytest.raises(UnsatisfiedConstraint, match="enforce root is correct"):
        wrong.cs.to_r1cs().check(z)
