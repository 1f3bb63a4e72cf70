"""The task bodies without a broker (tests/unit/stub_runtime.py): the retry policy, re-proving
an unverifiable partition, the watchdog's re-dispatch and deadline, residency and eviction.
The same behaviours against real Redis and real workers: tests/integration/test_cluster_*.py."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from circuits_for_tests import SQUARES_A, SQUARES_B, make_c1  # noqa: E402
from cluster.errors import JobError  # noqa: E402
from cluster.pipeline.keys import KeyCache  # noqa: E402
from gpu.backends.base import Backend  # noqa: E402
from gpu.backends.cpu import CpuBackend  # noqa: E402
from gpu.errors import GpuLaunchError  # noqa: E402

from .stub_runtime import StubCluster  # noqa: E402


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    for c in (SQUARES_A, SQUARES_B):
        KeyCache(d).setup(c)
    return d


@pytest.fixture
def stub(key_dir):
    return StubCluster(key_dir)


def submit(stub, doc, job_id):
    from cluster.pipeline.workflow import submit_job

    rec, created = submit_job(stub.synthesis, doc, job_id=job_id)
    assert created
    return rec


def verify_job(stub, circuit, doc, job_id):
    from cluster.client import Job
    from gpu.groth16 import Proof, verify

    res = Job(job_id, stub.synthesis).result(timeout=0)
    vk = stub.keys.load_vk(circuit)
    c1 = circuit.parse_c1(doc)
    for k, raw in enumerate(res.partition_proofs()):
        assert verify(vk, circuit.public_inputs(c1, k), Proof.from_bytes(raw)), k
    return res


class FlakyBackend(CpuBackend):
    """The CPU backend with a device that fails its first ``failures`` proofs (a launch error)."""

    def __init__(self, failures: int):
        super().__init__(threads=1)
        self.failures = failures

    def prove_terms(self, pk, r1cs, z, timer):
        if self.failures:
            self.failures -= 1
            raise GpuLaunchError("unspecified launch failure", device="stub", kernel="msm")
        return super().prove_terms(pk, r1cs, z, timer)


# -- the lifecycle ------------------------------------------------------------------------------------

def test_a_job_runs_through_the_bodies_and_ends_once(stub):
    stub.add_prover("cpu:0")
    doc = make_c1(SQUARES_A, seed=1)
    submit(stub, doc, "ok")
    assert stub.jobs.active() == ["ok"]
    stub.drain()
    verify_job(stub, SQUARES_A, doc, "ok")
    assert stub.jobs.status("ok") == "done" and stub.jobs.active() == []
    assert len(stub.events("ok", "aggregated")) == 1
    # the lifecycle's final transitions happen once: a late failure or cancel changes nothing
    assert not stub.jobs.fail("ok", "late") and not stub.jobs.cancel("ok")
    assert stub.jobs.status("ok") == "done" and not stub.events("ok", "failed")


def test_cancel_drops_the_jobs_queued_messages(stub):
    from cluster.pipeline.jobs import CANCELLED

    stub.add_prover("cpu:0")
    submit(stub, make_c1(SQUARES_A, seed=2), "gone")
    submit(stub, make_c1(SQUARES_A, seed=3), "kept")
    assert len(stub.queue) == 4
    assert stub.jobs.cancel("gone")
    assert stub.dispatch.drop_queued(stub.redis, "gone") == 2
    assert {m.job_id() for m in stub.queue} == {"kept"}
    assert stub.jobs.status("gone") == CANCELLED and "gone" not in stub.jobs.active()
    assert len(stub.events("gone", "cancelled")) == 1


# -- the retry policy ---------------------------------------------------------------------------------

def test_bad_c1_fails_the_job_in_one_attempt_with_the_whole_message(stub):
    stub.add_prover("cpu:0")
    submit(stub, make_c1(SQUARES_A, seed=4, bad_y_partition=1), "bad")
    stub.drain()
    [failure] = stub.failures()
    want = "bad C1 input: partition 1; field partitions[1].y: is not x^(2^8)"
    assert failure.error == want and stub.jobs.state("bad")["error"] == want
    assert [e["error"] for e in stub.events("bad", "failed")] == [want]
    assert not [m for m, o in stub.log if o == "retry"]
    assert not stub.events("bad", "synthesis_error")


def test_missing_key_fails_in_one_attempt_naming_the_fix(stub, tmp_path):
    stub.add_prover("cpu:0", keys=KeyCache(tmp_path / "empty"))
    stub.add_prover("cpu:1", keys=KeyCache(tmp_path / "empty"))
    submit(stub, make_c1(SQUARES_A, seed=5), "nokey")
    stub.drain()
    err = stub.jobs.state("nokey")["error"]
    assert err.startswith("partition ") and ": missing key: no proving key for parameter set " \
        "'test-squares-8x2' at " in err and err.endswith("run `zkhive keys setup --params test-squares-8x2`")
    assert len(stub.events("nokey", "prove_pickup")) == 1  # one attempt, no retry elsewhere
    assert not [m for m, o in stub.log if o == "retry"]


def test_a_key_that_exists_nowhere_is_refused_at_submit(tmp_path):
    stub = StubCluster(tmp_path / "no-keys")
    with pytest.raises(JobError, match=r"field params: no keys for parameter set 'test-squares-8x2' "
                                        r"anywhere in the cluster .*zkhive keys setup --params test-squares-8x2"):
        submit(stub, make_c1(SQUARES_A, seed=6), "refused")
    assert stub.jobs.get("refused") is None and stub.queue == []


def test_retry_goes_elsewhere_and_spends_the_partitions_budget(stub):
    stub.add_prover("cpu:0", backend=FlakyBackend(failures=1))
    stub.add_prover("cpu:1")
    doc = make_c1(SQUARES_A, seed=8)
    submit(stub, doc, "retry")
    stub.drain()
    res = verify_job(stub, SQUARES_A, doc, "retry")
    [err] = stub.events("retry", "prove_error")
    assert err["device"] == "cpu:0" and err["attempt"] == 1
    assert err["error"] == "device error: GpuLaunchError: unspecified launch failure (device=stub, kernel=msm)"
    assert res.provers[err["partition"]]["device"] == "cpu:1"
    [(again, _)] = [(m, o) for m, o in stub.log if m.retries == 1]
    assert again.kwargs["exclude"] == ["cpu:0"] and again.queue == "prove.stub.cpu1"


def test_transient_errors_past_the_budget_fail_the_job(key_dir):
    stub = StubCluster(key_dir, partition_retries=1)
    stub.add_prover("cpu:0", backend=FlakyBackend(failures=100))
    submit(stub, make_c1(SQUARES_A, seed=9), "spent")
    stub.drain()
    err = stub.jobs.state("spent")["error"]
    assert "prove failed 2 times (delivery.partition_retries=1); last: device error: GpuLaunchError: " \
        "unspecified launch failure (device=stub, kernel=msm)" in err
    assert stub.jobs.status("spent") == "failed"


# -- re-prove, watchdog, deadline -----------------------------------------------------------------------

def test_unverifiable_partition_is_reproved_on_another_device(stub, tmp_path):
    other = KeyCache(tmp_path / "other")
    other.setup(SQUARES_A)  # another setup: its proofs do not verify against the cluster's vk
    stub.add_prover("cpu:0", keys=other)
    stub.add_prover("cpu:1")
    doc = make_c1(SQUARES_A, seed=10)
    submit(stub, doc, "reprove")
    stub.drain()  # both first proofs on cpu:0 (the stub's queues are never loaded: first by name)
    assert {e["partition"] for e in stub.events("reprove", "verify_failed")} == {0, 1}
    assert {e["device"] for e in stub.events("reprove", "verify_failed")} == {"cpu:0"}
    res = verify_job(stub, SQUARES_A, doc, "reprove")
    assert {p["device"] for p in res.provers} == {"cpu:1"}
    assert all(e["exclude"] == ["cpu:0"] for e in stub.events("reprove", "redispatched"))


# -- the public inputs the aggregation checks against (cluster.pipeline.publics) ----------------------------

def _rewrite_record(stub, job_id, **update):
    from cluster.pipeline.jobs import key

    rec = stub.jobs.get(job_id).model_copy(update=update)
    stub.redis.set(key(job_id), rec.model_dump_json())
    return rec


def test_the_aggregation_verifies_against_the_public_inputs_stored_at_submission(stub):
    from cluster.pipeline import publics

    stub.add_prover("cpu:0")
    doc = make_c1(SQUARES_A, seed=20)
    rec = submit(stub, doc, "pubs")
    assert rec.publics is not None and rec.publics.kind == "publics"
    c1 = SQUARES_A.parse_c1(doc)
    want = [SQUARES_A.public_inputs(c1, k) for k in range(rec.num_partitions)]
    assert publics.read(stub.blobs, rec.publics, rec.params, rec.num_partitions) == want
    stub.drain()
    res = verify_job(stub, SQUARES_A, doc, "pubs")
    assert len(stub.events("pubs", "aggregate_start")) == 1 and not stub.events("pubs", "publics_from_c1")
    assert res.public_inputs == want


def test_stored_public_inputs_of_another_input_fail_verification(stub):
    """The stored public inputs are what binds: another job's (same circuit, another sector) in
    the record make every partition's proof fail the check, and each is re-proved."""
    stub.add_prover("cpu:0")
    other = submit(stub, make_c1(SQUARES_A, seed=22), "other")
    submit(stub, make_c1(SQUARES_A, seed=21), "swapped")
    _rewrite_record(stub, "swapped", publics=other.publics)
    stub.drain()
    assert {e["partition"] for e in stub.events("swapped", "verify_failed")} == {0, 1}
    assert stub.jobs.status("other") == "done"


@pytest.mark.parametrize("case", ["old-record", "blob-gone", "another-params"])
def test_without_usable_stored_public_inputs_the_aggregation_takes_them_from_the_c1(stub, case):
    stub.add_prover("cpu:0")
    doc = make_c1(SQUARES_A, seed=23)
    rec = submit(stub, doc, "fallback")
    if case == "old-record":  # written before the field: no publics
        _rewrite_record(stub, "fallback", publics=None)
    elif case == "blob-gone":  # expired or collected
        stub.blobs.delete(rec.publics)
    else:  # a blob that is not this job's shape: read() refuses it, named
        from cluster.pipeline import publics

        _rewrite_record(stub, "fallback", publics=publics.store(stub.blobs, SQUARES_B.name, [[1]] * 2))
    stub.drain()
    verify_job(stub, SQUARES_A, doc, "fallback")
    why = {"old-record": "names no stored public inputs", "blob-gone": "is missing",
           "another-params": f"is not the public inputs of a {SQUARES_A.name} job of 2 partitions"}[case]
    assert [why in e["reason"] for e in stub.events("fallback", "publics_from_c1")] == [True]
    assert not stub.events("fallback", "verify_failed")


def test_a_key_whose_proofs_never_verify_fails_the_job_naming_the_key(key_dir, tmp_path):
    """Every proof refused by the verifying key (here: the prover's .params are another setup's)
    until the budget is spent: the job fails naming the key files and the check to run, not as
    a prover bug."""
    stub = StubCluster(key_dir, partition_retries=1)
    other = KeyCache(tmp_path / "other")
    other.setup(SQUARES_A)
    stub.add_prover("cpu:0", keys=other)
    submit(stub, make_c1(SQUARES_A, seed=12), "badkey")
    stub.drain()
    err = stub.jobs.state("badkey")["error"]
    keys = stub.keys
    assert (f"proof does not verify after 2 attempts (delivery.partition_retries=1) with the key "
            f"{keys.find(SQUARES_A, 'params')} and {keys.find(SQUARES_A, 'vk')}: `zkhive keys check "
            f"--params {SQUARES_A.name}` checks it") in err, err
    assert stub.jobs.status("badkey") == "failed"


def test_a_zero_filled_key_fails_the_job_at_once_naming_the_point(key_dir, tmp_path):
    """A .params with a zero-filled point (which used to load as the identity and fail every
    proof) is refused when the prover loads it: the job fails at once, naming the file, section
    and offset."""
    import shutil

    from gpu.groth16 import bellperson as bp
    d = tmp_path / "keys"
    shutil.copytree(key_dir, d)
    keys = KeyCache(d)
    params = keys.find(SQUARES_A, "params")
    at = bp.scan(params).sections["l"].offset(1)
    data = bytearray(params.read_bytes())
    data[at:at + 96] = bytes(96)
    params.write_bytes(bytes(data))
    stub = StubCluster(d)
    stub.add_prover("cpu:0")
    submit(stub, make_c1(SQUARES_A, seed=13), "zeros")
    stub.drain()
    err = stub.jobs.state("zeros")["error"]
    assert (f"{params}: section l, point 1 at byte offset {at}: every byte zero (a zero-filled "
            "point: (0, 0) is not on the G1 curve)") in err and "does not verify" not in err, err
    assert stub.jobs.status("zeros") == "failed"


def test_watchdog_redispatches_a_partition_whose_prover_died(stub):
    import time

    from cluster.pipeline.lease import Leases
    from cluster.pipeline.watchdog import inspect_job

    dead = stub.add_prover("cpu:0")
    doc = make_c1(SQUARES_A, seed=11)
    submit(stub, doc, "lost")
    # the prover takes partition 0 and dies mid-prove: its lease is never renewed, its registry
    # entry goes
    assert stub.step(2) == 2  # the two syntheses
    msg = next(m for m in stub.queue if m.name == "prove" and m.partition() == 0)
    stub.queue.remove(msg)
    short = Leases(stub.redis, 0.05, 3600)
    assert short.acquire("lost", 0, "prove", task_id=msg.task_id, worker=dead.worker.worker_id,
                         device="cpu:0", host="stub").taken
    stub.kill(dead)
    stub.add_prover("cpu:1")
    time.sleep(0.1)
    # partition 0: its lease lapsed; partition 1: waiting on a queue nobody serves
    assert inspect_job(stub.aggregator, "lost") == ["redispatch 0", "reroute 1"]
    assert stub.leases.get("lost", 0) is None  # broken before the re-dispatch
    [lapse] = stub.events("lost", "lease_lapsed")
    assert lapse["partition"] == 0 and lapse["worker"] == "prove.stub.cpu0.0" and lapse["stage"] == "prove"
    ev0, ev1 = stub.events("lost", "redispatched")
    assert ev0["exclude"] == ["cpu:0"] and "lease of prove.stub.cpu0.0 (prove" in ev0["reason"]
    assert 0 < ev0["waited_s"] < 5
    assert ev1["reason"] == "queue prove.stub.cpu0 has no live prover"
    stub.drain()
    res = verify_job(stub, SQUARES_A, doc, "lost")
    assert {p["device"] for p in res.provers} == {"cpu:1"}
    # a lost worker or a re-route is not the partition's error: its retry budget is untouched;
    # the lapse counts as one crash of partition 0 (delivery.max_redeliveries), seen by the re-proof
    assert [stub.redis.get(f"zkhive:job:lost:attempts:{k}") for k in (0, 1)] == [None, None]
    assert [e["delivery"] for e in stub.events("lost", "redelivered", 0)] == [2]


def test_watchdog_fails_a_job_past_its_deadline_naming_each_missing_partition(stub):
    from cluster.pipeline.watchdog import inspect_job

    rec = submit(stub, make_c1(SQUARES_A, seed=12), "late")
    stub.drain()  # synthesis only: no prover exists
    assert inspect_job(stub.aggregator, "late", now=rec.deadline_at - 1) == []
    assert inspect_job(stub.aggregator, "late", now=rec.deadline_at + 1) == ["deadline"]
    err = stub.jobs.state("late")["error"]
    assert err.startswith("deadline passed") and \
        "partition 0: prove_routed prove.unassigned; partition 1: prove_routed prove.unassigned" in err
    assert "late" not in stub.jobs.active()
    assert inspect_job(stub.aggregator, "late") == ["inactive"]


# -- residency ------------------------------------------------------------------------------------------

class LedgerBackend(Backend):
    """A device of ``capacity`` bytes that refuses (GpuOutOfMemory) an upload that does not fit,
    and records what it was told, in order."""

    name = "ledger"

    def __init__(self, capacity: int, sizes: dict):
        self._capacity, self.sizes, self.on_device, self.calls = capacity, sizes, {}, []
        self.cpu = CpuBackend(threads=1)

    def resident_bytes(self, pk, r1cs):
        return self.sizes[pk.circuit_digest]

    def capacity(self):
        return self._capacity

    def load(self, pk, r1cs):
        from gpu.budget import DeviceMemoryExhausted

        need = self.sizes[pk.circuit_digest]
        if pk.circuit_digest not in self.on_device:
            if sum(self.on_device.values()) + need > self._capacity:
                raise DeviceMemoryExhausted("does not fit", device="ledger")
            self.on_device[pk.circuit_digest] = need
            self.calls.append(("load", pk.circuit_digest))

    def unload(self, digest):
        if self.on_device.pop(digest, None) is not None:
            self.calls.append(("unload", digest))

    def prove_terms(self, pk, r1cs, z, timer):
        return self.cpu.prove_terms(pk, r1cs, z, timer)


def test_two_keys_that_do_not_fit_together_swap_by_eviction(key_dir):
    from cluster.pipeline.prover import Prover, parse_device

    a, b = SQUARES_A.r1cs().digest(), SQUARES_B.r1cs().digest()
    device = LedgerBackend(capacity=100, sizes={a: 60, b: 60})
    prover = Prover(parse_device("cpu:0"), KeyCache(key_dir))
    prover.backend = device
    evicted = []
    prover.load(SQUARES_A)
    prover.load(SQUARES_B, on_evict=evicted.append)
    # A left the device before B went up: the device never saw both at once
    assert device.calls == [("load", a), ("unload", a), ("load", b)]
    assert evicted == [SQUARES_A.name] and prover.resident_names() == [SQUARES_B.name]
    prover.load(SQUARES_B)  # resident: nothing moves
    assert len(device.calls) == 3
    prover.load(SQUARES_A, on_evict=evicted.append)
    assert evicted == [SQUARES_A.name, SQUARES_B.name] and prover.resident_names() == [SQUARES_A.name]
    assert prover.used_memory() == 60


def test_a_key_larger_than_the_device_is_refused_as_out_of_memory(key_dir):
    from cluster.pipeline.prover import Prover, parse_device
    from cluster.pipeline.retry import classify
    from gpu.budget import DeviceMemoryExhausted

    a = SQUARES_A.r1cs().digest()
    prover = Prover(parse_device("cpu:0"), KeyCache(key_dir))
    prover.backend = LedgerBackend(capacity=50, sizes={a: 60})
    with pytest.raises(DeviceMemoryExhausted, match="needs 60 bytes resident, more than device cpu:0 can hold") as e:
        prover.load(SQUARES_A)
    assert classify(e.value).transient  # another device may hold it
    assert prover.resident_names() == []


def test_a_key_in_use_is_not_evicted(key_dir):
    from cluster.pipeline.prover import Prover, parse_device
    from gpu.errors import GpuOutOfMemory

    a, b = SQUARES_A.r1cs().digest(), SQUARES_B.r1cs().digest()
    prover = Prover(parse_device("cpu:0"), KeyCache(key_dir))
    prover.backend = LedgerBackend(capacity=100, sizes={a: 60, b: 60})
    prover.load(SQUARES_A)
    prover._busy.add(SQUARES_A.name)  # a proof of A is running (a prefetch of B arrives)
    with pytest.raises(GpuOutOfMemory):
        prover.load(SQUARES_B)
    assert prover.resident_names() == [SQUARES_A.name]
