"""Proof decoding refuses points outside the prime-order subgroup, not only points off the curve.

BLS12-381's curves have large cofactors: most x coordinates that give a curve point give one
outside the subgroup of order r, where Groth16's soundness argument does not hold (small-subgroup
attacks). An unchecked decoder (``from_compressed_bytes_unchecked``, ``from_xy_bytes_unchecked_be``)
accepts them; these tests build such points (on the curve, checked by py_ecc, not killed by r)
and expect every decoder of untrusted proof bytes to refuse them, naming the element.
"""
from __future__ import annotations

import pytest
from py_arkworks_bls12381 import G1Point, G2Point
from py_ecc.bls.point_compression import decompress_G1, decompress_G2
from py_ecc.optimized_bls12_381 import b, b2, curve_order, is_inf, is_on_curve, multiply, normalize

from gpu.export.snarkjs import SnarkjsFormatError, g1_from_json, g2_from_json, proof_from_json, proof_json
from gpu.groth16 import PROOF_BYTES, Proof, ProofFormatError, split_proofs
from gpu.groth16.curve import g1, g2

FLAGS = 1 << 383  # ZCash compressed flag on the first byte; sign bit clear


def _outside_g1() -> tuple[bytes, tuple[int, int]]:
    """48 compressed bytes of a G1 curve point outside the r-subgroup, and its affine (x, y)."""
    for x in range(1, 1000):
        try:
            p = decompress_G1(FLAGS | x)
        except ValueError:
            continue  # x^3 + 4 is not a square
        assert is_on_curve(p, b)
        if not is_inf(multiply(p, curve_order)):
            x_, y_ = normalize(p)
            return (FLAGS | x).to_bytes(48, "big"), (int(x_), int(y_))
    raise AssertionError("no G1 point outside the subgroup found")


def _outside_g2() -> tuple[bytes, tuple]:
    """96 compressed bytes (x1 with the flags, then x0) of a G2 curve point outside the
    r-subgroup, and its affine ((x0, x1), (y0, y1))."""
    for x0 in range(1, 1000):
        try:
            p = decompress_G2((FLAGS | 1, x0))  # x = x0 + 1 u
        except ValueError:
            continue
        assert is_on_curve(p, b2)
        if not is_inf(multiply(p, curve_order)):
            x_, y_ = normalize(p)
            return ((FLAGS | 1).to_bytes(48, "big") + x0.to_bytes(48, "big"),
                    (tuple(int(c) for c in x_.coeffs), tuple(int(c) for c in y_.coeffs)))
    raise AssertionError("no G2 point outside the subgroup found")


@pytest.fixture(scope="module")
def outside():
    return {"g1": _outside_g1(), "g2": _outside_g2()}


def _valid_proof() -> bytes:
    return Proof(g1(), g2(), g1()).to_bytes()


def test_the_points_are_on_the_curve_and_the_unchecked_decoder_takes_them(outside):
    """The test points are what the checks are for: the unchecked decoder accepts them (so a
    decoder that skipped the subgroup check would too), the checked one refuses them."""
    g1raw, g2raw = outside["g1"][0], outside["g2"][0]
    assert not G1Point.from_compressed_bytes_unchecked(g1raw).is_in_subgroup()
    assert not G2Point.from_compressed_bytes_unchecked(g2raw).is_in_subgroup()
    assert G1Point.from_compressed_bytes_unchecked(g1().to_compressed_bytes()).is_in_subgroup()
    with pytest.raises(ValueError):
        G1Point.from_compressed_bytes(g1raw)


@pytest.mark.parametrize("element, off", [("A", 0), ("B", 48), ("C", 144)])
def test_a_proof_element_outside_the_subgroup_is_refused(outside, element, off):
    raw = bytearray(_valid_proof())
    assert Proof.from_bytes(bytes(raw)) == Proof(g1(), g2(), g1())  # the accepting side
    point = outside["g2" if element == "B" else "g1"][0]
    raw[off:off + len(point)] = point
    size = len(point)
    with pytest.raises(ProofFormatError,
                       match=rf"^proof element {element} \(bytes {off}\.\.{off + size}\) is not a "
                             r"valid compressed point"):
        Proof.from_bytes(bytes(raw))
    # inside a multi-partition proof too (partition 1 of 2)
    with pytest.raises(ProofFormatError, match=rf"^proof element {element} "):
        split_proofs(_valid_proof() + bytes(raw))
    assert len(raw) == PROOF_BYTES


def test_snarkjs_points_outside_the_subgroup_are_refused(outside):
    (x, y) = outside["g1"][1]
    (x0, x1), (y0, y1) = outside["g2"][1]
    g1json = [str(x), str(y), "1"]
    g2json = [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]
    with pytest.raises(SnarkjsFormatError, match=r"^pi_a: not a point of the G1 subgroup"):
        g1_from_json(g1json, "pi_a")
    with pytest.raises(SnarkjsFormatError, match=r"^pi_b: not a point of the G2 subgroup"):
        g2_from_json(g2json, "pi_b")
    # the accepting side, and a whole proof document with pi_c swapped for the bad point
    good = proof_json(Proof(g1(), g2(), g1()))
    assert proof_from_json(good) == Proof(g1(), g2(), g1())
    with pytest.raises(SnarkjsFormatError, match=r"^pi_c: not a point of the G1 subgroup"):
        proof_from_json(dict(good, pi_c=g1json))


def test_a_decoded_proof_is_immutable_and_hashable():
    """What was decoded (and checked) is what is verified: the points cannot be swapped on the
    object afterwards, and proofs can key a dict (first writer wins per partition)."""
    import dataclasses

    p = Proof.from_bytes(_valid_proof())
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
        p.a = g1()
    assert {p: 1}[Proof.from_bytes(_valid_proof())] == 1
