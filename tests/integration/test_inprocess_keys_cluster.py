"""In-process keys through the real cluster (real Redis, real Celery workers, the pairing
verifier): two CPU provers make porep-lite-4k's key in their own processes from one seed, no
proving key file ever exists, the aggregate worker verifies every partition against the one
published vk; and the refusals: a set no prover makes or holds, a prover without a seed, a
prover with another seed, a corrupt published vk (at a prover's start, and at aggregation)."""
from __future__ import annotations

import json

import re

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = "fleet-dev-ceremony"


@pytest.fixture
def keydir(cluster, tmp_path):
    d = tmp_path / "keys"
    cluster.configure_here(ZKHIVE_SRS__PARAM_CACHE=str(d))
    return d


def _env(keydir, names, seed=SEED, preload=True):
    env = {"ZKHIVE_SRS__PARAM_CACHE": str(keydir), "ZKHIVE_SRS__IN_PROCESS": json.dumps(names)}
    if preload:
        env["ZKHIVE_SRS__PRELOAD"] = json.dumps(names)
    if seed is not None:
        env["ZKHIVE_SRS__SETUP_SEED"] = seed
    return env


def _c1(seed: int) -> dict:
    from synthesis.porep import SETS, TINY, c1_document, generate

    s = seed.to_bytes(32, "little")
    return c1_document(generate(SETS[TINY], s), s)


def test_two_provers_make_the_key_in_process_and_every_partition_verifies(cluster, workers, keydir):
    from cluster.pipeline import registry
    from cluster.client import JobFailed, submit
    from gpu.groth16 import Proof, verify
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    circuit = get_circuit(TINY)
    env = _env(keydir, [TINY])
    procs = [workers("synthesis", wait=False, ZKHIVE_SRS__PARAM_CACHE=str(keydir)),
             workers("aggregate", wait=False, ZKHIVE_SRS__PARAM_CACHE=str(keydir)),
             workers("prove", "cpu:0", wait=False, **env), workers("prove", "cpu:1", wait=False, **env)]
    for p in procs:
        p.wait_ready(cluster.redis, timeout_s=240)
    provers = registry.workers(cluster.redis, role="prove")
    assert all(w.makes_keys == [TINY] and w.resident_keys == [TINY] for w in provers)
    rt = cluster.runtime()
    assert not rt.keys.path(circuit, "pk").exists()  # never a file: made and held in process
    vk = rt.keys.load_vk(circuit)                    # the one published verifying key
    assert sorted(p.name for p in keydir.iterdir()) == [rt.keys.path(circuit, "vk").name]

    results = [submit(_c1(s), job_id=f"inproc-{s}") for s in (1, 2)]
    devices = set()
    for s, h in zip((1, 2), results):
        res = h.result(timeout=180)
        parsed = circuit.parse_c1(_c1(s))
        for k, raw in enumerate(res.partition_proofs()):
            assert verify(vk, circuit.public_inputs(parsed, k), Proof.from_bytes(raw))
        assert not verify(vk, circuit.public_inputs(parsed, 1), Proof.from_bytes(res.partition_proofs()[0]))
        devices |= {p["device"] for p in res.provers}
    assert devices == {"cpu:0", "cpu:1"}  # both provers' own keys verify under one vk: same seed

    # the published vk corrupted under a running cluster: the aggregation refuses, naming the file
    path = rt.keys.path(circuit, "vk")
    path.write_bytes(path.read_bytes()[:40] + b"\xff" * 16 + path.read_bytes()[56:])
    with pytest.raises(JobFailed, match=rf"cannot verify: unreadable key: {re.escape(str(path))}"):
        submit(_c1(3), job_id="inproc-corrupt").result(timeout=180)
    assert all(p.proc.poll() is None for p in procs)


def test_refusals(cluster, workers, keydir):
    from cluster.client import submit
    from cluster.errors import JobError
    from gpu.groth16.setup import setup
    from tests.integration.circuits_for_tests import SQUARES_A, SQUARES_B, make_c1

    rt = cluster.runtime()
    good = workers("prove", "cpu:0", **_env(keydir, [SQUARES_A.name]))
    # a set no prover makes, holds or has a key file for: refused at submission
    with pytest.raises(JobError, match=r"no keys for parameter set 'test-squares-5x2' anywhere .*no prover makes it"):
        submit(make_c1(SQUARES_B, 1), job_id="nobody")
    submit(make_c1(SQUARES_A, 1), job_id="someone")  # accepted: a live prover makes it

    # in_process without a seed: the worker does not start
    noseed = workers("prove", "cpu:1", wait=False, **_env(keydir, [SQUARES_A.name], seed=None))
    assert noseed.wait(60) != 0
    assert "neither srs.setup_seed nor srs.setup_seed_file is set" in noseed.log_text()
    # another seed: its key would not verify under the published vk; refused naming the file
    other = workers("prove", "cpu:1", wait=False, **_env(keydir, [SQUARES_A.name], seed="another"))
    assert other.wait(60) != 0
    vk_path = rt.keys.path(SQUARES_A, "vk")
    assert f"the published verifying key {vk_path}" in other.log_text()
    assert "another setup seed or ceremony made it" in other.log_text()
    # a corrupt published vk: a prover about to publish its own refuses to start, naming the file
    _, vk_b = setup(SQUARES_B.r1cs(), seed=SEED.encode())
    bad = rt.keys.path(SQUARES_B, "vk")
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(vk_b.to_bytes()[:-7])
    corrupt = workers("prove", "cpu:2", wait=False, **_env(keydir, [SQUARES_B.name]))
    assert corrupt.wait(60) != 0
    assert f"the published verifying key {bad} of test-squares-5x2 is unreadable" in corrupt.log_text()
    assert good.proc.poll() is None


def test_a_prover_killed_mid_prove_is_replaced_and_its_key_made_again(cluster, workers, keydir):
    """The owner of an in-process key dies (SIGKILL mid-prove): its partition is re-proved by
    the other prover, a replacement on its device makes the same key again from the seed (the
    published vk is accepted, not replaced), and every proof verifies under that one vk."""
    import signal

    from cluster.pipeline import registry
    from cluster.client import submit
    from gpu.groth16 import Proof, verify
    from tests.integration.circuits_for_tests import SQUARES_SLOW, make_c1
    from test_cluster_faults import events, wait_for

    env = _env(keydir, [SQUARES_SLOW.name])
    procs = [workers("synthesis", wait=False, ZKHIVE_SRS__PARAM_CACHE=str(keydir)),
             workers("aggregate", wait=False, ZKHIVE_SRS__PARAM_CACHE=str(keydir)),
             workers("prove", "cpu:0", wait=False, **env), workers("prove", "cpu:1", wait=False, **env)]
    infos = [p.wait_ready(cluster.redis, timeout_s=120) for p in procs]
    by_id = {i.worker_id: p for i, p in zip(infos, procs)}
    vk_path = cluster.runtime().keys.path(SQUARES_SLOW, "vk")
    published = vk_path.read_bytes()
    doc = make_c1(SQUARES_SLOW, 21)
    job = submit(doc, job_id="inproc-kill")
    pickup = wait_for(lambda: events(cluster, "inproc-kill", "prove_pickup"), what="a prove pickup")[0]
    victim = by_id[pickup["worker"]]
    victim.signal(signal.SIGSTOP)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    again = workers("prove", pickup["device"], wait=False, **env)
    res = job.result(timeout=120)
    vk = cluster.runtime().keys.load_vk(SQUARES_SLOW)
    c1 = SQUARES_SLOW.parse_c1(doc)
    for k, raw in enumerate(res.partition_proofs()):
        assert verify(vk, SQUARES_SLOW.public_inputs(c1, k), Proof.from_bytes(raw)), f"partition {k}"
    info = again.wait_ready(cluster.redis, timeout_s=120)
    assert info.resident_keys == [SQUARES_SLOW.name] and info.makes_keys == [SQUARES_SLOW.name]
    assert vk_path.read_bytes() == published  # made again, the same key: the vk stays as it was
    assert again.proc.poll() is None and registry.workers(cluster.redis, role="prove")
