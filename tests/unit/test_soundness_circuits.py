"""The challenge gadgets of the circuits (porep-lite, SDR) through ``synthesis.audit``: the
composition of the gadgets (selection by index bits, Poseidon and SHA-254 Merkle paths, labels)
leaves no variable unconstrained, no bit unbound, none free to change alone.

porep-lite's test partition (9k constraints) runs in every CI run. SDR's smallest set is 193k
constraints, ~2 minutes of audit on a 2-core machine: ``ZKHIVE_LONG_AUDIT=1`` runs it (as
``ZKHIVE_LONG_FAULTS`` does for the long fault campaign; docs/testing.md)."""
from __future__ import annotations

import json
import os

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
                    reason="the SDR audit takes ~2 minutes: ZKHIVE_LONG_AUDIT=1 runs it")
def test_sdr_challenge_gadget_is_sound():
    from synthesis.circuits import get_circuit
    from synthesis.sdr import TINY, c1_document, generate, interactive_seed

    circuit = get_circuit(TINY)
    sector = generate(circuit.prm, b"\x41" * 32)
    c1 = circuit.parse_c1(json.loads(json.dumps(c1_document(sector, interactive_seed(sector)))))
    r1cs = circuit.r1cs()
    zs = [circuit.synthesize(c1, k) for k in range(circuit.num_partitions())]
    rep = assert_sound(r1cs, zs, sample=2000)
    assert len(rep.booleanity) > 40_000 and len(rep.determined) > 80_000
