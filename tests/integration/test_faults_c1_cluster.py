"""The C1 fuzzer through the real cluster (issue 15's fault suite; the fast parser-level run is
tests/unit/test_faults_c1_fuzz.py): mutated porep-lite documents submitted with ``zkhive submit``
and through the submit task Flower's send-task runs, to a real Redis and real workers (synthesis,
aggregate, a CPU prover). Each is refused at submission in one line leaving no job, or its job
fails at once (one attempt: no retry, no redelivery) with one line naming the field, or it is
harmless and its proof verifies; the workers keep serving and the next good job verifies."""
from __future__ import annotations

import contextlib
import io
import json
import os
import time

import pytest
from hypothesis import event, given, settings, strategies as st

from tests.unit.test_faults_c1_fuzz import HARMLESS, KINDS, SCHEMA_KINDS, base, mutated, one_line

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.slow]

#: a bad input fails its job this fast (one synthesis attempt of a ~3.5k-constraint partition)
FAILS_WITHIN_S = 30


@pytest.fixture(scope="module")
def porep(cluster, worker_set, tmp_path_factory):
    circuit, _, _ = base("porep-lite")
    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(circuit)
    ws = worker_set(tmp_path_factory.mktemp("c1fuzz"))
    pre = {"ZKHIVE_SRS__PRELOAD": json.dumps([circuit.name])}
    procs = [ws("synthesis", wait=False), ws("aggregate", wait=False), ws("prove", "cpu:0", wait=False, **pre)]
    for p in procs:
        p.wait_ready(cluster.redis)
    yield circuit, ws
    ws.stop_all()


_seq = iter(range(10 ** 6))


def submit_raw(cluster, raw: bytes, via: str, tmp) -> tuple[str, str | None]:
    """(job id, the one-line refusal or None when a job was created)."""
    from cluster.pipeline.app import app
    from cluster.cli import main
    from cluster.errors import JobError

    job_id = f"fuzz-{next(_seq)}"
    if via == "task":
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            via = "cli"  # not JSON a Celery client could send: the file path then
        else:
            try:
                app.send_task("zkhive.submit", args=[doc], kwargs={"job_id": job_id}).get(timeout=60)
                return job_id, None
            except JobError as e:
                return job_id, one_line(str(e))
    path = tmp / f"{job_id}.json"
    path.write_bytes(raw)
    err = io.StringIO()
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in cluster.env.items() if k.startswith("ZKHIVE_")})  # as `zkhive` sees it
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["submit", str(path), "--job-id", job_id])
    finally:
        os.environ.clear()
        os.environ.update(saved)
        cluster.configure_here()
    if code == 0:
        return job_id, None
    assert code == 2, err.getvalue()
    return job_id, one_line(err.getvalue().rstrip("\n"))


def no_trace(r, job_id: str) -> None:
    assert not list(r.scan_iter(match=f"zkhive:job:{job_id}*")) and not r.sismember("zkhive:active", job_id)


def verify(cluster, circuit, res) -> None:
    from gpu.groth16 import Proof, verify as groth16_verify

    vk = cluster.runtime().keys.load_vk(circuit)
    assert len(res.partition_proofs()) == circuit.num_partitions()
    for k, raw in enumerate(res.partition_proofs()):
        assert groth16_verify(vk, res.public_inputs[k], Proof.from_bytes(raw)), k


def outcome(cluster, circuit, job_id: str, refusal: str | None) -> str:
    from cluster.client import Job, JobFailed

    if refusal is not None:
        no_trace(cluster.redis, job_id)
        return "refused"
    t0 = time.monotonic()
    try:
        res = Job(job_id).result(timeout=FAILS_WITHIN_S * 4)
    except JobFailed as e:
        assert time.monotonic() - t0 < FAILS_WITHIN_S, f"{job_id} failed only after {time.monotonic() - t0:.0f} s"
        one_line(e.error)
        from cluster.pipeline import timeline

        kinds = [ev["event"] for ev in timeline.load(cluster.redis, job_id)]
        assert "synthesis_error" not in kinds and "redelivered" not in kinds and "prove_pickup" not in kinds, kinds
        return "failed"
    verify(cluster, circuit, res)
    return "verified"


@settings(max_examples=10, derandomize=True, database=None, deadline=None)
@given(case=st.one_of(mutated("porep-lite", SCHEMA_KINDS), mutated("porep-lite", KINDS)),
       via=st.sampled_from(["cli", "task"]))
def test_mutated_c1_through_the_cluster(cluster, porep, tmp_path_factory, case, via):
    circuit, ws = porep
    cluster.configure_here()
    _, _, raw = case
    job_id, refusal = submit_raw(cluster, raw, via, tmp_path_factory.mktemp("in"))
    event(f"{case[0]} via {via}: {outcome(cluster, circuit, job_id, refusal)}")
    assert all(w.proc.poll() is None for w in ws.started)


@pytest.mark.parametrize("what", ["bad-hex", "wrong-leaf", "upper-case-hex"])
def test_a_job_of_each_outcome(cluster, porep, tmp_path, what):
    """The outcomes a handful of random examples may miss: refused at submission by its schema,
    failed by its vanilla proof, harmless and proved."""
    import copy

    circuit, ws = porep
    cluster.configure_here()
    doc = copy.deepcopy(base("porep-lite")[1])
    if what == "bad-hex":  # refused at submission, naming the field (issue 27), not failed later
        doc["partitions"][1]["challenges"][0]["column"][0] = "0x12g4"
        want, text = "refused", None
    elif what == "wrong-leaf":
        doc["partitions"][0]["challenges"][0]["data_leaf"] = "0x" + "00" * 31 + "07"
        want, text = "failed", "bad C1 input: partition 0; field partitions[0].challenges[0]"
    else:
        want, text = "verified", None
    raw = HARMLESS["upper-case-hex"](doc).encode() if what == "upper-case-hex" else json.dumps(doc).encode()
    for via in ("cli", "task"):
        job_id, refusal = submit_raw(cluster, raw, via, tmp_path)
        if want == "refused":
            assert refusal is not None and refusal.endswith(
                "bad C1 input: field partitions[1].challenges[0].column[0]: '0x12g4' does not match "
                "^0x[0-9a-fA-F]{1,64}$"), refusal
        else:
            assert refusal is None, refusal
        assert outcome(cluster, circuit, job_id, refusal) == want
        if text:
            from cluster.client import Job

            assert text in Job(job_id).status()["error"], Job(job_id).status()["error"]
    assert all(w.proc.poll() is None for w in ws.started)


def test_after_the_fuzz_a_good_job_verifies(cluster, porep):
    from cluster.client import submit
    from synthesis.porep import SETS, TINY, c1_document, generate

    circuit, ws = porep
    cluster.configure_here()
    seed = b"\x42" * 32
    verify(cluster, circuit, submit(c1_document(generate(SETS[TINY], seed), seed), job_id="after-fuzz").result(timeout=120))
    assert all(w.proc.poll() is None for w in ws.started)
