"""The benchmark's circuit and files (bench/mulchain.py, bench/snarkjs_compare.py) at a small
size: the numbers in docs/performance.md rest on them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/synthesis.py must not shadow the package

import mulchain  # noqa: E402
import snarkjs_compare  # noqa: E402

from gpu.groth16.qap import domain_size  # noqa: E402
from synthesis import field  # noqa: E402
from synthesis.r1cs import UnsatisfiedConstraint  # noqa: E402


@pytest.mark.parametrize("k", [4, 7])
def test_mul_chain_fills_the_domain_and_is_satisfied(k):
    r1cs, z, public = mulchain.mul_chain(mulchain.constraints_for_domain(k))
    assert domain_size(r1cs) == 1 << k
    assert r1cs.num_constraints + r1cs.num_public + 1 == 1 << k
    r1cs.check(z)
    assert public == field.vec_to_ints(z[1:3])
    # full-size values, not zeros and ones
    assert all(v > 2**200 for v in field.vec_to_ints(z[3:10]))
    bad = z.copy()
    bad[5] = field.vec_from_ints([field.vec_to_ints(z[5:6])[0] + 1])[0]  # v_3: output of row 2
    with pytest.raises(UnsatisfiedConstraint) as e:
        r1cs.check(bad)
    assert e.value.index == 2


def test_mul_chain_recurrence_matches_its_definition():
    x = 12345
    r1cs, z, (x_out, y) = mulchain.mul_chain(4, x=x)
    v = x
    for i in range(3):
        v = (v + i + 1) * (v + mulchain.B_CONSTANT) % field.MODULUS
    assert (x_out, y) == (x, v)


def test_circuit_file_round_trips(tmp_path):
    r1cs, z, _ = mulchain.mul_chain(20)
    snarkjs_compare.save_circuit(r1cs, tmp_path / "c.npz")
    back = snarkjs_compare.load_circuit(tmp_path / "c.npz")
    assert back.digest() == r1cs.digest()
    back.check(z)
