"""The real ``snarkjs groth16 verify`` (npm snarkjs 0.7.6, from package-lock.json) on our exported
files, and snarkjs's own prover on our .r1cs / .wtns / test-only .ptau, checked by our verifier.

In CI (CI=true) a missing snarkjs is a failure: run ``npm ci`` at the repository root. Elsewhere
the tests skip without it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gpu import prove, setup, verify
from gpu.export import iden3, ptau, snarkjs
from gpu.groth16.qap import domain_size
from synthesis import field
from synthesis.builder import ConstraintSystem

pytestmark = pytest.mark.snarkjs

ROOT = Path(__file__).resolve().parents[2]
SNARKJS = ROOT / "node_modules" / ".bin" / "snarkjs"


@pytest.fixture(scope="module")
def snarkjs_bin() -> Path:
    missing = None
    if not shutil.which("node"):
        missing = "node is not installed"
    elif not SNARKJS.exists():
        missing = f"{SNARKJS} is missing: run `npm ci` at the repository root"
    if missing:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"snarkjs is required in CI: {missing}")
        pytest.skip(missing)
    return SNARKJS


def run_snarkjs(exe: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def chain_circuit(x: int, steps: int, offset: int = 5):
    """x public; v_{i+1} = (v_i + offset) * (v_i + x); y = v_steps public. Random x gives
    full-size field values everywhere."""
    cs = ConstraintSystem()
    xv = cs.alloc_input(x)
    y_val = x
    vals = []
    for _ in range(steps):
        y_val = (y_val + offset) * (y_val + x) % field.MODULUS
        vals.append(y_val)
    yv = cs.alloc_input(vals[-1])
    prev = xv
    for v in vals:
        cur = cs.alloc(v)
        cs.enforce(prev + offset, prev + xv, cur)
        prev = cur
    cs.enforce(prev, 1, yv, "output")
    return cs.to_r1cs(), cs.assignment(), cs.public_inputs()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Our key and proof for a small circuit with a random input, exported for snarkjs."""
    r1cs, z, public = chain_circuit(field.random_element(), steps=6)
    pk, vk = setup(r1cs)
    proof = prove(pk, r1cs, z)
    assert verify(vk, public, proof)
    out = tmp_path_factory.mktemp("ours")
    snarkjs.export(vk, proof, public, out)
    return {"dir": out, "r1cs": r1cs, "z": z, "public": public, "pk": pk, "vk": vk, "proof": proof}


def verify_in(exe: Path, d: Path) -> subprocess.CompletedProcess:
    return run_snarkjs(exe, "groth16", "verify", "verification_key.json", "public.json",
                       "proof.json", cwd=d)


def copy_export(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for name in snarkjs.FILES:
        shutil.copy(src / name, dst / name)
    return dst


def test_snarkjs_accepts_our_proof(snarkjs_bin, ours):
    res = verify_in(snarkjs_bin, ours["dir"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "OK!" in res.stdout


@pytest.mark.parametrize("element", ["pi_a", "pi_b", "pi_c"])
def test_snarkjs_rejects_a_tampered_proof(snarkjs_bin, ours, tmp_path, element):
    # a valid point in place of the right one: the file parses, so only the pairing rejects it
    d = copy_export(ours["dir"], tmp_path / "t")
    doc = json.loads((d / "proof.json").read_text())
    two = Scalar.from_le_bytes((2).to_bytes(32, "little"))
    p = ours["proof"]
    doc[element] = {"pi_a": lambda: snarkjs.g1_to_json(p.a * two),
                    "pi_b": lambda: snarkjs.g2_to_json(p.b * two),
                    "pi_c": lambda: snarkjs.g1_to_json(p.c * two)}[element]()
    (d / "proof.json").write_text(json.dumps(doc))
    res = verify_in(snarkjs_bin, d)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Invalid proof" in res.stdout + res.stderr


def test_snarkjs_rejects_a_wrong_public_input(snarkjs_bin, ours, tmp_path):
    d = copy_export(ours["dir"], tmp_path / "t")
    wrong = list(ours["public"])
    wrong[1] = (wrong[1] + 1) % field.MODULUS
    (d / "public.json").write_text(json.dumps(snarkjs.public_json(wrong)))
    res = verify_in(snarkjs_bin, d)
    assert res.returncode == 1, res.stdout + res.stderr


def test_snarkjs_rejects_a_proof_for_another_circuit(snarkjs_bin, ours, tmp_path):
    r1cs, z, public = chain_circuit(field.random_element(), steps=6, offset=9)
    pk, vk = setup(r1cs)
    d = tmp_path / "other"
    # the other circuit's proof and inputs against the first circuit's key
    snarkjs.export(ours["vk"], prove(pk, r1cs, z), public, d)
    res = verify_in(snarkjs_bin, d)
    assert res.returncode == 1, res.stdout + res.stderr


def test_snarkjs_checks_our_r1cs_and_witness(snarkjs_bin, ours, tmp_path):
    iden3.write_r1cs(ours["r1cs"], tmp_path / "c.r1cs")
    iden3.write_wtns(ours["z"], tmp_path / "good.wtns")
    bad = ours["z"].copy()
    bad[4] = field.vec_from_ints([field.vec_to_ints(bad[4:5])[0] + 1])[0]  # an aux value
    iden3.write_wtns(bad, tmp_path / "bad.wtns")

    info = run_snarkjs(snarkjs_bin, "r1cs", "info", "c.r1cs", cwd=tmp_path)
    assert info.returncode == 0, info.stdout + info.stderr
    assert f"# of Constraints: {ours['r1cs'].num_constraints}" in info.stdout
    assert f"# of Wires: {ours['r1cs'].num_variables}" in info.stdout
    assert "# of Public Inputs: 2" in info.stdout

    good = run_snarkjs(snarkjs_bin, "wtns", "check", "c.r1cs", "good.wtns", cwd=tmp_path)
    assert good.returncode == 0 and "WITNESS IS CORRECT" in good.stdout, good.stdout + good.stderr
    res = run_snarkjs(snarkjs_bin, "wtns", "check", "c.r1cs", "bad.wtns", cwd=tmp_path)
    assert res.returncode == 1 and "WITNESS IS NOT CORRECT" in res.stdout + res.stderr


# spare 0: the circuit's domain fills the ptau, so snarkjs takes H from its last Lagrange level
@pytest.mark.parametrize("spare", [0, 1])
def test_snarkjs_proves_from_our_files_and_we_verify(snarkjs_bin, ours, tmp_path, spare):
    """snarkjs setup + prove on our .r1cs, .wtns and test-only .ptau; its proof must pass our
    verifier (through our JSON reader) and fail on a wrong input."""
    tau, alpha, beta = (field.random_element() for _ in range(3))
    power = domain_size(ours["r1cs"]).bit_length() - 1 + spare
    ptau.write_test_ptau(tmp_path / "t.ptau", power, tau=tau, alpha=alpha, beta=beta, workers=1)
    iden3.write_r1cs(ours["r1cs"], tmp_path / "c.r1cs")
    iden3.write_wtns(ours["z"], tmp_path / "w.wtns")
    for args in (("groth16", "setup", "c.r1cs", "t.ptau", "c.zkey"),
                 ("groth16", "prove", "c.zkey", "w.wtns", "proof.json", "public.json"),
                 ("zkey", "export", "verificationkey", "c.zkey", "verification_key.json")):
        res = run_snarkjs(snarkjs_bin, *args, cwd=tmp_path)
        assert res.returncode == 0, f"snarkjs {' '.join(args)}:\n{res.stdout}{res.stderr}"

    load = lambda name: json.loads((tmp_path / name).read_text())  # noqa: E731
    vk = snarkjs.verifying_key_from_json(load("verification_key.json"))
    proof = snarkjs.proof_from_json(load("proof.json"))
    public = snarkjs.public_from_json(load("public.json"))
    assert public == ours["public"]
    # the zkey took alpha and beta from our ptau: both ends agree on the points
    assert vk.alpha_g1 == G1Point() * Scalar.from_le_bytes(alpha.to_bytes(32, "little"))
    assert vk.beta_g2 == G2Point() * Scalar.from_le_bytes(beta.to_bytes(32, "little"))
    assert verify(vk, public, proof)
    assert not verify(vk, [public[0], (public[1] + 1) % field.MODULUS], proof)
