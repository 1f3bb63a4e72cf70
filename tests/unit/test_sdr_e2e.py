"""The SDR family end to end on its smallest set (sdr-256k, 2^18 domain) with the CPU backend:
partitions prove and verify with our verifier and with ``snarkjs groth16 verify``; a proof fails
against other public inputs; the command line (sector new, c1, synth, prove, verify) works and
names a tampered input before proving."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster.cli import main
from cluster.pipeline.keys import KeyCache
from synthesis.circuits import get_circuit
from synthesis.sdr import TINY, c1_document, generate, interactive_seed

# the CPU trusted setup of 193k variables and the proofs take minutes on a 2-core machine (the
# setup's fixed-base multiplications: gpu/native/fixed_base_cpu.cpp): slow, with its own time limit
pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]

SEED = b"\x51" * 32
ROOT = Path(__file__).resolve().parents[2]
SNARKJS = ROOT / "node_modules" / ".bin" / "snarkjs"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """One CPU setup of sdr-256k (~1 min on 2 cores), shared by the tests here."""
    cache = KeyCache(tmp_path_factory.mktemp("keys"))
    cache.setup(get_circuit(TINY))
    return cache


@pytest.fixture(scope="module")
def proved(keys):
    from gpu import prove, verify

    circuit = get_circuit(TINY)
    pk, vk = keys.load_pk(circuit), keys.load_vk(circuit)
    sector = generate(circuit.prm, SEED)
    c1 = circuit.parse_c1(c1_document(sector, interactive_seed(sector)))
    pub = circuit.public_inputs(c1, 1)
    proof = prove(pk, circuit.r1cs(), circuit.synthesize(c1, 1), backend="cpu")
    assert verify(vk, pub, proof)
    return vk, pub, proof


def test_a_partition_proves_and_verifies_and_is_bound_to_its_inputs(proved):
    from gpu import verify

    vk, pub, proof = proved
    assert not verify(vk, [pub[0] + 1, *pub[1:]], proof)  # another replica id
    assert not verify(vk, [pub[0], pub[1] + 1, *pub[2:]], proof)  # another comm_d
    assert not verify(vk, [*pub[:3], pub[3] % 7 + 1, *pub[4:]], proof)  # another challenge


@pytest.mark.snarkjs
def test_snarkjs_verifies_the_sdr_proof_and_rejects_a_wrong_input(proved, tmp_path):
    from gpu.export import snarkjs

    if not shutil.which("node") or not SNARKJS.exists():
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("snarkjs is required in CI: run `npm ci`")
        pytest.skip("snarkjs is not installed (npm ci)")
    vk, pub, proof = proved
    snarkjs.export(vk, proof, pub, tmp_path)
    args = [str(SNARKJS), "groth16", "verify", "verification_key.json", "public.json", "proof.json"]
    res = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "OK!" in res.stdout, res.stdout + res.stderr
    wrong = [*pub[:2], pub[2] ^ 1, *pub[3:]]  # another comm_r
    (tmp_path / "public.json").write_text(json.dumps(snarkjs.public_json(wrong)))
    res = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "Invalid proof" in res.stdout + res.stderr


def test_command_line_sector_to_verified_proof(keys, tmp_path, capsys):
    sector, c1 = tmp_path / "sector", tmp_path / "c1.json"
    assert main(["sector", "new", "--params", TINY, "--seed", "sdr", "--out", str(sector)]) == 0
    assert json.loads((sector / "sector.json").read_text())["family"] == "sdr"
    assert main(["sector", "c1", str(sector), "--out", str(c1)]) == 0
    assert main(["synth", str(c1), "--partition", "0", "--check"]) == 0
    assert "satisfies the R1CS" in capsys.readouterr().out
    proof = tmp_path / "proof.bin"
    assert main(["prove", str(c1), "--out", str(proof), "--keys", str(keys.root), "--backend", "cpu"]) == 0
    assert proof.stat().st_size == 2 * 192
    assert main(["verify", str(c1), str(proof), "--keys", str(keys.root)]) == 0
    assert main(["sector", "c1", "--schema", "--family", "sdr"]) == 0
    assert '"const": "sdr"' in capsys.readouterr().out

    doc = json.loads(c1.read_text())
    lab = doc["partitions"][1]["challenges"][0]["column"][0]
    doc["partitions"][1]["challenges"][0]["column"][0] = f"0x{int(lab, 16) ^ 4:064x}"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["prove", str(bad), "--out", str(tmp_path / "p2.bin"), "--keys", str(keys.root),
                 "--backend", "cpu"]) != 0
    err = capsys.readouterr().err
    assert "partition 1" in err and "challenge 0, layer 1" in err and "column[0]" in err
