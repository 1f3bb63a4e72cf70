"""bellperson parameter files and the CUDA backend (gpu/groth16/bellperson.py, issue 24):

- a key made on the device with a seed, written out from the device (params.cu store_bases), is
  byte for byte the file the host setup with that seed writes;
- that file streamed into the device (gpu/cuda/params.py fill: a chunk of variables at a time,
  load_bases checking every point on the curve) proves, with r and s fixed, the same proof as
  the key made on the device, and the proof verifies with the .vk read back;
- a point off the curve or with a flag set is refused on the device naming the section and byte
  offset; with points="full" a point outside the subgroup too (subgroup.cu check_points);
- the file's points converted and scattered on the device (params.cu load_file_points) and on
  the host (ZKHIVE_PARAMS_HOST_CONVERT=1) alike.
"""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from gpu import prove, verify
from gpu.groth16 import KeyFormatError, bellperson as bp
from synthesis import assignment, field as F
from tests.compact_circuits import toy, witness

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(cuda_ctx):
    from gpu.backends import get_backend
    return get_backend("cuda:0")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from gpu.groth16.setup import setup as host_setup
    d = tmp_path_factory.mktemp("params")
    cr = toy(9)
    pk, _ = host_setup(cr.to_r1cs(), seed=b"params-gpu")
    bp.write_params(pk, cr, d / "host.params")
    bp.write_vk(pk, d / "host.vk")
    return d, cr


def test_device_key_written_is_the_host_file_and_a_file_proves_the_same(backend, files):
    d, cr = files
    z = witness(9)
    blob = assignment.encode(z)
    pub = F.vec_to_ints(z[1:2])
    r, s = random.randrange(1, F.MODULUS), random.randrange(1, F.MODULUS)
    from gpu.cuda.params import device_rows
    pk_dev, _ = backend.setup_resident(cr, seed=b"params-gpu")
    res = backend._on_device[pk_dev.circuit_digest][0]
    for encoded in (False, True):   # converted on the host / on the device (store_file_points)
        bp.write_params_from(pk_dev, cr, d / "device.params", encoded=encoded,
                             rows=lambda name, lo, hi: device_rows(res.bases[name], lo, hi, encoded=encoded))
        assert (d / "device.params").read_bytes() == (d / "host.params").read_bytes(), encoded
    made = prove(pk_dev, cr, blob, backend=backend, r=r, s=s)
    backend.unload(pk_dev.circuit_digest)

    pk_file = bp.read_params(d / "host.params", cr)
    assert all(q._raw is None for q in (pk_file.a_query, pk_file.h_query))  # never read on the host
    from_file = prove(pk_file, cr, blob, backend=backend, r=r, s=s)
    assert all(q._raw is None for q in (pk_file.a_query, pk_file.b_g2_query, pk_file.l_query))
    assert from_file.to_bytes() == made.to_bytes()
    vk = bp.read_vk(d / "host.vk", circuit=cr)
    assert verify(vk, pub, from_file) and not verify(vk, [pub[0] ^ 1], from_file)
    backend.unload(pk_file.circuit_digest)
    # small chunks (the scatter over density gaps and chunk edges), converted on the device and
    # on the host (ZKHIVE_PARAMS_HOST_CONVERT=1)
    for host_convert in (False, True):
        pk_small = bp.read_params(d / "host.params", cr)
        for q in (pk_small.a_query, pk_small.b_g1_query, pk_small.b_g2_query, pk_small.l_query,
                  pk_small.h_query):
            q.chunk, q.host_convert = 5, host_convert
        assert prove(pk_small, cr, blob, backend=backend, r=r, s=s).to_bytes() == made.to_bytes()
        backend.unload(pk_small.circuit_digest)


def test_bad_points_refused_on_the_device(backend, files, tmp_path):
    d, cr = files
    lay = bp.scan(d / "host.params")
    at = lay.sections["a"].offset(3)
    data = bytearray((d / "host.params").read_bytes())
    data[at + 95] ^= 1
    path = tmp_path / "bad.params"
    path.write_bytes(bytes(data))
    pk = bp.read_params(path, cr, points="none")
    with pytest.raises(KeyFormatError, match=rf"section a, point 3 at byte offset {at}: a coordinate "
                                             r"not below p, or not on the G1 curve \(found on the device\)"):
        backend.load(pk, cr)
    assert pk.circuit_digest not in backend._on_device
    g = lay.sections["b_g2"].offset(4)
    data = bytearray((d / "host.params").read_bytes())
    data[g] |= 0x40                                     # the infinity flag
    path.write_bytes(bytes(data))
    with pytest.raises(KeyFormatError, match=rf"section b_g2, point 4 at byte offset {g}: a flag bit is "
                                             r"set .*\(found on the device\)"):
        backend.load(bp.read_params(path, cr, points="none"), cr)
    # on the curve, not in the subgroup: taken with "curve", refused with "full"
    x = 5
    while True:
        rhs = (x ** 3 + 4) % bp.FQ_MODULUS
        y = pow(rhs, (bp.FQ_MODULUS + 1) // 4, bp.FQ_MODULUS)
        if y * y % bp.FQ_MODULUS == rhs:
            raw = np.frombuffer(x.to_bytes(48, "little") + y.to_bytes(48, "little"), np.uint8).reshape(1, 96)
            if bp.first_bad(raw, 1, "full")[0] == 0:
                break
        x += 1
    h = lay.sections["h"].offset(2)
    data = bytearray((d / "host.params").read_bytes())
    data[h:h + 96] = x.to_bytes(48, "big") + y.to_bytes(48, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(KeyFormatError, match=rf"section h, point 2 at byte offset {h}: not in the "
                                             r"prime-order subgroup \(found on the device\)"):
        backend.load(bp.read_params(path, cr, points="full"), cr)
    backend.load(bp.read_params(path, cr, points="curve"), cr)  # "curve" does not look
    backend.unload(pk.circuit_digest)


@pytest.mark.parametrize("host_convert", ["0", "1"])
def test_a_zero_filled_point_refused_on_the_way_to_the_device(backend, files, tmp_path, monkeypatch,
                                                              host_convert):
    """All 96 bytes zero is our layout's identity, which load_bases would take: refused on the
    host as the chunk is read, naming the section and offset (issue 39)."""
    monkeypatch.setenv("ZKHIVE_PARAMS_HOST_CONVERT", host_convert)
    d, cr = files
    at = bp.scan(d / "host.params").sections["l"].offset(1)
    data = bytearray((d / "host.params").read_bytes())
    data[at:at + 96] = bytes(96)
    path = tmp_path / "zero.params"
    path.write_bytes(bytes(data))
    pk = bp.read_params(path, cr, points="none")
    with pytest.raises(KeyFormatError, match=rf"section l, point 1 at byte offset {at}: every byte zero"):
        backend.load(pk, cr)
    assert pk.circuit_digest not in backend._on_device


def test_densities_later_stream_the_same_key_and_refuse_a_wrong_a_length_before_its_buffer(backend, files, tmp_path):
    """Issue 40 item 3 (the prover's load, cluster/pipeline/keys.py): read_params(later=True)
    computes the densities on a thread while the CUDA Resident fills h and l first; the proof
    equals the one of the key read the old way. A file whose a is one longer and b_g1 one
    shorter (the same size) is refused at a's turn, naming section a and its length field,
    with nothing left booked or allocated."""
    from gpu.cuda.memory import DeviceBuffer
    d, cr = files
    z = witness(9)
    blob = assignment.encode(z)
    r, s = random.randrange(1, F.MODULUS), random.randrange(1, F.MODULUS)
    pk_now = bp.read_params(d / "host.params", cr)
    want = prove(pk_now, cr, blob, backend=backend, r=r, s=s).to_bytes()
    backend.unload(pk_now.circuit_digest)
    fresh = toy(9)   # no Shape cached on it: the densities on their thread
    pk_later = bp.read_params(d / "host.params", fresh, later=True)
    assert prove(pk_later, fresh, blob, backend=backend, r=r, s=s).to_bytes() == want
    backend.unload(pk_later.circuit_digest)

    lay = bp.scan(d / "host.params")
    a, b = lay.sections["a"], lay.sections["b_g1"]
    buf = (d / "host.params").read_bytes()
    path = tmp_path / "moved.params"
    path.write_bytes(buf[:a.start - 4] + (a.count + 1).to_bytes(4, "big") + buf[a.start:a.end]
                     + buf[b.start:b.start + 96] + (b.count - 1).to_bytes(4, "big")
                     + buf[b.start + 96:])
    if backend._split is not None:   # the engines made afresh by this load, on their thread:
        backend._split.close_engines_since(set())   # a failed load drops them with it
    live = DeviceBuffer.live
    pk_bad = bp.read_params(path, toy(9), later=True)
    with pytest.raises(KeyFormatError, match=rf"section a: the length field at byte offset "
                                             rf"{a.start - 4} says {a.count + 1} points"):
        backend.load(pk_bad, cr)
    assert DeviceBuffer.live == live and backend.held_bytes(pk_bad.circuit_digest) is None


def test_the_matrices_and_engines_are_made_beside_the_sections_and_prove_the_same(backend, files, monkeypatch):
    """gpu/backends/cuda.py load: the compact matrices and the split MSM's engines made on a
    thread while the sections stream in (phases "... (beside the reads)", then the load waits
    for them), the proof the one the serial order (ZKHIVE_ENGINES_BESIDE_READS=0: phases
    "matrices to the device", "tail engines") makes."""
    import time

    from gpu import phases
    d, cr = files
    z = witness(9)
    blob = assignment.encode(z)
    r, s = random.randrange(1, F.MODULUS), random.randrange(1, F.MODULUS)
    got = {}
    for beside in ("1", "0"):
        monkeypatch.setenv("ZKHIVE_ENGINES_BESIDE_READS", beside)
        if backend._split is not None:   # made again by this load, not found from the last
            backend._split.close_engines_since(set())
        rec = phases.Phases(origin=time.time())
        c9 = toy(9)   # no Shape cached: the densities on their thread too
        pk = bp.read_params(d / "host.params", c9, later=True)
        with phases.collect(rec):
            got[beside] = prove(pk, c9, blob, backend=backend, r=r, s=s)
        backend.unload(pk.circuit_digest)
        names = rec.as_dict()
        if beside == "1":
            assert "tail engines (beside the reads)" in names and "waited for the tail engines" in names
            assert "matrices to the device (beside the reads)" in names, names
            assert "waited for the matrices" in names, names
            assert "tail engines" not in names and "matrices to the device" not in names, names
        else:
            assert "tail engines" in names and "tail engines (beside the reads)" not in names, names
            assert "matrices to the device" in names, names
    assert got["1"].to_bytes() == got["0"].to_bytes()
    vk = bp.read_vk(d / "host.vk", circuit=cr)
    pub = F.vec_to_ints(z[1:2])
    assert verify(vk, pub, got["1"]) and not verify(vk, [pub[0] ^ 1], got["1"])
