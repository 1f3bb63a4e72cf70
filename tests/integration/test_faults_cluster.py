"""The fault-injection suite (issues 15, 27), a short campaign of bench/fault_campaign.py in CI: a
real CPU cluster of ``zkhive up`` with its real keeper (its own Redis with an append-only file,
1 synthesis worker, 1 aggregate worker, 2 CPU provers, porep-lite-4k, default delivery settings)
under SIGKILL of each worker role at
random points (the hand-over window 0-60 ms after a submit or a routing, mid-synthesis,
mid-prove, mid-aggregate, a synthesis pool child), Redis killed and restarted from its AOF,
Redis killed while the keeper waits for a restarted worker, a frozen (SIGSTOP) prover,
duplicate deliveries and a corrupt verifying key. (The sustained kills of every role, the killed
keeper and the frozen sole worker: the long campaign, and test_keeper.py on `up`.)

Each scenario asserts that every job ended verified (checked here by the pairing verifier) or
failed with a named reason within a bound, that no partition was stored twice (two winners) nor
a proof other than the first stored one assembled, and that no lost unit waited more than 60 s
before its re-dispatch (the issue's Must; the table printed has the longest wait, goal 15 s).
The longer campaign: ``python bench/fault_campaign.py`` (docs/faults.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import fault_campaign as fc  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.timeout(600)]

#: the Must of issue 15: no lost unit waits longer than this before its re-dispatch
MAX_WAIT_S = 60.0
#: a killed holder's unit: the keeper's poll (1 s), the watchdog's look (0.25 s), with room
GONE_WAIT_S = 3.0
SEED = 15


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    c = fc.FaultCluster(tmp_path_factory.mktemp("faults"), "porep-lite-4k")
    c.start()
    outcomes = []
    yield c, outcomes
    c.stop()
    # the table of this run (shown with -rA or on failure; docs/faults.md has the long one)
    print("\n" + fc.HEADER + "\n" + "\n".join(o.row() for o in outcomes))


def run(campaign, name: str, faults: int) -> fc.Outcome:
    c, outcomes = campaign
    out = fc.run_scenario(c, name, faults, seed=SEED, spacing_s=6.0, bound_s=150.0)
    outcomes.append(out)
    assert not out.lost, f"{name}: jobs that never ended: {out.lost}\n{out.row()}"
    assert out.doubled == 0, out.row()
    assert not any("DOES NOT VERIFY" in e for e in out.failed.values()), out.failed
    assert out.longest_wait() <= MAX_WAIT_S, sorted(out.waits, reverse=True)[:3]
    assert not out.unexplained, out.unexplained  # every re-dispatch follows a fault
    return out


def test_sigkill_of_every_worker_role_loses_no_job(campaign):
    """... and a unit whose holder was killed under it is re-dispatched once the keeper sees the
    death (its poll, 1 s; it asks the watchdogs for a sweep, which sees the holder's PID gone),
    not at the lease's lapse (up to the 5 s TTL after the last renewal, then the 2 s sweep)."""
    out = run(campaign, "worker-kill", 6)  # each kind of kill once (shuffled by the seed)
    assert out.kills == 6 and out.restarts >= 4
    gone = [w for w in out.waits if " no longer runs on " in str(w[3])]
    print("re-dispatches after a kill (s, job, unit, reason):", *sorted(out.waits), sep="\n  ")
    assert gone, out.waits
    assert max(w[0] for w in gone) <= GONE_WAIT_S, gone
    assert out.verified == out.jobs, out.failed       # a killed worker is no reason to fail a job
    assert out.redispatches >= 1


def test_redis_killed_and_restarted_from_its_aof_loses_no_job(campaign):
    out = run(campaign, "redis-restart", 2)
    assert out.kills == 2 and out.restarts == 2
    assert out.verified == out.jobs, out.failed


def test_redis_killed_while_the_keeper_waits_for_a_worker_comes_back_at_once(campaign):
    """Issue 27: Redis stayed down 181 s behind a prover's readiness wait."""
    out = run(campaign, "redis-during-restart", 1)
    assert out.kills == 2 and not out.never_back(), out.recover
    assert out.verified == out.jobs, out.failed
    [redis_back] = [t for name, t in out.recover if name == "redis"]
    assert redis_back < 15, out.recover  # the keeper's 1 s backoff, Redis's start, its PING


def test_a_frozen_prover_s_partition_moves_on(campaign):
    out = run(campaign, "sigstop", 1)
    assert out.verified == out.jobs, out.failed
    # its lease lapsed while it was stopped: the partition was re-dispatched to the other prover
    assert out.redispatches >= 1 and all("lapsed" in w[3] for w in out.waits[:1]), out.waits


def test_duplicate_deliveries_neither_fail_nor_double(campaign):
    out = run(campaign, "duplicates", 1)
    assert out.verified == out.jobs, out.failed
    assert out.duplicates >= 1


def test_a_corrupt_verifying_key_fails_the_job_at_once_naming_the_key(campaign):
    out = run(campaign, "corrupt-vk", 1)
    assert out.verified == 0 and len(out.failed) == out.jobs
    for err in out.failed.values():
        assert err.startswith("cannot verify: unreadable key: ") and "/keys/porep-lite-4k." in err, err
    assert out.seconds < 60  # not the job deadline (4 h)


def test_a_proof_finished_while_redis_is_down_is_stored_when_it_returns(campaign):
    """Redis killed right after a prover picked a partition up and kept down longer than the
    proof takes: the prover's final writes wait for Redis (bounded) and store its proof; the
    partition is not re-dispatched and its message is not left to the visibility timeout."""
    import time

    c, _ = campaign
    c.wait_all_ready()
    since = time.time()
    c.submit("redis-final-0", 0)
    pickup = c.first_event(["redis-final-0"], "prove_pickup", since=since)
    assert pickup is not None
    # past its first stage event (the assignment fetched: the proof itself is under way), so the
    # kill lands mid-proof on a loaded machine too, not between the pickup and that write
    end = time.monotonic() + 30
    while not any(e["event"] == "stage" and e.get("stage") == "fetch_assignment"
                  and e["partition"] == pickup["partition"] for e in c.events("redis-final-0")):
        assert time.monotonic() < end, "no fetch_assignment stage after the pickup"
        time.sleep(0.005)
    c.restart_redis(5.0)  # a porep-lite-4k proof takes 1-2 s here
    restarted = time.time()
    c.wait_jobs(["redis-final-0"], 120)
    assert c.status("redis-final-0") == "done"
    k = pickup["partition"]
    [end] = [e for e in c.events("redis-final-0") if e["event"] == "prove_end" and e["partition"] == k]
    assert end["worker"] == pickup["worker"] and end["task_id"] == pickup["task_id"], (
        "\n".join(str(e) for e in c.events("redis-final-0"))
        + "\n" + (c.run_dir / "logs" / "keeper.log").read_text()[-2000:])
    assert end["t"] > restarted - 0.5  # written after Redis came back
    assert not [e for e in c.events("redis-final-0") if e["event"] == "redispatched" and e.get("partition") == k]
    prover = c.worker_of(pickup["worker"])
    text = prover.log.read_text(errors="replace")
    assert f"job redis-final-0 partition {k}: " in text and "Redis unavailable" in text  # it did wait


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not __import__("os").environ.get("ZKHIVE_LONG_FAULTS"),
                    reason="the long campaign (~25 min): set ZKHIVE_LONG_FAULTS=1, or run bench/fault_campaign.py")
def test_the_long_campaign(tmp_path):
    """The campaign of docs/faults.md: exit status 0 means no job lost, nothing doubled, no
    proof that does not verify, no wait over 30 s and every killed process back."""
    assert fc.main(["--seed", "2", "--root", str(tmp_path / "campaign")]) == 0
