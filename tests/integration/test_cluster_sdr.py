"""The cluster on the SDR family's smallest set (sdr-256k: 2 partitions of 193k constraints,
SHA-256 labels and TreeD), proved by two CPU provers from compact-encoded assignments; and a
tampered label that fails naming partition, challenge and layer while the workers keep serving."""
from __future__ import annotations

import json

import pytest

# the CPU setup of 193k variables takes minutes: slow, with its own time limit
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(7200)]


@pytest.fixture(scope="module")
def sdr(cluster, worker_set, tmp_path_factory):
    from synthesis.circuits import get_circuit
    from synthesis.sdr import TINY

    circuit = get_circuit(TINY)
    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(circuit)
    ws = worker_set(tmp_path_factory.mktemp("sdr"))
    pre = {"ZKHIVE_SRS__PRELOAD": json.dumps([TINY])}
    try:
        procs = [ws("synthesis", wait=False), ws("aggregate", wait=False),
                 ws("prove", "cpu:0", wait=False, **pre), ws("prove", "cpu:1", wait=False, **pre)]
        for p in procs:
            # a prover is ready only with its preloaded key resident: loading the sdr key and
            # building its matrices takes minutes on a loaded 2-core machine
            p.wait_ready(cluster.redis, timeout_s=900)
        yield circuit, ws
    finally:
        # also when a worker never became ready: a stray prover on the session's Redis would
        # take the next tests' partitions
        ws.stop_all()


def c1(seed: int) -> dict:
    from synthesis.sdr import SETS, TINY, c1_document, generate, interactive_seed

    sector = generate(SETS[TINY], seed.to_bytes(32, "little"))
    return c1_document(sector, interactive_seed(sector))


def test_sdr_job_proves_on_the_cluster_and_verifies(cluster, sdr):
    from cluster.client import submit
    from gpu.groth16 import Proof, verify

    circuit, _ = sdr
    cluster.configure_here()
    doc = c1(1)
    res = submit(doc, job_id="sdr-1").result(timeout=1800)
    assert len(res.proof) == 192 * circuit.num_partitions()
    vk = cluster.runtime().keys.load_vk(circuit)
    parsed = circuit.parse_c1(doc)
    for k, raw in enumerate(res.partition_proofs()):
        assert res.public_inputs[k] == circuit.public_inputs(parsed, k)
        assert verify(vk, res.public_inputs[k], Proof.from_bytes(raw))
    assert not verify(vk, res.public_inputs[1], Proof.from_bytes(res.partition_proofs()[0]))


def test_sdr_tampered_label_fails_naming_partition_challenge_and_layer(cluster, sdr):
    from cluster.client import JobFailed, submit

    _, ws = sdr
    cluster.configure_here()
    doc = c1(2)
    lab = doc["partitions"][1]["challenges"][0]["column"][0]
    doc["partitions"][1]["challenges"][0]["column"][0] = f"0x{int(lab, 16) ^ 2:064x}"
    with pytest.raises(JobFailed, match=r"partition 1; field partitions\[1\]\.challenges\[0\]\.column\[0\]: "
                                        r"challenge 0, layer 1"):
        submit(doc, job_id="sdr-bad").result(timeout=600)
    assert all(w.proc.poll() is None for w in ws.started)
