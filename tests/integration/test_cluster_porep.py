"""The cluster on the real circuit family: porep-lite's tiny parameter set (2 partitions of
~3.5k constraints), proved by two CPU provers; and a tampered C1 (a TreeD path) that fails naming
the field while the workers keep serving."""
from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def porep(cluster, worker_set, tmp_path_factory):
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    circuit = get_circuit(TINY)
    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(circuit)  # ~7 s of CPU setup, once per session
    ws = worker_set(tmp_path_factory.mktemp("porep"))
    pre = {"ZKHIVE_SRS__PRELOAD": json.dumps([TINY])}
    procs = [ws("synthesis", wait=False), ws("aggregate", wait=False),
             ws("prove", "cpu:0", wait=False, **pre), ws("prove", "cpu:1", wait=False, **pre)]
    for p in procs:
        p.wait_ready(cluster.redis)
    yield circuit, ws
    ws.stop_all()


def c1(seed: int) -> dict:
    from synthesis.porep import SETS, TINY, c1_document, generate

    s = seed.to_bytes(32, "little")
    return c1_document(generate(SETS[TINY], s), s)


def test_porep_job_spreads_over_provers_and_verifies(cluster, porep):
    from gpu.groth16 import Proof, verify
    from cluster.client import submit

    circuit, _ = porep
    cluster.configure_here()
    doc = c1(1)
    res = submit(doc, job_id="porep-1").result(timeout=120)
    assert len(res.proof) == 192 * circuit.num_partitions() == 384
    vk = cluster.runtime().keys.load_vk(circuit)
    parsed = circuit.parse_c1(doc)
    for k, raw in enumerate(res.partition_proofs()):
        assert res.public_inputs[k] == circuit.public_inputs(parsed, k)
        assert verify(vk, res.public_inputs[k], Proof.from_bytes(raw))
    # each proof is bound to its partition: swapped, they fail
    assert not verify(vk, res.public_inputs[1], Proof.from_bytes(res.partition_proofs()[0]))
    assert {p["device"] for p in res.provers} == {"cpu:0", "cpu:1"}  # least loaded first


def test_porep_tampered_path_fails_naming_the_field(cluster, porep):
    from cluster.client import JobFailed, submit

    _, ws = porep
    cluster.configure_here()
    doc = c1(2)
    doc["partitions"][1]["challenges"][0]["tree_d_path"][1] = "0x" + "00" * 31 + "05"
    with pytest.raises(JobFailed, match=r"partition 1; field partitions\[1\]\.challenges\[0\]\.tree_d_path"):
        submit(doc, job_id="porep-bad").result(timeout=120)
    assert all(w.proc.poll() is None for w in ws.started)
