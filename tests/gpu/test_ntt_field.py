"""Device field arithmetic (ntt_field.cu, the PTX paths of ff_ptx.cuh) == the host build.

Same ops, same raw limbs in: random values, the edges 0, 1, p-1, and values at or above p, so
the device agrees with the host inside and outside the documented input contracts.
"""
from __future__ import annotations

import secrets

import numpy as np
import pytest

from arith import native

pytestmark = pytest.mark.gpu

FR = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
FQ = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
OPS = native.OPS
#: field -> (bytes, modulus for the edge values, ops)
FIELDS = {
    "fr": (32, FR, [o for o in OPS if OPS[o] <= 8]),
    "fq": (48, FQ, [o for o in OPS if OPS[o] <= 8]),
    "fq2": (96, FQ, list(OPS)),
}


def coords(p: int, bits: int, op: str, count: int) -> list[tuple[int, int]]:
    """(a, b) coordinate pairs inside ``op``'s input contract (docs/gpu.md), edges included,
    plus the documented just-outside cases that both builds reduce the same way."""
    R = 1 << bits
    rnd = secrets.randbelow
    edge = [0, 1, 2, p - 1, p - 2]
    canon = [(x, y) for x in edge for y in edge] + [(rnd(p), rnd(p)) for _ in range(count)]
    if op == "add":  # a + b < 2p, plus sums in [2p, R) (one subtraction: congruent, >= p)
        k = [rnd(p) for _ in range(count // 4)]
        return canon + [(p + x, rnd(p - x)) for x in k] + [(p, 0), (p + 5, p - 1)]
    if op == "sub":  # -p <= a - b < p, plus a - b >= p
        extra = []
        for _ in range(count // 4):
            a = rnd(p)
            extra.append((a, p + rnd(a + 1)))
        return canon + extra + [(0, p), (p + 7, 1)]
    if op in ("neg", "conj"):
        return canon + [(p, 0)]
    if op in ("dbl", "mul_by_xi"):
        return canon
    # The device product (ff_ptx.cuh, even/odd) takes a <= R - p, b < R: a multiplicand above
    # R - p could carry out of its top word, where the host's CIOS keeps an extra word.
    if op == "mont_mul":  # a <= R - p, b < R (outside the reduced range: in [p, R - p])
        return canon + [(p + rnd(R - 2 * p + 1), rnd(R)) for _ in range(count // 4)] + \
            [(R - p, R - 1), (R - p, p)]
    # mul, sqr, inv, to_mont, from_mont: x to_mont()s each operand (x R^2 R^-1, x the
    # multiplicand), so any limb values up to R - p
    wide = [x for x in (p, p + 1, 2 * p - 1, R - p) if x <= R - p]
    return canon + [(x, y) for x in wide for y in wide] + \
        [(p + rnd(R - 2 * p + 1), p + rnd(R - 2 * p + 1)) for _ in range(count // 4)]


def values(field: str, op: str, count: int) -> tuple[list[int], list[int]]:
    nbytes, p, _ = FIELDS[field]
    pairs = coords(p, 384 if field == "fq2" else 8 * nbytes, op, count)
    if field != "fq2":
        return [a for a, _ in pairs], [b for _, b in pairs]
    if op == "mont_mul":  # Fq2 products need reduced coordinates (Karatsuba adds them)
        pairs = [(a, b) for a, b in pairs if a < p and b < p]
    # Fq2: each coordinate drawn from the op's contract, c1 from a shuffled copy of the pairs
    other = [pairs[secrets.randbelow(len(pairs))] for _ in pairs]
    return ([a0 + (a1 << 384) for (a0, _), (a1, _) in zip(pairs, other)],
            [b0 + (b1 << 384) for (_, b0), (_, b1) in zip(pairs, other)])


def device_op(field: str, op: str, a: list[int], b: list[int]) -> list[int]:
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    nbytes = FIELDS[field][0]
    n = len(a)
    pack = lambda xs: np.frombuffer(b"".join(int(x).to_bytes(nbytes, "little") for x in xs),  # noqa: E731
                                    dtype=np.uint32).copy()
    ha, hb = pack(a), pack(b)
    out = np.full_like(ha, 0xDEADBEEF)  # poisoned: every element must be written
    mod = loader.load_module("ntt_field")
    fn = loader.get_function(mod, f"field_{field}_op")
    with DeviceBuffer(ha.nbytes) as da, DeviceBuffer(hb.nbytes) as db, DeviceBuffer(out.nbytes) as do:
        da.upload(ha)
        db.upload(hb)
        do.upload(out)
        fn(np.int32(OPS[op]), np.uintp(da.ptr), np.uintp(db.ptr), np.uintp(do.ptr), np.uint32(n),
           block=(128, 1, 1), grid=((n + 127) // 128, 1))
        do.download(out)
    raw = out.tobytes()
    return [int.from_bytes(raw[i * nbytes:(i + 1) * nbytes], "little") for i in range(n)]


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_op_matches_host(cuda_ctx, field):
    for op in FIELDS[field][2]:
        a, b = values(field, op, 300)
        got = device_op(field, op, a, b)
        want = [native.field_op(field, op, x, y) for x, y in zip(a, b)]
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"{field} {op}: element {bad[0]}: a={a[bad[0]]:#x} b={b[bad[0]]:#x}"


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_wrong_input_gives_a_different_result(cuda_ctx, field):
    a, b = values(field, "mul", 20)
    want = [native.field_op(field, "mul", x, y) for x, y in zip(a, b)]
    got = device_op(field, "mul", [x ^ 1 for x in a], b)
    assert any(g != w for g, w in zip(got, want))
