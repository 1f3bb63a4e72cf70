"""The fixed-base multiplication setup uses (host build of gpu/kernels/fixed_base.cuh) against
arkworks, on random and edge scalars."""
import pytest

from gpu.groth16 import curve
from gpu.groth16.fixed_base import ENTRIES, host_fixed_base, table
from synthesis import field as F


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_host_fixed_base_matches_arkworks(group):
    base = (curve.g1() if group == "g1" else curve.g2()) * curve.scalar(F.random_element())
    s = F.vec_random(40)
    s[0] = 0
    s[1:4] = F.vec_from_ints([1, F.MODULUS - 1, 2 ** 254])
    s[4] = s[5]  # a repeated scalar
    out = host_fixed_base(base, s)
    assert out == curve.fixed_base(base, s)
    assert out[0] == type(base).identity() and out[1] == base and out[2] == -base
    # and a wrong table entry changes the result: the table is really what is summed
    wrong = curve.fixed_base(base * curve.scalar(2), s[1:2])
    assert out[1:2] != wrong


def test_table_rows_are_the_window_multiples():
    base = curve.g1() * curve.scalar(99)
    t = table(base)
    assert t.shape == (32 * ENTRIES, 96)
    assert not t[0].any()  # k = 0: the identity
    two_pow_8 = curve.scalar(1 << 8)
    from py_arkworks_bls12381 import G1Point
    assert G1Point.from_xy_bytes_le(t[ENTRIES + 3].tobytes()) == base * two_pow_8 * curve.scalar(3)
