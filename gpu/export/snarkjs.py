"""snarkjs's JSON for Groth16 over BLS12-381: ``verification_key.json``, ``proof.json``,
``public.json``, so that ``snarkjs groth16 verify`` (npm snarkjs 0.7.6) checks our proofs.

The layout is the one snarkjs itself writes (``src/zkey_export_verificationkey.js``,
``src/groth16_prove.js``) and reads (``src/groth16_verify.js``, through ffjavascript's
``G1.fromObject``): integers as decimal strings, points in affine coordinates with a third
projective coordinate,

    G1: [x, y, "1"]                                 identity: ["0", "1", "0"]
    G2: [[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]    identity: [["0","0"], ["1","0"], ["0","0"]]

where an Fq2 element is c0 + c1 u. ``to_xy_bytes_be`` of py_arkworks_bls12381 lays a G2 point
out as x.c0 || x.c1 || y.c0 || y.c1 (48 bytes each, big-endian): checked against the generator
coordinates snarkjs and py_ecc use (tests/unit/test_snarkjs_format.py).

snarkjs's verifier checks e(-A, B) e(alpha, beta) e(IC, gamma) e(C, delta) == 1 with
IC = IC[0] + sum x_i IC[i]: our equation (gpu/groth16/verifier.py), so our keys need no change.
``vk_alphabeta_12`` (e(alpha, beta) in GT, which snarkjs's own export adds) is not written: the
verifier never reads it and py_arkworks_bls12381 cannot serialise a GT element.

Reading (``*_from_json``) decodes with full checks (on the curve, in the subgroup): files from
another prover are untrusted input.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from py_arkworks_bls12381 import G1Point, G2Point

from synthesis import field

#: The curve name snarkjs uses for BLS12-381 (ffjavascript's ``curve.name``).
CURVE = "bls12381"
PROTOCOL = "groth16"
#: q, the BLS12-381 base field modulus.
FQ_MODULUS = int(
    "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab",
    16)
FQ_BYTES = 48
FILES = ("verification_key.json", "proof.json", "public.json")


class SnarkjsFormatError(ValueError):
    """A snarkjs JSON document (or a value for one) is malformed; the message names the field."""


# --- points ----------------------------------------------------------------------------------

def _coords_be(raw: bytes) -> list[int]:
    return [int.from_bytes(raw[i:i + FQ_BYTES], "big") for i in range(0, len(raw), FQ_BYTES)]


def g1_to_json(p: G1Point) -> list[str]:
    if p == G1Point.identity():
        return ["0", "1", "0"]
    x, y = _coords_be(p.to_xy_bytes_be())
    return [str(x), str(y), "1"]


def g2_to_json(p: G2Point) -> list[list[str]]:
    if p == G2Point.identity():
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    x0, x1, y0, y1 = _coords_be(p.to_xy_bytes_be())
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def _fq(value: Any, what: str) -> int:
    """A decimal string (or int) below q."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SnarkjsFormatError(f"{what}: expected a decimal string, got {type(value).__name__}")
    try:
        x = int(value, 10) if isinstance(value, str) else value
    except ValueError:
        raise SnarkjsFormatError(f"{what}: {value!r} is not a decimal integer") from None
    if not 0 <= x < FQ_MODULUS:
        raise SnarkjsFormatError(f"{what}: {value} is not below the base field modulus q")
    return x


def _shape(value: Any, n: int, what: str) -> list:
    if not isinstance(value, list) or len(value) != n:
        raise SnarkjsFormatError(f"{what}: expected a list of {n}, got {json.dumps(value)[:80]}")
    return value


def g1_from_json(value: Any, what: str = "G1 point") -> G1Point:
    x, y, z = (_fq(c, f"{what}[{i}]") for i, c in enumerate(_shape(value, 3, what)))
    if z == 0:
        return G1Point.identity()
    if z != 1:
        raise SnarkjsFormatError(f"{what}: the third coordinate must be 1 (affine) or 0 (identity)")
    raw = x.to_bytes(FQ_BYTES, "big") + y.to_bytes(FQ_BYTES, "big")
    try:
        return G1Point.from_xy_bytes_be(raw)  # checked: on the curve and in the subgroup
    except Exception as e:
        raise SnarkjsFormatError(f"{what}: not a point of the G1 subgroup ({e})") from None


def g2_from_json(value: Any, what: str = "G2 point") -> G2Point:
    coords = [[_fq(c, f"{what}[{i}][{j}]") for j, c in enumerate(_shape(pair, 2, f"{what}[{i}]"))]
              for i, pair in enumerate(_shape(value, 3, what))]
    (x0, x1), (y0, y1), z = coords
    if z == [0, 0]:
        return G2Point.identity()
    if z != [1, 0]:
        raise SnarkjsFormatError(f"{what}: the third coordinate must be [1, 0] (affine) or "
                                 "[0, 0] (identity)")
    raw = b"".join(c.to_bytes(FQ_BYTES, "big") for c in (x0, x1, y0, y1))
    try:
        return G2Point.from_xy_bytes_be(raw)
    except Exception as e:
        raise SnarkjsFormatError(f"{what}: not a point of the G2 subgroup ({e})") from None


# --- documents -------------------------------------------------------------------------------

def verification_key_json(vk) -> dict:
    """A gpu.groth16.VerifyingKey as snarkjs's verification_key.json."""
    return {
        "protocol": PROTOCOL,
        "curve": CURVE,
        "nPublic": vk.num_public,
        "vk_alpha_1": g1_to_json(vk.alpha_g1),
        "vk_beta_2": g2_to_json(vk.beta_g2),
        "vk_gamma_2": g2_to_json(vk.gamma_g2),
        "vk_delta_2": g2_to_json(vk.delta_g2),
        "IC": [g1_to_json(p) for p in vk.gamma_abc_g1],
    }


def proof_json(proof) -> dict:
    """A gpu.groth16.Proof as snarkjs's proof.json."""
    return {"pi_a": g1_to_json(proof.a), "pi_b": g2_to_json(proof.b), "pi_c": g1_to_json(proof.c),
            "protocol": PROTOCOL, "curve": CURVE}


def public_json(public_inputs: Iterable[int]) -> list[str]:
    """Public inputs (without the leading 1) as snarkjs's public.json: decimal strings."""
    out = []
    for i, x in enumerate(public_inputs):
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < field.MODULUS:
            raise SnarkjsFormatError(f"public input {i} is not a canonical Fr element: {x!r}")
        out.append(str(x))
    return out


def _header(doc: Any, what: str) -> dict:
    if not isinstance(doc, dict):
        raise SnarkjsFormatError(f"{what}: expected a JSON object")
    for key, want in (("protocol", PROTOCOL), ("curve", CURVE)):
        if doc.get(key) != want:
            raise SnarkjsFormatError(f"{what}: field {key!r} is {doc.get(key)!r}, expected {want!r}")
    return doc


def verifying_key_from_json(doc: Any, circuit_digest: bytes = b"\0" * 32):
    """snarkjs's verification_key.json as a gpu.groth16.VerifyingKey. snarkjs keys carry no
    zkhive circuit digest: pass the R1CS digest when the circuit is known."""
    from gpu.groth16 import VerifyingKey

    doc = _header(doc, "verification key")
    ic = doc.get("IC")
    if not isinstance(ic, list) or not ic:
        raise SnarkjsFormatError("verification key: field 'IC' must be a non-empty list")
    if doc.get("nPublic") != len(ic) - 1:
        raise SnarkjsFormatError(f"verification key: nPublic is {doc.get('nPublic')!r} but IC has "
                                 f"{len(ic)} points (nPublic + 1 expected)")
    return VerifyingKey(
        alpha_g1=g1_from_json(doc.get("vk_alpha_1"), "vk_alpha_1"),
        beta_g2=g2_from_json(doc.get("vk_beta_2"), "vk_beta_2"),
        gamma_g2=g2_from_json(doc.get("vk_gamma_2"), "vk_gamma_2"),
        delta_g2=g2_from_json(doc.get("vk_delta_2"), "vk_delta_2"),
        gamma_abc_g1=[g1_from_json(p, f"IC[{i}]") for i, p in enumerate(ic)],
        circuit_digest=circuit_digest)


def proof_from_json(doc: Any):
    """snarkjs's proof.json as a gpu.groth16.Proof."""
    from gpu.groth16 import Proof

    doc = _header(doc, "proof")
    return Proof(g1_from_json(doc.get("pi_a"), "pi_a"), g2_from_json(doc.get("pi_b"), "pi_b"),
                 g1_from_json(doc.get("pi_c"), "pi_c"))


def public_from_json(doc: Any) -> list[int]:
    if not isinstance(doc, list):
        raise SnarkjsFormatError("public inputs: expected a JSON list of decimal strings")
    out = []
    for i, v in enumerate(doc):
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise SnarkjsFormatError(f"public input {i}: expected a decimal string")
        try:
            x = int(v, 10) if isinstance(v, str) else v
        except ValueError:
            raise SnarkjsFormatError(f"public input {i}: {v!r} is not a decimal integer") from None
        if not 0 <= x < field.MODULUS:
            raise SnarkjsFormatError(f"public input {i}: {v} is not below the Fr modulus")
        out.append(x)
    return out


# --- files -----------------------------------------------------------------------------------

def _write_json(path: Path, doc) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)  # never leave a half-written file where snarkjs would read it


def export(vk, proof, public_inputs, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write verification_key.json, proof.json, public.json into ``out_dir`` (created if
    missing); returns their paths by file name. Checks the input count against the key first,
    since snarkjs would silently read only as many IC points as there are inputs."""
    public = public_json(public_inputs)
    if len(public) != vk.num_public:
        raise SnarkjsFormatError(f"the verifying key takes {vk.num_public} public inputs, "
                                 f"got {len(public)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs = dict(zip(FILES, (verification_key_json(vk), proof_json(proof), public)))
    paths = {}
    for name, doc in docs.items():
        paths[name] = out / name
        _write_json(paths[name], doc)
    return paths
