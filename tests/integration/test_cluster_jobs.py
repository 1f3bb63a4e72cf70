"""End-to-end jobs on a real Redis with real worker processes (no eager mode)."""
from __future__ import annotations

import pytest

from circuits_for_tests import SQUARES_A, SQUARES_B, make_c1

pytestmark = pytest.mark.integration


def verify_result(cluster, circuit, doc, res):
    from gpu.groth16 import Proof, verify

    vk = cluster.runtime().keys.load_vk(circuit)
    c1 = circuit.parse_c1(doc)
    assert len(res.proof) == 192 * circuit.num_partitions()
    for k, raw in enumerate(res.partition_proofs()):
        assert res.public_inputs[k] == circuit.public_inputs(c1, k)
        assert verify(vk, res.public_inputs[k], Proof.from_bytes(raw)), f"partition {k}"
    return vk


def test_multi_partition_job_completes_and_verifies(cluster, workers):
    from gpu.groth16 import Proof, verify
    from cluster.client import submit

    cluster.setup_keys(SQUARES_A)
    workers("synthesis")
    workers("aggregate")
    workers("prove", "cpu:0", ZKHIVE_SRS__PRELOAD=f'["{SQUARES_A.name}"]')
    doc = make_c1(SQUARES_A, seed=1)
    job = submit(doc, job_id="multi-1")
    res = job.result(timeout=60)
    vk = verify_result(cluster, SQUARES_A, doc, res)
    # the proofs are bound to their inputs: swapping the partitions' inputs fails
    p0 = Proof.from_bytes(res.partition_proofs()[0])
    assert not verify(vk, res.public_inputs[1], p0)
    assert job.status()["status"] == "done"
