"""porep-lite end to end with the CPU backend: the tiny set's partitions prove and verify, a
proof fails against other public inputs; and the command line (sector new, c1, synth, prove,
verify) works for it as the README shows."""
import json

import pytest

from cluster.cli import main
from cluster.pipeline.keys import KeyCache
from synthesis.circuits import get_circuit
from synthesis.porep import TINY, c1_document, generate

SEED, CHALLENGE_SEED = b"\x31" * 32, b"\x32" * 32


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """One setup of the tiny set (~10 s on the CPU), shared by the tests here."""
    cache = KeyCache(tmp_path_factory.mktemp("keys"))
    cache.setup(get_circuit(TINY))
    return cache


def test_tiny_set_proves_and_verifies_every_partition(keys):
    from gpu import prove, verify
    from gpu.groth16 import Proof

    circuit = get_circuit(TINY)
    pk, vk = keys.load_pk(circuit), keys.load_vk(circuit)
    c1 = circuit.parse_c1(c1_document(generate(circuit.prm, SEED), CHALLENGE_SEED))
    r1cs = circuit.r1cs()
    proofs = []
    for k in range(circuit.num_partitions()):
        proof = prove(pk, r1cs, circuit.synthesize(c1, k), backend="cpu")
        pub = circuit.public_inputs(c1, k)
        assert verify(vk, pub, proof)
        assert not verify(vk, [pub[0] + 1, *pub[1:]], proof)  # another replica id
        assert not verify(vk, [*pub[:3], pub[3] % 7 + 1, *pub[4:]], proof)  # another challenge
        proofs.append((pub, Proof.from_bytes(proof.to_bytes())))
    (pub0, p0), (pub1, p1) = proofs
    assert verify(vk, pub0, p0) and verify(vk, pub1, p1)  # survive the 192-byte encoding
    if pub0 != pub1:
        assert not verify(vk, pub1, p0)


def test_command_line_sector_to_verified_proof(keys, tmp_path, capsys):
    sector, c1 = tmp_path / "sector", tmp_path / "c1.json"
    assert main(["sector", "new", "--params", TINY, "--seed", "readme", "--out", str(sector)]) == 0
    assert main(["sector", "new", "--params", TINY, "--seed", "readme", "--out", str(sector)]) == 2
    assert "already holds a sector" in capsys.readouterr().err
    assert main(["sector", "c1", str(sector), "--out", str(c1)]) == 0
    assert main(["synth", str(c1), "--check", "--out", str(tmp_path / "z{k}.npy")]) == 0
    assert (tmp_path / "z1.npy").exists()
    proof = tmp_path / "proof.bin"
    assert main(["prove", str(c1), "--out", str(proof), "--keys", str(keys.root), "--backend", "cpu"]) == 0
    assert proof.stat().st_size == 2 * 192
    assert main(["verify", str(c1), str(proof), "--keys", str(keys.root)]) == 0

    # a tampered C1 input: one digit of a Merkle path; named before any proving
    doc = json.loads(c1.read_text())
    p = doc["partitions"][1]["challenges"][0]["tree_r_path"][0]
    p[2] = p[2][:-1] + ("1" if p[2][-1] == "0" else "0")
    c1.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["synth", str(c1)]) == 2
    err = capsys.readouterr().err
    assert "partition 1" in err and "partitions[1].challenges[0].tree_r_path" in err
    # the proof is about the public inputs only: another comm_r makes every partition invalid
    doc["comm_r"] = doc["comm_r"][:-1] + ("1" if doc["comm_r"][-1] == "0" else "0")
    c1.write_text(json.dumps(doc))
    assert main(["verify", str(c1), str(proof), "--keys", str(keys.root)]) == 1
    assert capsys.readouterr().out.count("INVALID") == 2


@pytest.mark.slow
def test_next_set_proves_and_verifies():
    """porep-lite-16k (2^14 domain, 6 parents, 2 layers): the full-shape challenge end to end."""
    from gpu import prove, setup, verify

    circuit = get_circuit("porep-lite-16k")
    c1 = circuit.parse_c1(c1_document(generate(circuit.prm, SEED), CHALLENGE_SEED))
    r1cs = circuit.r1cs()
    pk, vk = setup(r1cs)
    z = circuit.synthesize(c1, 1)
    proof = prove(pk, r1cs, z, backend="cpu")
    pub = circuit.public_inputs(c1, 1)
    assert verify(vk, pub, proof)
    assert not verify(vk, [*pub[:4], pub[4] ^ 1, *pub[5:]], proof)  # another parent index
