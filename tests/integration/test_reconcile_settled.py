"""The reconciler's "settled" rule, driven explicitly (issue 35: only
test_faults_cluster.py::test_a_proof_finished_while_redis_is_down_is_stored_when_it_returns caught
its removal, two runs in three: whether a worker's sweep fell between Redis coming back and the
prover's renewal was up to the scheduler). After Redis
restarts from its append-only file, leases and unaccounted units are judged only once Redis has
been up for ``delivery.lease_ttl_s`` (the workers reconnect and renew first). A real Redis with
an AOF holds a job whose partition 0 is leased by a holder that stopped renewing (lapsed) and
whose partition 1 is nowhere (lost in the hand-over); Redis is restarted; each sweep is judged
with the lease TTL set from the uptime the sweep itself read (``reconcile.look``), just above it
(nothing may happen, not even the unaccounted clock) and equal to it (both units re-dispatched).
No background reconciler runs and no sleep decides the outcome."""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration


def _uptime(r) -> int:
    return int(r.info("server")["uptime_in_seconds"])


def _sweep(cluster, srv, job_id: str, ttl_of):
    """One watchdog sweep of ``job_id`` with ``delivery.lease_ttl_s = ttl_of(uptime)``, the uptime
    being the one the sweep's own ``look`` read (retried when the second ticked meanwhile)."""
    from cluster.pipeline import reconcile, watchdog
    from cluster.pipeline.app import runtime

    r = srv.client()
    for _ in range(20):
        u0 = _uptime(r)
        cluster.configure_here(ZKHIVE_REDIS__URL=srv.url, ZKHIVE_DELIVERY__RECONCILE_GRACE_S="0",
                               ZKHIVE_DELIVERY__LEASE_TTL_S=str(ttl_of(u0)))
        rt = runtime()
        seen = reconcile.look(rt)
        if _uptime(r) == u0:
            return u0, seen, watchdog.inspect_job(rt, job_id, seen=seen), rt
    raise AssertionError("Redis's uptime ticked during every one of 20 sweeps")


def test_leases_and_lost_units_are_judged_only_once_redis_has_been_up_a_lease_ttl(cluster, tmp_path):
    from cluster.ops.redis_server import RedisServer
    from cluster.pipeline import timeline
    from cluster.pipeline.lease import Leases, server_time
    from cluster.pipeline.queues import queued_messages
    from cluster.pipeline.reconcile import unaccounted_key
    from test_first_writer_wins import _job

    srv = RedisServer(password=cluster.password, data_dir=tmp_path / "redis", persist=True).start()
    try:
        r = srv.client()
        cluster.configure_here(ZKHIVE_REDIS__URL=srv.url)
        from cluster.pipeline.app import runtime
        rt = runtime()
        rec = _job(rt.jobs, "settle", partitions=2)
        held = Leases(r, 0.05, 3600).acquire("settle", 0, "prove", worker="prove.vm.cpu0.0", device="cpu:0",
                                             task_id="frozen-task")
        assert held.taken
        srv.stop()       # a graceful stop writes the AOF; the lease and the job come back with it
        srv.start()
        r = srv.client()
        lease = Leases(r, 5, 3600).get("settle", 0)
        assert lease is not None and lease.lapsed(server_time(r))  # nobody renewed it
        while _uptime(r) < 1:  # a lease TTL of 0 is not a setting; wait for the first second
            time.sleep(0.05)

        # up for less than the lease TTL: nothing judged, nothing started
        u, seen, did, rt = _sweep(cluster, srv, "settle", lambda up: up + 0.5)
        assert not seen.settled and did == [], (u, did)
        assert Leases(r, 5, 3600).get("settle", 0) == lease
        assert not r.exists(unaccounted_key("settle"))
        assert not [e for e in timeline.load(r, "settle") if e["event"] in ("lease_lapsed", "unaccounted",
                                                                             "redispatched")]
        assert not list(queued_messages(r))

        # up for exactly the lease TTL: the lapsed lease is broken and both units re-dispatched
        u, seen, did, rt = _sweep(cluster, srv, "settle", lambda up: up)
        assert seen.settled and did == ["redispatch 0", "redispatch 1"], (u, did)
        events = [e for e in timeline.load(r, "settle") if e["event"] in ("lease_lapsed", "unaccounted",
                                                                          "redispatched")]
        assert [(e["event"], e["partition"]) for e in events] == [
            ("lease_lapsed", 0), ("redispatched", 0), ("unaccounted", 1), ("redispatched", 1)], events
        assert events[0]["task_id"] == "frozen-task"
        assert Leases(r, 5, 3600).get("settle", 0) is None
        assert len(list(queued_messages(r))) == 2
    finally:
        cluster.configure_here()
        srv.stop()


def test_a_prove_queue_is_live_only_while_a_ready_prover_serves_it(cluster):
    """The other half of ``look``: which prove queues count as served when the reconciler decides
    to re-route a partition (a prover restarting on its device is registered but not ready; a
    synthesis worker is ready but serves no prove queue)."""
    from cluster.pipeline import reconcile, registry
    from cluster.pipeline.app import runtime

    cluster.flush()
    cluster.configure_here()
    rt = runtime()

    def info(worker_id, role, queue, ready):
        return registry.WorkerInfo(worker_id=worker_id, role=role, host="vm", pid=1, queues=[queue],
                                   device=None, ready=ready)
    for w in (info("prove.vm.cpu0.0", "prove", "prove.vm.cpu0", False),
              info("prove.vm.cpu1.0", "prove", "prove.vm.cpu1", True),
              info("synthesis.vm.0", "synthesis", "synthesis", True)):
        registry.publish(rt.redis, w, ttl_s=60)
    assert reconcile.look(rt).live_prove_queues == {"prove.vm.cpu1"}
