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


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_cpu_fixed_base_matches_arkworks_byte_for_byte(group):
    """The CPU backend's setup path (64-bit limbs, one inversion per 256 points): every point
    of several chunks equals arkworks' base * s, zeros the identity, edges included."""
    from gpu.groth16.fixed_base import cpu_fixed_base
    base = (curve.g1() if group == "g1" else curve.g2()) * curve.scalar(F.random_element())
    s = F.vec_random(600)  # three chunks of 256, the last partial
    s[0] = 0
    s[1:5] = F.vec_from_ints([1, F.MODULUS - 1, 2 ** 254, 255])
    s[300] = 0  # an identity inside a chunk's batch inversion
    s[301] = s[5]
    out = cpu_fixed_base(base, s)
    assert out.raw.tobytes() == curve.fixed_base(base, s).raw.tobytes()
    assert out[0] == type(base).identity() and out[1] == base and out[2] == -base
    assert out[300] == type(base).identity() and out[301] == out[5]
    assert len(cpu_fixed_base(base, s[:0])) == 0


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_cpu_fixed_base_doubles_and_cancels_where_the_table_says_so(group):
    """The mixed addition's two special cases, unreachable with a real table (no two window
    sums meet): a table whose entries repeat (Q + Q: the doubling) and cancel (Q + (-Q): the
    identity) through the same C entry point."""
    import numpy as np
    from gpu.groth16.fixed_base import _cpu
    from gpu.groth16.points import PointArray
    kind = type(curve.g1() if group == "g1" else curve.g2())
    q = (curve.g1() if group == "g1" else curve.g2()) * curve.scalar(F.random_element())
    t = table(q).copy()  # row j * 256 + k: k 2^(8j) q
    t[ENTRIES + 1] = t[1]             # window 1, digit 1 := q
    t[ENTRIES + 2] = table(-q)[1]     # window 1, digit 2 := -q
    s = F.vec_from_ints([0x0101, 0x0201, 0x0301])
    out = PointArray.empty(kind, 3)
    fn = _cpu().cpu_fixed_base_g1 if group == "g1" else _cpu().cpu_fixed_base_g2
    fn(3, t.ctypes.data, np.ascontiguousarray(s).ctypes.data, out.raw.ctypes.data)
    assert out[0] == q * curve.scalar(2)
    assert out[1] == kind.identity()
    assert out[2] == q + q * curve.scalar(3 << 8)
