"""Compressed points (gpu/groth16/compress.py) against arkworks' encoding, on the host build of
the decompression the device runs (gpu/kernels/decompress.cuh), and key files of format 2."""
from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gpu.groth16 import KeyFormatError
from gpu.groth16.compress import compress, decompress
from gpu.groth16.points import PointArray
from synthesis.field import MODULUS

GROUPS = {1: G1Point, 2: G2Point}


def points(P, n):
    rnd = random.Random()
    return [P() * Scalar(rnd.randrange(MODULUS)) for _ in range(n)] + [P.identity(), P(), -P()]


@pytest.mark.parametrize("kind", [1, 2])
def test_compress_is_arkworks_and_decompress_inverts_it(kind):
    P = GROUPS[kind]
    pts = points(P, 40)
    pa = PointArray.from_points(P, pts)
    c = compress(pa.raw, kind)
    ref = np.frombuffer(b"".join(p.to_compressed_bytes() for p in pts), dtype=np.uint8)
    assert np.array_equal(c.reshape(-1), ref)
    assert np.array_equal(decompress(c, kind, device=False), pa.raw)
    # and arkworks reads ours
    assert [P.from_compressed_bytes(bytes(row)) for row in c] == pts


@pytest.mark.parametrize("kind", [1, 2])
def test_points_that_do_not_decompress_are_named(kind):
    P = GROUPS[kind]
    c = compress(PointArray.from_points(P, points(P, 6)).raw, kind)
    cases = {}
    no_flag = c.copy(); no_flag[2, 0] &= 0x7F; cases["compression flag"] = (no_flag, 2)
    inf = c.copy(); inf[6] = 0; inf[6, 0] = 0xC0; inf[6, 9] = 1; cases["infinity + bits"] = (inf, 6)
    big = c.copy(); big[4, 0] = 0x9F; big[4, 1:48] = 0xFF; cases["x >= p"] = (big, 4)
    for what, (bad, idx) in cases.items():
        with pytest.raises(KeyFormatError, match=rf"sec: point {idx + 10} does not decompress"):
            decompress(bad, kind, device=False, where="sec", first=10)
    # an x that is on no curve point: about half of all x are; a few tries find one
    for t in range(64):
        off = c.copy()
        off[1, 47] ^= (t + 1) & 0xFF
        try:
            d = decompress(off, kind, device=False)
        except KeyFormatError as e:
            assert "point 1 " in str(e)
            break
        assert not np.array_equal(d[1], decompress(c, kind, device=False)[1])
    else:
        pytest.fail("64 altered x all decompressed")


def test_key_files_are_compressed_and_version_1_files_still_read(tmp_path):
    from gpu import prove, setup, verify
    from gpu.groth16 import ProvingKey, keys
    from synthesis.builder import ConstraintSystem

    cs = ConstraintSystem()
    x = cs.alloc_input(3)
    y = cs.alloc(9)
    cs.enforce(x.lc(), x.lc(), y.lc(), "square")
    r1cs = cs.to_r1cs()
    pk, vk = setup(r1cs)
    pk.save(tmp_path / "pk2")
    meta = keys.read_header(tmp_path / "pk2")
    n_g1 = sum(len(getattr(pk, q)) for q in ("a_query", "b_g1_query", "h_query", "l_query",
                                                 "gamma_abc_g1")) + 3  # alpha, beta, delta
    n_g2 = len(pk.b_g2_query) + 3                                      # beta, gamma, delta
    assert (tmp_path / "pk2").stat().st_size == meta["header_len"] + 48 * n_g1 + 96 * n_g2
    pk2 = ProvingKey.load(tmp_path / "pk2")
    for q in ("a_query", "b_g1_query", "b_g2_query", "h_query", "l_query"):
        assert getattr(pk2, q) == getattr(pk, q)
    assert verify(vk, [3], prove(pk2, r1cs, cs.assignment()))
    # a version-1 file (uncompressed) written by the previous zkhive
    old = (keys.FORMAT_VERSION, keys.WIDTHS[2])
    try:
        keys.FORMAT_VERSION, keys.WIDTHS[2] = 1, keys.WIDTHS[1]
        keys._section_bytes, saved = _v1_sections, keys._section_bytes
        pk.save(tmp_path / "pk1")
    finally:
        keys.FORMAT_VERSION, keys.WIDTHS[2] = old
        keys._section_bytes = saved
    assert (tmp_path / "pk1").stat().st_size > (tmp_path / "pk2").stat().st_size
    assert ProvingKey.load(tmp_path / "pk1").b_g2_query == pk.b_g2_query


def _v1_sections(obj, name, pkind):
    v = getattr(obj, name)
    if isinstance(v, PointArray):
        return len(v), iter([v.raw.tobytes()])
    return 1, iter([v.to_xy_bytes_le()])
