"""Device field arithmetic (ntt_field.cu, the PTX paths of ff_ptx.cuh) == the host build.

Same ops, same raw limbs in: random values, the edges 0, 1, p-1, and values at or above p, so
the device agrees with the host inside and outside the documented input contracts.
"""
from __future__ import annotations

import secrets

import numpy as np
import pytest

from gpu import native

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


def values(field: str, count: int) -> list[int]:
    nbytes, p, _ = FIELDS[field]
    coord_bits = 8 * nbytes if field != "fq2" else 384
    edge = [0, 1, 2, p - 1, p - 2, p, p + 1, p + 12345, 2 * p - 1, (1 << coord_bits) - 1]
    coords = edge + [secrets.randbelow(p) for _ in range(count)] + \
        [p + secrets.randbelow((1 << coord_bits) - p) for _ in range(count // 4)]
    if field != "fq2":
        return coords
    return [coords[i] + (coords[secrets.randbelow(len(coords))] << 384) for i in range(len(coords))]


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
    a, b = values(field, 300), values(field, 300)  # same length, drawn independently
    for op in FIELDS[field][2]:
        got = device_op(field, op, a, b)
        want = [native.field_op(field, op, x, y) for x, y in zip(a, b)]
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"{field} {op}: element {bad[0]}: a={a[bad[0]]:#x} b={b[bad[0]]:#x}"


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_wrong_input_gives_a_different_result(cuda_ctx, field):
    a, b = values(field, 20)[10:], values(field, 20)[10:]
    want = [native.field_op(field, "mul", x, y) for x, y in zip(a, b)]
    got = device_op(field, "mul", [x ^ 1 for x in a], b)
    assert any(g != w for g, w in zip(got, want))
