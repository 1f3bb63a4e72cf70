"""A .params read through its compressed mirror on the device (gpu/cuda/params.py
``_fill_mirror``, gpu/kernels/mirror.cu, mirror_full.cu; issue 40 item 3):

- the resident bases equal the .params fill's, row for row (density gaps, several blocks a
  section), with points="curve" and "full", and prove the same proof (r, s fixed), verified;
  no query is ever read on the host;
- a flipped byte (its block's digest), a point that does not decompress and, with points="full",
  a point outside the subgroup (digests made to match) are refused naming section and offset,
  and the load falls back to the .params: the key still proves the same proof.
"""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from gpu import prove, verify
from gpu.groth16 import bellperson as bp
from gpu.groth16 import mirror as mr
from synthesis import assignment, field as F
from tests.compact_circuits import toy, witness
from tests.unit.test_params_mirror import _non_residue_x, _rewrite_block

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(cuda_ctx):
    from gpu.backends import get_backend
    return get_backend("cuda:0")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from gpu.groth16.setup import setup as host_setup
    d = tmp_path_factory.mktemp("mirror")
    cr = toy(9)
    pk, _ = host_setup(cr.to_r1cs(), seed=b"mirror-gpu")
    bp.write_params(pk, cr, d / "k.params")
    bp.write_vk(pk, d / "k.vk")
    mr.write_mirror(d / "k.params", d / "k.params.mirror", block_points=7)
    return d, cr


def _copy(files, tmp_path):
    d = files[0]
    for n in ("k.params", "k.params.mirror"):
        shutil.copy2(d / n, tmp_path / n)
    return tmp_path / "k.params", tmp_path / "k.params.mirror"


def _through(params, mirror, cr, points="curve"):
    pk = bp.read_params(params, cr, points=points)
    dropped = []
    mr.attach(pk, mr.open_mirror(mirror, params), on_bad=lambda m, why: dropped.append(why))
    return pk, dropped


def _rows(backend, pk):
    from gpu.cuda.params import device_rows
    res = backend._on_device[pk.circuit_digest][0]
    return {name: device_rows(b, 0, b.n) for name, b in res.bases.items() if name in bp.OURS.values()}


@pytest.mark.parametrize("points", ["curve", "full"])
def test_device_load_through_the_mirror_is_the_params_load(backend, files, points):
    d, cr = files
    z = witness(9)
    blob = assignment.encode(z)
    pub = F.vec_to_ints(z[1:2])
    r, s = random.randrange(1, F.MODULUS), random.randrange(1, F.MODULUS)

    pk_file = bp.read_params(d / "k.params", cr, points=points)
    backend.load(pk_file, cr)
    want = _rows(backend, pk_file)
    made = prove(pk_file, cr, blob, backend=backend, r=r, s=s)
    backend.unload(pk_file.circuit_digest)

    pk, dropped = _through(d / "k.params", d / "k.params.mirror", cr, points)
    backend.load(pk, cr)
    got = _rows(backend, pk)
    assert set(got) == set(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    proof = prove(pk, cr, blob, backend=backend, r=r, s=s)
    assert proof.to_bytes() == made.to_bytes()
    vk = bp.read_vk(d / "k.vk", circuit=cr)
    assert verify(vk, pub, proof) and not verify(vk, [pub[0] ^ 1], proof)
    assert not dropped and all(getattr(pk, n).fell_back is None for n in bp.OURS.values())
    assert all(q._raw is None for q in (pk.a_query, pk.b_g2_query, pk.l_query))  # never on the host
    from gpu.cuda.params import last_fill
    assert last_fill["b_g2"].get("mirror") == 1
    backend.unload(pk.circuit_digest)


def test_device_load_through_a_partial_mirror_is_the_params_load(backend, files, tmp_path):
    """A mirror with room for what h and b_g2 take (plan_sections: each section in order that
    still fits): its sections decompressed on the device, the others filled from the .params,
    the same rows and the same proof as the .params alone, verified; a wrong input refused."""
    from gpu.cuda.params import last_fill
    d, cr = files
    params = d / "k.params"
    lay = bp.scan(params)
    room = mr.mirror_bytes(lay, 7, ["h", "b_g2"])
    held = mr.plan_sections(lay, room, 7)
    part = mr.write_mirror(params, tmp_path / "part.mirror", block_points=7, room=room)
    m = mr.open_mirror(part, params)
    assert list(m.sections) == held and 0 < len(held) < len(bp.QUERIES)
    z = witness(9)
    blob = assignment.encode(z)
    pub = F.vec_to_ints(z[1:2])
    pk_file = bp.read_params(params, cr)
    backend.load(pk_file, cr)
    want = _rows(backend, pk_file)
    made = prove(pk_file, cr, blob, backend=backend, r=3, s=11)
    backend.unload(pk_file.circuit_digest)
    pk, dropped = _through(params, part, cr)
    backend.load(pk, cr)
    got = _rows(backend, pk)
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    for name, _ in bp.QUERIES:
        assert (last_fill[name].get("mirror") == 1) == (name in held), (name, last_fill[name])
    proof = prove(pk, cr, blob, backend=backend, r=3, s=11)
    assert proof.to_bytes() == made.to_bytes() and not dropped
    vk = bp.read_vk(d / "k.vk", circuit=cr)
    assert verify(vk, pub, proof) and not verify(vk, [pub[0] ^ 1], proof)
    backend.unload(pk.circuit_digest)


def _falls_back(backend, files, params, mirror, match, points="curve"):
    d, cr = files
    z = witness(9)
    blob = assignment.encode(z)
    r, s = 5, 7
    pk_file = bp.read_params(d / "k.params", cr, points=points)
    made = prove(pk_file, cr, blob, backend=backend, r=r, s=s)
    backend.unload(pk_file.circuit_digest)
    pk, dropped = _through(params, mirror, cr, points)
    proof = prove(pk, cr, blob, backend=backend, r=r, s=s)
    assert proof.to_bytes() == made.to_bytes()
    assert len(dropped) == 1
    import re
    assert re.search(match, dropped[0]), dropped[0]
    backend.unload(pk.circuit_digest)


def test_flipped_byte_refused_and_the_params_read(backend, files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    sec = mr.open_mirror(mirror, params).sections["b_g1"]
    buf = bytearray(mirror.read_bytes())
    buf[sec.offset + 8 * 48 + 3] ^= 0x04     # point 8: block 1 at 7 points a block
    mirror.write_bytes(bytes(buf))
    end = min(14, sec.count)  # the section's last block ends with its last point (10 here)
    _falls_back(backend, files, params, mirror,
                rf"{mirror}: section b_g1, block 1 \(points 7\.\.{end}, byte offsets "
                rf"{sec.offset + 7 * 48}\.\.{sec.offset + end * 48}\): SHA-256 differs")


def test_point_off_the_curve_refused_on_the_device(backend, files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    bad = _non_residue_x(48)

    def edit(buf, at, w):
        buf[at:at + w] = bad
    _rewrite_block(mirror, params, "h", 10, edit)
    sec = mr.open_mirror(mirror, params).sections["h"]
    _falls_back(backend, files, params, mirror,
                rf"section h, point 10 at byte offset {sec.offset + 10 * 48}: not on the curve: "
                r"no curve point has that x \(a non-residue\) \(found on the device\)")


def test_point_outside_the_subgroup_refused_with_full(backend, files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    x = 5
    while True:   # on the curve, not in the subgroup
        rhs = (x ** 3 + 4) % bp.FQ_MODULUS
        y = pow(rhs, (bp.FQ_MODULUS + 1) // 4, bp.FQ_MODULUS)
        if y * y % bp.FQ_MODULUS == rhs:
            raw = np.frombuffer(x.to_bytes(48, "little") + y.to_bytes(48, "little"), np.uint8).reshape(1, 96)
            if bp.first_bad(raw, 1, "full")[0] == 0:
                break
        x += 1
    comp = bytearray(x.to_bytes(48, "big"))
    comp[0] |= 0x80

    def edit(buf, at, w):
        buf[at:at + w] = bytes(comp)
    _rewrite_block(mirror, params, "l", 2, edit)
    sec = mr.open_mirror(mirror, params).sections["l"]
    _falls_back(backend, files, params, mirror,
                rf"section l, point 2 at byte offset {sec.offset + 2 * 48}: not in the prime-order "
                r"subgroup \(found on the device\)", points="full")
