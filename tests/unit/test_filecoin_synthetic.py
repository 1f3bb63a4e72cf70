"""SyntheticPoRep (StackedDrg*V1_1_Feat_SyntheticPoRep): the V1_1 circuit and keys, its own porep
id (so its own replica id and graph), challenges from the synthetic set; and the public inputs
derived as the verifier derives them, never taken from the vanilla proofs."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from synthesis.circuits import C1Error


@pytest.fixture(scope="module")
def sectors():
    from synthesis.circuits import get_circuit
    from synthesis.filecoin import c1 as fc1
    from synthesis.filecoin import sector as fs

    circuit = get_circuit("filecoin-2k")
    prm = circuit.prm
    out = {"circuit": circuit}
    for rp in (prm.registered_proof, prm.synthetic_proof):
        sealed = fs.seal(prm, os.urandom(1016), fs.prover_id_from_miner(1000), 7, bytes([3] * 32),
                         registered_proof=rp)
        out[rp] = json.loads(fc1.dumps(fc1.c1_document(sealed, bytes([1] * 32))))
    return out


def test_a_synthetic_c1_is_accepted_by_the_same_set_and_its_challenges_are_the_synthetic_ones(sectors):
    from synthesis.filecoin import challenges as chal

    circuit = sectors["circuit"]
    syn, inter = sectors["StackedDrg2KiBV1_1_Feat_SyntheticPoRep"], sectors["StackedDrg2KiBV1_1"]
    for doc in (syn, inter):
        circuit.vanilla(circuit.parse_c1(doc), 0)        # every vanilla check passes
    c1 = circuit.parse_c1(syn)
    want = chal.SynthChallenges(circuit.prm.nodes, bytes(syn["replica_id"]), bytes(syn["comm_r"])) \
        .porep_partition(circuit.prm.challenges, bytes(syn["seed"]), 0)
    assert circuit.public_inputs(c1, 0)[3] == want[0]
    # the same document called interactive: its challenges are not the seed's
    relabeled = dict(syn, registered_proof="StackedDrg2KiBV1_1")
    with pytest.raises(C1Error, match=r"challenges node \d+, the seed gives \d+"):
        circuit.vanilla(circuit.parse_c1(relabeled), 0)
    with pytest.raises(C1Error, match="NI-PoRep is not proved here"):
        circuit.parse_c1(dict(syn, registered_proof="StackedDrg2KiBV1_2_Feat_NonInteractivePoRep"))


def test_public_inputs_are_derived_not_read_from_the_vanilla_proofs(sectors):
    from synthesis.filecoin.vanilla import from_c1

    circuit = sectors["circuit"]
    for rp in ("StackedDrg2KiBV1_1", "StackedDrg2KiBV1_1_Feat_SyntheticPoRep"):
        doc = json.loads(json.dumps(sectors[rp]))
        good = circuit.public_inputs(circuit.parse_c1(doc), 0)
        assert good == circuit._public(from_c1(circuit.prm, circuit.parse_c1(doc), 0))
        # a vanilla proof of another node: the inputs stay the derived ones (its proof cannot verify)
        cx = doc["vanilla_proofs"]["StackedDrg2KiBV1"][0][0]["replica_column_proofs"]["c_x"]["column"]
        cx["index"] = (cx["index"] % 63) + 1 if cx["index"] != 63 else 1
        c1 = circuit.parse_c1(doc)
        assert circuit._public(from_c1(circuit.prm, c1, 0)) != good
        assert circuit.public_inputs(c1, 0) == good


def test_a_synthetic_sector_keeps_its_kind_when_saved(tmp_path):
    from synthesis.filecoin import c1 as fc1
    from synthesis.filecoin import sector as fs
    from synthesis.filecoin.params import SETS

    prm = SETS["filecoin-2k"]
    sealed = fs.seal(prm, os.urandom(1016), fs.prover_id_from_miner(1000), 7, bytes([3] * 32),
                     registered_proof=prm.synthetic_proof)
    plain = fs.seal(prm, bytes(1016), fs.prover_id_from_miner(1000), 7, bytes([3] * 32))
    sealed.save(tmp_path / "s")
    back = fs.Sector.load(tmp_path / "s")
    assert (back.registered_proof, back.replica_id) == (prm.synthetic_proof, sealed.replica_id)
    assert fc1.c1_document(back, bytes([1] * 32))["registered_proof"] == prm.synthetic_proof
    # its own porep id: the same data, miner, sector and ticket give another replica id
    assert fs.seal(prm, bytes(1016), fs.prover_id_from_miner(1000), 7, bytes([3] * 32),
                   registered_proof=prm.synthetic_proof).replica_id != plain.replica_id


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(os.environ.get("ZKHIVE_LONG_FILECOIN") != "1",
                    reason="a filecoin-2k key takes ~8 minutes and a proof ~2 on 2 cores: "
                           "ZKHIVE_LONG_FILECOIN=1 runs it")
def test_a_synthetic_2k_sector_proves_and_verifies_with_the_v1_1_keys(sectors, tmp_path):
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof, prove, verify

    circuit = sectors["circuit"]
    c1 = circuit.parse_c1(sectors["StackedDrg2KiBV1_1_Feat_SyntheticPoRep"])
    # a filecoin-2k key made before (the self-test's long test keeps one): reused, not remade
    made = os.environ.get("ZKHIVE_SELFTEST_KEYS")
    keys = KeyCache(Path(made) if made else tmp_path / "keys")
    t0 = time.perf_counter()
    if not keys.has(circuit):
        keys.setup(circuit, backend="cpu")
    t1 = time.perf_counter()
    pk, vk = keys.load_pk(circuit), keys.load_vk(circuit)
    proof = prove(pk, circuit, circuit.synthesize_compact(c1, 0), "cpu")
    t2 = time.perf_counter()
    pub = circuit.public_inputs(c1, 0)
    assert verify(vk, pub, Proof.from_bytes(proof.to_bytes()))
    other = circuit.public_inputs(circuit.parse_c1(sectors["StackedDrg2KiBV1_1"]), 0)
    assert not verify(vk, other, proof)
    print(f"\nSyntheticPoRep 2 KiB: key setup {t1 - t0:.0f} s, synthesis + proof {t2 - t1:.0f} s, verified")
