"""What the reconciler does once it may judge (issue 35: the `reconcile` mutation target killed
35 of 72 with only the "settled" rule and the lease transitions tested): one sweep of
``reconcile.reconcile_job`` over leases and units crafted on a real Redis, each rule's decision
and the events it writes, read back from the job's timeline. No worker runs; nothing sleeps to
decide an outcome (a lease is made lapsed by a TTL of 50 ms, then waited out)."""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration


def _setup(cluster, **overrides):
    from cluster.pipeline.app import runtime

    cluster.flush()
    cluster.configure_here(ZKHIVE_DELIVERY__LEASE_TTL_S="1", **overrides)
    rt = runtime()
    while int(rt.redis.info("server")["uptime_in_seconds"]) < 1:  # settled: up a lease TTL
        time.sleep(0.05)
    return rt


def _job(jobs, job_id: str, partitions: int, params: str = "squares-a"):
    """A job record as submission stores it (``params``: the set its proofs are routed by)."""
    from cluster.pipeline.blobs import BlobRef
    from cluster.pipeline.jobs import JobRecord

    now = time.time()
    rec = JobRecord(job_id=job_id, params=params, circuit_digest="0" * 16, num_partitions=partitions,
                    priority=5, c1=BlobRef(store="redis", sha256="0" * 64, size=0, kind="c1"),
                    submitted_at=now, deadline_at=now + 600)
    assert jobs.create(rec)
    return rec


def _events(r, job_id, *names):
    from cluster.pipeline import timeline
    return [e for e in timeline.load(r, job_id) if e["event"] in names]


def test_lapsed_leases_are_broken_and_redispatched_away_from_the_device_a_live_one_is_left(cluster, caplog):
    """Partition 0 leased and renewed (live): left alone, and the sweep goes on to the others.
    Partition 1's prove lease on cpu:0 and partition 2's synthesis lease lapsed: each broken,
    ``lease_lapsed`` with the seconds since it lapsed, re-dispatched (the proof away from cpu:0,
    the synthesis anywhere) with the seconds since its last renewal."""
    from cluster.pipeline import reconcile
    from cluster.pipeline.lease import Leases

    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="0")
        r = rt.redis
        rec = _job(rt.jobs, "lapse", partitions=3)
        live = Leases(r, 3600, 3600).acquire("lapse", 0, "prove", worker="prove.vm.cpu1.0", device="cpu:1",
                                             task_id="live-task")
        short = Leases(r, 0.05, 3600)
        assert live.taken
        assert short.acquire("lapse", 1, "prove", worker="prove.vm.cpu0.0", device="cpu:0", task_id="t1").taken
        # a synthesis lease names no device to avoid, whatever device its record carries
        assert short.acquire("lapse", 2, "synthesis", worker="synthesis.vm.0", device="cpu:3", task_id="t2").taken
        time.sleep(0.3)
        before = {k: Leases(r, 1, 3600).get("lapse", k) for k in (1, 2)}
        seen = reconcile.look(rt)
        assert seen.settled
        with caplog.at_level("WARNING", logger="cluster.pipeline.reconcile"):
            did = reconcile.reconcile_job(rt, rec, {}, seen)
        assert did == ["redispatch 1", "redispatch 2"], did
        logged = [m for m in caplog.messages if m.startswith("job lapse ")]
        assert [m.split(":")[0] for m in logged] == ["job lapse partition 1", "job lapse partition 2"], logged
        assert all(m.endswith("; re-dispatching") for m in logged), logged
        lapsed = _events(r, "lapse", "lease_lapsed")
        assert [(e["partition"], e["stage"], e.get("device")) for e in lapsed] == [(1, "prove", "cpu:0"),
                                                                                  (2, "synthesis", "cpu:3")], lapsed
        for e in lapsed:
            want = round(seen.now - before[e["partition"]].expires_at, 3)
            assert e["lapsed_s"] == want and 0 < want < 30, (e, want)
        sent = _events(r, "lapse", "redispatched")
        assert [(e["partition"], e["exclude"]) for e in sent] == [(1, ["cpu:0"]), (2, [])], sent
        for e in sent:
            assert e["waited_s"] == round(seen.now - before[e["partition"]].renewed_at, 3), e
            assert 0.25 < e["waited_s"] < 30, e
            assert e["reason"].startswith(f"lease of {before[e['partition']].holder()} lapsed "), e
        # the live lease: untouched, no event for partition 0
        assert Leases(r, 1, 3600).get("lapse", 0) is not None
        assert not [e for e in _events(r, "lapse", "lease_lapsed", "redispatched", "unaccounted")
                    if e.get("partition") == 0]
        assert Leases(r, 1, 3600).get("lapse", 1) is None and Leases(r, 1, 3600).get("lapse", 2) is None
    finally:
        cluster.configure_here()


def test_a_lease_whose_holder_of_this_host_is_gone_is_redispatched_before_it_lapses(cluster):
    """Three live (hour-long) prove leases: partition 0's holder a process of this host that has
    exited (a SIGKILLed prover), partition 1's a live process of this host, partition 2's a
    gone PID of another host (whose processes this machine cannot see). Partition 0: broken at
    once, ``holder_gone`` with its PID and the seconds its lease had left, re-dispatched away
    from its device, even before Redis has been up a lease TTL (a dead PID is dead then too).
    The other two: untouched."""
    import subprocess

    from cluster.pipeline import reconcile
    from cluster.pipeline.lease import Leases

    live_proc = subprocess.Popen(["sleep", "60"])
    dead_proc = subprocess.Popen(["true"])
    dead_proc.wait()
    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="3600")
        r, host = rt.redis, rt.settings.worker.host
        rec = _job(rt.jobs, "gone", partitions=3)
        hour = Leases(r, 3600, 3600)
        for k, pid, where in ((0, dead_proc.pid, host), (1, live_proc.pid, host),
                              (2, dead_proc.pid, host + "-elsewhere")):
            assert hour.acquire("gone", k, "prove", worker=f"prove.{where}.cpu0.0", device="cpu:0",
                                task_id=f"t{k}", host=where, pid=pid).taken
        before = hour.get("gone", 0)
        seen = reconcile.look(rt)
        seen.settled = False
        assert reconcile.reconcile_job(rt, rec, {}, seen) == ["redispatch 0"]
        gone = _events(r, "gone", "holder_gone")
        assert [(e["partition"], e["pid"], e["stage"]) for e in gone] == [(0, dead_proc.pid, "prove")]
        assert 3500 < gone[0]["left_s"] <= 3600, gone
        sent = _events(r, "gone", "redispatched")
        assert [(e["partition"], e["exclude"]) for e in sent] == [(0, ["cpu:0"])], sent
        assert sent[0]["reason"] == (f"{before.holder()} is gone (pid {dead_proc.pid} no longer "
                                     f"runs on {host})"), sent
        assert not _events(r, "gone", "lease_lapsed")
        assert hour.get("gone", 0) is None
        assert hour.get("gone", 1) is not None and hour.get("gone", 2) is not None
        # the lease's own holder (this process) is never taken for gone, nor a live one
        assert not Leases.holder_gone(hour.get("gone", 1), host)
        assert not Leases.holder_gone(hour.get("gone", 2), host)
    finally:
        live_proc.kill()
        cluster.configure_here()


def test_a_sweep_asked_for_runs_at_once_whatever_the_interval_and_the_lock(cluster):
    """``request_sweep`` (the keeper, when a worker is gone): a watchdog thread whose interval
    is a minute, the sweep lock held by another process, sweeps within its deadline poll and
    re-dispatches the gone holder's unit; without the request it does not (half a second
    watched), and the request is taken once."""
    import subprocess

    from cluster.pipeline import watchdog
    from cluster.pipeline.lease import Leases

    dead_proc = subprocess.Popen(["true"])
    dead_proc.wait()
    dog = None
    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__WATCHDOG_INTERVAL_S="60")
        r, host = rt.redis, rt.settings.worker.host
        _job(rt.jobs, "asked", partitions=1)
        assert Leases(r, 3600, 3600).acquire("asked", 0, "prove", worker="prove.x.cpu0.0",
                                             device="cpu:0", task_id="t0", host=host,
                                             pid=dead_proc.pid).taken
        r.set(watchdog.LOCK, "another process", px=60_000)
        dog = watchdog.Watchdog(rt).start()
        time.sleep(0.5)
        assert _events(r, "asked", "redispatched") == []
        t0 = time.monotonic()
        watchdog.request_sweep(r)
        while not _events(r, "asked", "redispatched") and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        took = time.monotonic() - t0
        assert [e["partition"] for e in _events(r, "asked", "redispatched")] == [0]
        assert took < 1.0, took
        assert r.exists(watchdog.WAKE) == 0
    finally:
        if dog is not None:
            dog.stop()
        cluster.configure_here()


def test_an_unaccounted_unit_waits_its_grace_then_is_redispatched_and_a_lease_clears_the_clock(cluster):
    """Partitions 0 and 1 nowhere (not queued, leased or done). Within the grace: nothing sent,
    each unit's first-seen time recorded. Partition 0 then leased: its clock is cleared. Past the
    grace (a sweep with grace 0): partition 1 re-dispatched with ``unaccounted`` naming where it
    was lost and for how long, ``waited_s`` the same; partition 0, leased, is not."""
    from cluster.pipeline import reconcile
    from cluster.pipeline.app import runtime
    from cluster.pipeline.lease import Leases

    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="3600")
        r = rt.redis
        rec = _job(rt.jobs, "lost", partitions=2)
        assert reconcile.reconcile_job(rt, rec, {}, reconcile.look(rt)) == []
        clock = {k.decode(): float(v) for k, v in r.hgetall(reconcile.unaccounted_key("lost")).items()}
        assert sorted(clock) == ["0", "1"], clock
        assert Leases(r, 3600, 3600).acquire("lost", 0, "synthesis", worker="synthesis.vm.0", task_id="t0").taken
        assert reconcile.reconcile_job(rt, rec, {}, reconcile.look(rt)) == []
        left = {k.decode() for k in r.hkeys(reconcile.unaccounted_key("lost"))}
        assert left == {"1"}, left  # the lease accounted for partition 0: its clock is gone
        time.sleep(0.2)
        cluster.configure_here(ZKHIVE_DELIVERY__LEASE_TTL_S="1", ZKHIVE_DELIVERY__RECONCILE_GRACE_S="0")
        rt = runtime()
        seen = reconcile.look(rt)
        assert reconcile.reconcile_job(rt, rec, {}, seen) == ["redispatch 1"]
        lost = _events(r, "lost", "unaccounted")
        want = round(seen.now - clock["1"], 3)
        assert [(e["partition"], e["detail"]) for e in lost] == [
            (1, "not queued, leased or done (lost in the hand-over)")], lost
        assert lost[0]["for_s"] == want and 0.2 < want < 60, (lost, want)
        sent = _events(r, "lost", "redispatched")
        assert [(e["partition"], e["reason"], e["waited_s"]) for e in sent] == [
            (1, "partition not queued, leased or done (lost in the hand-over)", want)], sent
        assert not r.hexists(reconcile.unaccounted_key("lost"), "1")  # re-sent: the clock starts over
    finally:
        cluster.configure_here()


def test_a_proof_queued_only_where_no_live_prover_serves_is_rerouted_and_nothing_else_is(cluster):
    """Partition 0's proof waits only in prove.vm.cpu7 and prove.unassigned, which no ready prover serves, while
    prove.vm.cpu1 is served: re-routed (its assignment kept: no resynthesis), the event naming the
    first dead queue. Not re-routed: partition 1, also queued live (cpu1); partition 2, queued dead but
    with no assignment (a synthesis still to come); any partition when no prove queue is live
    (nowhere better to send it); the aggregation (its queue is not a prove queue)."""
    from circuits_for_tests import SQUARES_A  # a re-route routes the proof: a registered set
    from cluster.pipeline import reconcile
    from cluster.pipeline.blobs import BlobRef
    from cluster.pipeline.lease import server_time

    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="3600")
        r = rt.redis
        rec = _job(rt.jobs, "dead", partitions=3, params=SQUARES_A.name)
        ref = BlobRef(store="redis", sha256="1" * 64, size=1, kind="assignment")
        for k in (0, 1):
            rt.jobs.set_assignment("dead", k, ref)
        where = {("dead", "0"): ["prove.vm.cpu7", "prove.unassigned"], ("dead", "1"): ["prove.vm.cpu7", "prove.vm.cpu1"],
                 ("dead", "2"): ["prove.vm.cpu7"]}

        def seen(live):
            return reconcile.Seen(where=dict(where), now=server_time(r), settled=True, live_prove_queues=live)
        assert reconcile.reconcile_job(rt, rec, {}, seen(set())) == []
        assert _events(r, "dead", "redispatched") == []
        assert reconcile.reconcile_job(rt, rec, {}, seen({"prove.vm.cpu1"})) == ["reroute 0"]
        sent = _events(r, "dead", "redispatched")
        assert [(e["partition"], e["reason"], e["resynthesize"], "waited_s" in e) for e in sent] == [
            (0, "queue prove.vm.cpu7 has no live prover", False, False)], sent
        assert not r.exists(reconcile.unaccounted_key("dead"))  # queued units are accounted for
        # every partition proved: the aggregation's unit, queued in the aggregate queue, is fine
        where = {("dead", "aggregate"): ["aggregate"]}
        assert reconcile.reconcile_job(rt, rec, {0: b"", 1: b"", 2: b""}, seen({"prove.vm.cpu1"})) == []
    finally:
        cluster.configure_here()


def test_a_lease_renewed_since_the_sweep_looked_is_left_and_the_sweep_goes_on(cluster):
    """The sweep's picture is a moment old: partition 0's lease looks lapsed at the sweep's time
    (``Seen.now`` ahead of the server's clock) but Redis, judging at its own time, refuses to
    break it (renewed meanwhile): nothing happens to it, and partition 1's lease, lapsed for
    real, is still broken and re-dispatched after it."""
    from cluster.pipeline import reconcile
    from cluster.pipeline.lease import Leases, server_time

    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="3600")
        r = rt.redis
        rec = _job(rt.jobs, "renewed", partitions=2)
        assert Leases(r, 5, 3600).acquire("renewed", 0, "prove", worker="prove.vm.cpu1.0", device="cpu:1",
                                          task_id="alive").taken
        assert Leases(r, 0.05, 3600).acquire("renewed", 1, "prove", worker="prove.vm.cpu0.0", device="cpu:0",
                                             task_id="gone").taken
        time.sleep(0.3)
        seen = reconcile.look(rt)
        seen.now = server_time(r) + 10  # the sweep sees both lapsed; Redis sees only partition 1's
        assert reconcile.reconcile_job(rt, rec, {}, seen) == ["redispatch 1"]
        assert Leases(r, 5, 3600).get("renewed", 0) is not None
        assert [e["partition"] for e in _events(r, "renewed", "lease_lapsed", "redispatched")] == [1, 1]
    finally:
        cluster.configure_here()


def test_before_redis_has_been_up_a_lease_ttl_nothing_is_judged_but_live_leases_still_clear_clocks(cluster):
    """Not settled (Redis restarted less than a lease TTL ago): partition 0, nowhere, is neither
    judged nor given an unaccounted clock; partition 1, leased and live, still has the clock an
    earlier sweep started cleared (the sweep goes on past partition 0)."""
    from cluster.pipeline import reconcile
    from cluster.pipeline.lease import Leases

    try:
        rt = _setup(cluster, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="3600")
        r = rt.redis
        rec = _job(rt.jobs, "unsettled", partitions=2)
        r.hset(reconcile.unaccounted_key("unsettled"), "1", "1.0")  # an earlier sweep's clock
        assert Leases(r, 3600, 3600).acquire("unsettled", 1, "synthesis", worker="synthesis.vm.0",
                                             task_id="t1").taken
        seen = reconcile.look(rt)
        seen.settled = False
        assert reconcile.reconcile_job(rt, rec, {}, seen) == []
        assert r.hkeys(reconcile.unaccounted_key("unsettled")) == []
        assert _events(r, "unsettled", "lease_lapsed", "unaccounted", "redispatched") == []
    finally:
        cluster.configure_here()


def test_totals_count_each_job_as_it_ends_once(cluster):
    """GetStatus's totals (``JobStore.totals``: a counter, not a read of every job the store
    holds, which the status board did 4 times a second): done and failed counted once each,
    however often the end is attempted; cancelled counted in neither; a failed job resubmitted
    and done counts in both (two attempts ended)."""
    from cluster.pipeline.blobs import BlobRef

    cluster.flush()
    jobs = cluster.runtime().jobs
    assert jobs.totals() == (0, 0)
    a, b, c = (_job(jobs, f"tot-{x}", 1) for x in "abc")
    ref = BlobRef(store="redis", sha256="0" * 64, size=0, kind="result")
    assert jobs.finish(a.job_id, ref) and not jobs.finish(a.job_id, ref) and not jobs.fail(a.job_id, "late")
    assert jobs.fail(b.job_id, "bad input") and not jobs.fail(b.job_id, "again")
    assert jobs.cancel(c.job_id)
    assert jobs.totals() == (1, 1)
    again = b.model_copy(update={"attempt": b.attempt + 1, "submitted_at": time.time()})
    assert jobs.new_attempt(b, again) and jobs.finish(b.job_id, ref)
    assert jobs.totals() == (2, 1)
