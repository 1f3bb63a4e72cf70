"""End-to-end jobs on a real Redis with real worker processes (no eager mode).

One set of workers serves the whole module: a synthesis worker, an aggregate worker, and two CPU
provers, cpu:0 holding test-squares-8x2's key and cpu:1 holding test-squares-5x2's.
"""
from __future__ import annotations

import pytest

from circuits_for_tests import SQUARES_A, SQUARES_B, SQUARES_C, make_c1

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standard(cluster, worker_set, tmp_path_factory):
    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A, SQUARES_B, SQUARES_C)
    ws = worker_set(tmp_path_factory.mktemp("standard"))
    procs = [ws("synthesis", wait=False), ws("aggregate", wait=False),
             ws("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{SQUARES_A.name}"]'),
             ws("prove", "cpu:1", wait=False, ZKHIVE_SRS__PRELOAD=f'["{SQUARES_B.name}"]')]
    for p in procs:
        p.wait_ready(cluster.redis)
    yield ws
    ws.stop_all()


def verify_result(cluster, circuit, doc, res):
    from gpu.groth16 import Proof, verify

    vk = cluster.runtime().keys.load_vk(circuit)
    c1 = circuit.parse_c1(doc)
    assert len(res.proof) == 192 * circuit.num_partitions()
    assert [p["partition"] for p in res.provers] == list(range(circuit.num_partitions()))
    for k, raw in enumerate(res.partition_proofs()):
        assert res.public_inputs[k] == circuit.public_inputs(c1, k)
        assert verify(vk, res.public_inputs[k], Proof.from_bytes(raw)), f"partition {k}"
    return vk


def test_multi_partition_job_completes_and_verifies(cluster, standard):
    from gpu.groth16 import Proof, verify
    from cluster.client import submit

    doc = make_c1(SQUARES_C, seed=1)
    job = submit(doc, job_id="multi-1")
    res = job.result(timeout=60)
    vk = verify_result(cluster, SQUARES_C, doc, res)
    # the proofs are bound to their inputs: partition 0's proof fails with partition 1's inputs
    assert not verify(vk, res.public_inputs[1], Proof.from_bytes(res.partition_proofs()[0]))
    st = job.status()
    assert (st["status"], st["partitions_done"], st["num_partitions"]) == ("done", 3, 3)
    # the aggregate worker checked them against the public inputs stored at submission, without
    # reading the C1 (cluster.pipeline.publics)
    from cluster.pipeline import timeline

    events = [e["event"] for e in timeline.load(cluster.runtime().redis, "multi-1")]
    assert events.count("aggregated") == 1 and "publics_from_c1" not in events


def test_jobs_of_two_circuits_route_to_the_workers_holding_their_keys(cluster, standard):
    from cluster.pipeline import registry, timeline
    from cluster.client import submit

    resident = {w.device: w.resident_keys for w in registry.workers(cluster.redis, role="prove")}
    assert resident["cpu:0"][:1] == [SQUARES_A.name] and resident["cpu:1"][:1] == [SQUARES_B.name]
    doc_a, doc_b = make_c1(SQUARES_A, seed=2), make_c1(SQUARES_B, seed=3)
    ja, jb = submit(doc_a, job_id="route-a"), submit(doc_b, job_id="route-b")
    ra, rb = ja.result(timeout=60), jb.result(timeout=60)
    verify_result(cluster, SQUARES_A, doc_a, ra)
    verify_result(cluster, SQUARES_B, doc_b, rb)
    assert {p["device"] for p in ra.provers} == {"cpu:0"}
    assert {p["device"] for p in rb.provers} == {"cpu:1"}
    # and the routing says why: the key was resident there
    reasons = {e["reason"] for e in timeline.load(cluster.redis, "route-a") if e["event"] == "prove_routed"}
    assert reasons == {"resident"}


def test_duplicate_submission_returns_the_same_job(cluster, standard):
    from cluster.pipeline import timeline
    from cluster.client import submit
    from cluster.pipeline.workflow import JobConflict

    doc = make_c1(SQUARES_A, seed=4)
    first, again = submit(doc, job_id="dup-1"), submit(doc, job_id="dup-1")
    assert (first.job_id, first.created) == ("dup-1", True)
    assert (again.job_id, again.created) == ("dup-1", False)
    # without an id, the id comes from the content: the same C1 is the same job
    auto1, auto2 = submit(doc), submit(dict(doc))
    assert auto1.job_id == auto2.job_id and auto1.created and not auto2.created
    # the same id with another C1 input is refused, not silently merged
    with pytest.raises(JobConflict, match="another C1 input"):
        submit(make_c1(SQUARES_A, seed=5), job_id="dup-1")
    assert first.result(timeout=60).proof == again.result(timeout=1).proof
    auto1.result(timeout=60)
    events = timeline.load(cluster.redis, "dup-1")
    assert sum(e["event"] == "queued" for e in events) == SQUARES_A.num_partitions()
    assert sum(e["event"] == "prove_end" for e in events) == SQUARES_A.num_partitions()


def test_bad_c1_fails_naming_the_field_and_workers_keep_serving(cluster, standard):
    from cluster.client import JobFailed, submit
    from cluster.pipeline.jobs import JobError

    # a field that does not parse: refused at submission, naming the field (issue 27)
    doc = make_c1(SQUARES_A, seed=6)
    doc["partitions"][1]["x"] = "0xnot-hex"
    with pytest.raises(JobError, match=r"^bad C1 input: field partitions\[1\]\.x: "):
        submit(doc, job_id="bad-parse")
    # a partition whose "vanilla proof" (y) does not check
    with pytest.raises(JobFailed, match=r"partition 1; field partitions\[1\]\.y"):
        submit(make_c1(SQUARES_A, seed=7, bad_y_partition=1), job_id="bad-y").result(timeout=60)
    # an unknown parameter set, a bad id or priority is refused at submission
    with pytest.raises(JobError, match="field params"):
        submit({"params": "no-such-circuit"}, job_id="bad-params")
    with pytest.raises(JobError, match="job id"):
        submit(make_c1(SQUARES_A), job_id="../etc")
    with pytest.raises(JobError, match="priority"):
        submit(make_c1(SQUARES_A), priority="urgent")
    # the workers are still alive and serve the next job
    assert all(w.proc.poll() is None for w in standard.started)
    good = make_c1(SQUARES_A, seed=8)
    verify_result(cluster, SQUARES_A, good, submit(good, job_id="after-bad").result(timeout=60))


def test_cancel_and_status(cluster, standard):
    from cluster.client import JobFailed, cancel, submit
    from cluster.user.commands import status_text

    job = submit(make_c1(SQUARES_A, seed=9), job_id="to-cancel", priority="bulk")
    assert cancel("to-cancel") is True
    with pytest.raises(JobFailed, match="cancelled"):
        job.result(timeout=10)
    assert cancel("to-cancel") is False  # already final
    with pytest.raises(KeyError):
        cancel("never-submitted")
    text = status_text(cluster.runtime())
    for w in ("synthesis.", "aggregate.", "prove.vm.cpu0.0" if "vm" in text else "prove.", "cpu:1"):
        assert w in text
    assert SQUARES_A.name in text and "queues:" in text and "to-cancel" in text
