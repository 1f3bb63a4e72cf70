"""The Prometheus exporter: the cluster's series, read from what the workers already record in
Redis, served at ``http://[metrics] address:port/metrics`` (``zkhive metrics``; ``zkhive up``
starts it). It runs as its own process and holds no state Prometheus cannot lose: restarted, it
re-reads the recent timelines and its counters start again (``rate()`` handles the reset).

Sources, per scrape:

- each recent job's timeline (``zkhive:job:<id>:events``, cluster.pipeline.timeline), read from where the
  last scrape stopped: ``stage`` events (one prover stage: its seconds, device), synthesis start
  and end, prove pickup and end, duplicates, prove errors, failed verifications, failures;
- each job's state hash: its outcome once terminal (done, failed, cancelled) and its duration;
- each assignment's blob reference (``zkhive:job:<id>:assign:<k>``): the synthesized bytes;
- the registry (cluster.pipeline.registry): workers, devices, resident keys, free and total memory;
- the queue lengths (every priority list of each queue, cluster.pipeline.queues.queue_depth).

Series (``host`` and ``device`` name a device: ``cuda:0`` on host ``gpu7``)::

    zkhive_up                                    1 when Redis answered this scrape
    zkhive_stage_seconds{stage,params,host,device}        histogram of prover stage times
    zkhive_prove_seconds{params,host,device}              pickup -> proof stored, per partition
    zkhive_synthesis_seconds{params}                      histogram, per partition
    zkhive_synthesis_bytes_total{params}                  assignment bytes written by synthesis
    zkhive_device_busy_seconds_total{host,device}         sum of the device's prover stage times
    zkhive_partitions_total{params,outcome}               proved, duplicate, prove_error,
                                                          synthesis_error, verify_failed, failed,
                                                          redelivered, redispatched
    zkhive_jobs_total{params,outcome}                     done, failed, cancelled
    zkhive_job_seconds{params,outcome}                    submission -> outcome
    zkhive_jobs_active                                    jobs submitted and not finished
    zkhive_blob_store_waits_total{params,stage}           units that began to wait for room in the
                                                          blob store (back-pressure, issue 39)
    zkhive_units_waiting_for_space                        units waiting for room now (active jobs)
    zkhive_job_attempts_total{params}                     resubmissions of failed or cancelled jobs
    zkhive_deadline_missed_total{params,kind,priority,setting}  jobs failed at their deadline
    zkhive_queue_depth{queue,host,device}                 messages waiting (device queues have a device)
    zkhive_queue_priority_depth{queue,priority}           the same, per priority level (critical,
                                                          high, normal, bulk)
    zkhive_worker_ready{worker,role,host,device}          1 ready, 0 registered but still starting
    zkhive_worker_inflight{worker,host,device}            partitions in hand
    zkhive_resident_keys{worker,host,device}              number of resident proving keys
    zkhive_resident_key{worker,host,device,params}        1 per resident key
    zkhive_key_load_seconds{worker,host,device,params}    the resident key's last load
    zkhive_key_load_bytes{worker,host,device,params}      the .params bytes it read (0: made in process)
    zkhive_start_phase_seconds{worker,host,device,phase}  each phase of the prover's start (ready: all)
    zkhive_device_memory_free_bytes{worker,host,device}   room left for keys (cluster.pipeline.prover)
    zkhive_device_memory_used_bytes{worker,host,device}   total - free
    zkhive_device_memory_total_bytes{worker,host,device}
"""
from __future__ import annotations

import json
import logging
import signal
import threading
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger(__name__)

#: prover stages run from milliseconds (2^12 on a GPU) to minutes (2^27 on a CPU)
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                 120, 300, 600, 1800)
JOB_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400)
#: events of a finished job still arrive for a while (a duplicate proof, a late aggregate):
#: keep reading its timeline this long after it was first seen finished
FINISHED_GRACE_S = 120.0
#: stages that are not device work (blob I/O before the prove)
NOT_DEVICE_WORK = ("fetch_assignment",)
#: timeline event -> zkhive_partitions_total outcome
PARTITION_OUTCOMES = {"prove_end": "proved", "duplicate": "duplicate", "prove_error": "prove_error",
                      "synthesis_error": "synthesis_error", "verify_failed": "verify_failed",
                      "redelivered": "redelivered", "redispatched": "redispatched"}


def host_of(worker_id: str | None) -> str:
    """The host in a worker id: ids are ``<role>.<host>.<suffix>`` (cluster.pipeline.lifecycle), and a
    host name has no dots (settings.WorkerSettings.host)."""
    parts = (worker_id or "").split(".")
    return parts[1] if len(parts) >= 3 else ""


class _JobCursor:
    """How far one job's timeline has been read, and the marks still waiting for their pair."""

    __slots__ = ("offset", "params", "finished_at", "outcome_counted", "syn_start", "pickup", "submitted")

    def __init__(self, params: str, submitted: float = 0.0):
        self.offset = 0
        self.params = params
        self.submitted = submitted  # the index's score: a new attempt of the job moves it
        self.finished_at: float | None = None  # when this exporter first saw the job finished
        self.outcome_counted = False
        self.syn_start: dict[int, float] = {}
        self.pickup: dict[int, tuple[float, str]] = {}  # partition -> (t, worker id)


class ClusterCollector:
    """A prometheus_client collector: each ``collect()`` first reads what is new in Redis, then
    yields the counters and histograms (kept here) and the gauges (read now)."""

    def __init__(self, r, *, job_window: int = 1000):
        self.r, self.job_window = r, job_window
        self._lock = threading.Lock()  # the HTTP server answers scrapes in threads
        self._jobs: dict[str, _JobCursor] = {}
        self.stage_seconds = Histogram("zkhive_stage_seconds", "Prover stage times, from the timeline's stage events",
                                       ["stage", "params", "host", "device"], buckets=STAGE_BUCKETS, registry=None)
        self.prove_seconds = Histogram("zkhive_prove_seconds", "Partition prove time: pickup to proof stored",
                                       ["params", "host", "device"], buckets=STAGE_BUCKETS, registry=None)
        self.synthesis_seconds = Histogram("zkhive_synthesis_seconds", "Partition synthesis time",
                                           ["params"], buckets=STAGE_BUCKETS, registry=None)
        self.synthesis_bytes = Counter("zkhive_synthesis_bytes", "Assignment bytes written by synthesis",
                                       ["params"], registry=None)
        self.busy_seconds = Counter("zkhive_device_busy_seconds", "Seconds a device spent in prover stages",
                                    ["host", "device"], registry=None)
        self.partitions = Counter("zkhive_partitions", "Partition outcomes, from the timeline",
                                  ["params", "outcome"], registry=None)
        self.jobs = Counter("zkhive_jobs", "Jobs by outcome", ["params", "outcome"], registry=None)
        self.job_seconds = Histogram("zkhive_job_seconds", "Job time: submission to outcome",
                                     ["params", "outcome"], buckets=JOB_BUCKETS, registry=None)
        self.blob_waits = Counter("zkhive_blob_store_waits", "Units that began to wait for room in the blob store",
                                  ["params", "stage"], registry=None)
        self.attempts = Counter("zkhive_job_attempts", "Resubmissions of failed or cancelled jobs (new attempts)",
                                ["params"], registry=None)
        self.deadline_missed = Counter("zkhive_deadline_missed", "Jobs failed at their deadline, by kind, "
                                       "priority and the deadline's setting",
                                       ["params", "kind", "priority", "setting"], registry=None)
        self._kept = (self.stage_seconds, self.prove_seconds, self.synthesis_seconds, self.synthesis_bytes,
                      self.busy_seconds, self.partitions, self.jobs, self.job_seconds, self.blob_waits,
                      self.attempts, self.deadline_missed)

    # -- reading Redis ----------------------------------------------------------------------------
    def poll(self) -> None:
        from cluster.pipeline.jobs import INDEX, TERMINAL

        now = time.time()
        scored = [(j.decode(), s) for j, s in self.r.zrevrange(INDEX, 0, self.job_window - 1, withscores=True)]
        recent = [j for j, _ in scored]
        for job_id, submitted in scored:
            cur = self._jobs.get(job_id)
            if cur is None:
                params = self._params(job_id)
                if params is None:
                    continue  # expired between the index and the record
                cur = self._jobs[job_id] = _JobCursor(params, submitted)
            elif submitted != cur.submitted:  # a new attempt (JobStore.new_attempt): its outcome counts again
                cur.submitted, cur.finished_at, cur.outcome_counted = submitted, None, False
            if cur.finished_at is not None and now - cur.finished_at > FINISHED_GRACE_S:
                continue
            self._read_events(job_id, cur)
            state = self.r.hgetall(f"zkhive:job:{job_id}:state")
            status = (state.get(b"status") or b"").decode()
            if status in TERMINAL:
                if cur.finished_at is None:
                    cur.finished_at = now
                if not cur.outcome_counted:
                    cur.outcome_counted = True
                    self.jobs.labels(cur.params, status).inc()
                    submitted = self._submitted_at(job_id)
                    finished = float(state.get(b"finished_at") or now)
                    if submitted is not None:
                        self.job_seconds.labels(cur.params, status).observe(max(0.0, finished - submitted))
        keep = set(recent)
        for job_id in [j for j in self._jobs if j not in keep]:
            del self._jobs[job_id]  # out of the window or expired: counted already

    def _params(self, job_id: str) -> str | None:
        raw = self.r.get(f"zkhive:job:{job_id}")
        if raw is None:
            return None
        try:
            return json.loads(raw)["params"]
        except (ValueError, KeyError):
            return "unknown"

    def _submitted_at(self, job_id: str) -> float | None:
        raw = self.r.get(f"zkhive:job:{job_id}")
        try:
            return float(json.loads(raw)["submitted_at"]) if raw else None
        except (ValueError, KeyError, TypeError):
            return None

    def _read_events(self, job_id: str, cur: _JobCursor) -> None:
        raws = self.r.lrange(f"zkhive:job:{job_id}:events", cur.offset, -1)
        cur.offset += len(raws)
        for raw in raws:
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            try:
                self._observe(job_id, cur, e)
            except (KeyError, TypeError, ValueError) as err:  # an event of another shape: skip it
                log.warning("job %s: skipping event %r: %s", job_id, e, err)

    def _observe(self, job_id: str, cur: _JobCursor, e: dict) -> None:
        ev, k, p = e.get("event"), e.get("partition"), cur.params
        if ev == "stage":
            worker = cur.pickup.get(k, (0, ""))[1] if k is not None else ""
            host, device = host_of(worker), e.get("device") or ""
            self.stage_seconds.labels(e["stage"], p, host, device).observe(float(e["seconds"]))
            if e["stage"] not in NOT_DEVICE_WORK and device:
                self.busy_seconds.labels(host, device).inc(float(e["seconds"]))
        elif ev == "synthesis_start" and k is not None:
            cur.syn_start[k] = e["t"]
        elif ev == "synthesis_end" and k is not None:
            if k in cur.syn_start:
                self.synthesis_seconds.labels(p).observe(max(0.0, e["t"] - cur.syn_start.pop(k)))
            self.synthesis_bytes.labels(p).inc(self._assignment_bytes(job_id, k))
        elif ev == "prove_pickup" and k is not None:
            cur.pickup[k] = (e["t"], e.get("worker") or "")
        elif ev == "waiting_for_space" and e.get("wait") == 1:
            self.blob_waits.labels(p, e.get("stage") or "").inc()
        elif ev == "attempt":
            self.attempts.labels(p).inc()
        elif ev == "deadline_missed":
            self.deadline_missed.labels(p, e.get("kind") or "", e.get("priority") or "", e.get("setting") or "").inc()
        elif ev == "failed":
            if k is not None:
                self.partitions.labels(p, "failed").inc()
        if ev in PARTITION_OUTCOMES and k is not None:
            self.partitions.labels(p, PARTITION_OUTCOMES[ev]).inc()
            if ev == "prove_end" and k in cur.pickup:
                t0, worker = cur.pickup.pop(k)
                self.prove_seconds.labels(p, host_of(e.get("worker") or worker),
                                          e.get("device") or "").observe(max(0.0, e["t"] - t0))

    def _assignment_bytes(self, job_id: str, k: int) -> int:
        raw = self.r.get(f"zkhive:job:{job_id}:assign:{k}")
        try:
            return int(json.loads(raw)["size"]) if raw else 0
        except (ValueError, KeyError, TypeError):
            return 0

    # -- the gauges, read at scrape time ------------------------------------------------------------
    def _gauges(self):
        from cluster.pipeline import registry
        from cluster.pipeline.jobs import ACTIVE
        from cluster.pipeline.queues import (AGGREGATE_QUEUE, SYNTHESIS_QUEUE, UNASSIGNED_QUEUE,
                                             URGENT_SYNTHESIS_QUEUE, queue_depths)

        ws = registry.workers(self.r)
        wl = ["worker", "host", "device"]
        ready = GaugeMetricFamily("zkhive_worker_ready", "Registered workers: 1 ready, 0 still starting "
                                  "(preload keys); a job's key load leaves it 1 (zkhive_key_loading)",
                                  labels=["worker", "role", "host", "device"])
        inflight = GaugeMetricFamily("zkhive_worker_inflight", "Partitions a worker has in hand", labels=wl)
        nkeys = GaugeMetricFamily("zkhive_resident_keys", "Proving keys resident on a device", labels=wl)
        loading = GaugeMetricFamily("zkhive_key_loading", "1 while a prover loads the proving key of params "
                                    "(preload before ready, or a job's first partition)", labels=wl + ["params"])
        key = GaugeMetricFamily("zkhive_resident_key", "1 for each resident proving key",
                                labels=wl + ["params"])
        load_s = GaugeMetricFamily("zkhive_key_load_seconds", "Seconds the resident key's last "
                                   "load took", labels=wl + ["params"])
        load_b = GaugeMetricFamily("zkhive_key_load_bytes", "Bytes of .params the resident key's "
                                   "last load read (0: made in process)", labels=wl + ["params"])
        phase_s = GaugeMetricFamily("zkhive_start_phase_seconds", "Seconds of each phase of the "
                                    "prover's start, process start to ready (phase ready: the "
                                    "whole; gpu/phases.py)", labels=wl + ["phase"])
        mirror = GaugeMetricFamily("zkhive_key_mirror_progress", "The compressed mirror of the "
                                   "resident key's .params this prover writes: 0..1 (1 written, "
                                   "-1 failed)", labels=wl + ["params"])
        evicted = CounterMetricFamily("zkhive_key_evictions", "Proving keys a prover dropped since it "
                                      "started: reason room (another key needed the memory), request "
                                      "(EvictSRS, zkhive evict) or holder (the device's key holder died: "
                                      "[gpu] key_holder); `zkhive status` says which and why",
                                      labels=wl + ["params", "reason"])
        free = GaugeMetricFamily("zkhive_device_memory_free_bytes", "Device memory left for keys", labels=wl)
        used = GaugeMetricFamily("zkhive_device_memory_used_bytes", "Device memory in use (total - free)",
                                 labels=wl)
        total = GaugeMetricFamily("zkhive_device_memory_total_bytes", "Device memory the prover may use",
                                  labels=wl)
        depth = GaugeMetricFamily("zkhive_queue_depth", "Messages waiting in a queue (every priority)",
                                  labels=["queue", "host", "device"])
        by_prio = GaugeMetricFamily("zkhive_queue_priority_depth", "Messages waiting in a queue at one "
                                    "priority level", labels=["queue", "priority"])
        device_queues: dict[str, tuple[str, str]] = {}
        for w in ws:
            dev = w.device or ""
            ready.add_metric([w.worker_id, w.role, w.host, dev], 1.0 if w.ready else 0.0)
            if w.role != "prove":
                continue
            lv = [w.worker_id, w.host, dev]
            inflight.add_metric(lv, len(w.inflight))
            nkeys.add_metric(lv, len(w.resident_keys))
            for name in w.loading:
                loading.add_metric(lv + [name], 1.0)
            for name in w.resident_keys:
                key.add_metric(lv + [name], 1.0)
            for name, ld in w.key_loads.items():
                load_s.add_metric(lv + [name], float(ld.get("seconds", 0.0)))
                load_b.add_metric(lv + [name], float(ld.get("bytes", 0)))
                if ld.get("mirror_progress") is not None:
                    mirror.add_metric(lv + [name], float(ld["mirror_progress"]))
            for name, sec in (w.start_phases or {}).items():
                phase_s.add_metric(lv + [name], float(sec))
            for kr, n in w.evicted_counts.items():
                name, _, reason = kr.rpartition("/")
                evicted.add_metric(lv + [name, reason], float(n))
            if w.free_memory is not None:
                free.add_metric(lv, w.free_memory)
            if w.total_memory is not None:
                total.add_metric(lv, w.total_memory)
                if w.free_memory is not None:
                    used.add_metric(lv, w.total_memory - w.free_memory)
            if w.queues:
                device_queues[w.queues[0]] = (w.host, dev)
        for q in [SYNTHESIS_QUEUE, URGENT_SYNTHESIS_QUEUE, AGGREGATE_QUEUE, UNASSIGNED_QUEUE] + sorted(device_queues):
            levels = queue_depths(self.r, q)
            depth.add_metric([q, *device_queues.get(q, ("", ""))], sum(levels.values()))
            for level, n in levels.items():
                by_prio.add_metric([q, level], n)
        active = GaugeMetricFamily("zkhive_jobs_active", "Jobs submitted and not finished")
        active_ids = [j.decode() for j in self.r.smembers(ACTIVE)]
        active.add_metric([], len(active_ids))
        waiting = GaugeMetricFamily("zkhive_units_waiting_for_space",
                                    "Units of active jobs waiting for room in the blob store")
        pipe = self.r.pipeline()
        for j in active_ids:
            pipe.hlen(f"zkhive:job:{j}:waiting")
        waiting.add_metric([], sum(pipe.execute()) if active_ids else 0)
        # the prove in hand longest (picked up, no prove_end yet) among unfinished jobs: a stuck
        # device or a lost unit shows here before any job deadline
        now = time.time()
        oldest = GaugeMetricFamily("zkhive_oldest_running_partition_seconds",
                                   "Age of the oldest partition proof in hand (0 when none)")
        picked = [t for cur in self._jobs.values() if cur.finished_at is None for t, _ in cur.pickup.values()]
        oldest.add_metric([], max((now - t for t in picked), default=0.0))
        return [ready, inflight, nkeys, key, loading, load_s, load_b, phase_s, mirror, evicted, free, used, total, depth, by_prio,
                active, waiting, oldest]

    def collect(self):
        import redis

        from cluster.version import code_digest, package_version

        build = GaugeMetricFamily("zkhive_build_info", "The exporter's zkhive version and code digest",
                                  labels=["version", "code"])
        build.add_metric([package_version(), code_digest()], 1.0)
        yield build
        up = GaugeMetricFamily("zkhive_up", "1 when the exporter could read the cluster's Redis")
        with self._lock:
            try:
                self.poll()
                gauges = self._gauges()
                up.add_metric([], 1.0)
            except redis.exceptions.RedisError as e:
                log.warning("cannot read the cluster: %s", e)
                gauges = []
                up.add_metric([], 0.0)
            yield up
            for m in self._kept:
                yield from m.collect()
            yield from gauges


def make_registry(r, job_window: int = 1000) -> tuple[CollectorRegistry, ClusterCollector]:
    try:
        # name[] filters (/metrics?name[]=zkhive_jobs_total) apply to a collector that cannot
        # list its names up front (it would have to read Redis) only with this option
        reg = CollectorRegistry(auto_describe=False, support_collectors_without_names=True)
    except TypeError:  # prometheus-client older than the option: no filtering
        reg = CollectorRegistry(auto_describe=False)
    collector = ClusterCollector(r, job_window=job_window)
    reg.register(collector)
    return reg, collector


def serve(s) -> int:
    """Run the exporter until SIGTERM or SIGINT (``zkhive metrics``)."""
    import redis
    from prometheus_client import start_http_server

    r = redis.Redis.from_url(s.redis.url_with_password(), socket_timeout=5, health_check_interval=30)
    reg, _ = make_registry(r, s.metrics.job_window)
    try:
        server, thread = start_http_server(s.metrics.port, addr=s.metrics.address, registry=reg)
    except OSError as e:
        from cluster.cli import CommandError
        raise CommandError(f"cannot listen on {s.metrics.address}:{s.metrics.port} ([metrics] address, "
                           f"port): {e.strerror or e}") from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"zkhive metrics: serving http://{s.metrics.address}:{s.metrics.port}/metrics "
          f"(Redis {s.redis.url})", flush=True)
    stop.wait()
    server.shutdown()
    return 0
