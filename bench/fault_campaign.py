"""Fault campaign (issue 15): a real CPU cluster under SIGKILL, Redis restarts, SIGSTOP, duplicate
deliveries and a corrupt verifying key; prints the table of docs/faults.md.

    python bench/fault_campaign.py                       # every scenario, the longer campaign
    python bench/fault_campaign.py --scale 0.3 --scenarios worker-kill,redis-restart --seed 7

The cluster: its own Redis (append-only file, password), one synthesis worker, one aggregate
worker and two CPU provers (``python -m cluster worker ...``, real processes), porep-lite-4k
(``--params``), default delivery settings (lease 5 s, watchdog every 2 s, grace 2 s, visibility
timeout 2 h, job deadline 4 h). A harness thread plays the keeper of ``zkhive up``: a worker
that died is started again after ``--restart-delay`` seconds (1 s, the keeper's first backoff).

Scenarios (each a stream of jobs with faults between them):

- ``worker-kill``: SIGKILL (of the whole process group) of a worker chosen at random points:
  the synthesis worker 0-60 ms after a submit (the hand-over window), a prover 0-60 ms after a
  partition is routed to it, a worker mid-synthesis / mid-prove, the aggregate worker
  mid-aggregate, one synthesis pool child mid-task;
- ``redis-restart``: Redis killed with SIGKILL mid-job and restarted from its AOF 0.5-3 s later;
- ``sigstop``: a prover frozen (SIGSTOP) mid-prove for 20 s, then SIGCONT;
- ``duplicates``: every waiting message copied two more times (as visibility-timeout restores
  and re-dispatches would queue it);
- ``corrupt-vk``: the aggregate worker restarted with a verifying key with one flipped byte.

Each job must end verified (its proof checked here by the pairing verifier against public
inputs from its C1) or failed with a named reason within ``--bound`` seconds; ``lost`` counts
those that did not. ``doubled`` counts partitions stored twice (two ``prove_end`` winners, or a
proof that is not the first stored one): must be 0. ``longest wait`` is the longest time from a
fault to the re-dispatch of a unit it lost (each ``redispatched`` event against the latest fault
before it; faults are spaced so that attribution is unambiguous).

tests/integration/test_faults_cluster.py runs a short campaign of every scenario in CI.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCENARIOS = ("worker-kill", "redis-restart", "sigstop", "duplicates", "corrupt-vk")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def make_c1(params: str, seed: int) -> dict:
    from synthesis.porep import SETS, c1_document, generate

    if params in SETS:
        s = seed.to_bytes(32, "little")
        return c1_document(generate(SETS[params], s), s)
    from circuits_for_tests import make_c1 as squares_c1  # the tests' circuits (on PYTHONPATH)
    from synthesis.circuits import get_circuit
    return squares_c1(get_circuit(params), seed)


class Worker:
    """One ``python -m cluster worker`` process group, started again after it dies."""

    def __init__(self, cluster: "FaultCluster", role: str, device: str | None = None, env: dict | None = None):
        self.cluster, self.role, self.device = cluster, role, device
        self.env = env or {}
        self.name = f"{role}{'-' + device.replace(':', '') if device else ''}"
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.stopped = False   # SIGSTOPped: alive, not to be restarted
        self.keep = True       # False: leave it down (shutdown, or a planned replacement)
        self.start()

    def start(self) -> None:
        argv = [sys.executable, "-m", "cluster", "worker", self.role, "--loglevel", "WARNING"]
        if self.device:
            argv += ["--device", self.device]
        logf = open(self.cluster.root / f"{self.name}.log", "ab")
        self.proc = subprocess.Popen(argv, cwd=ROOT, env={**self.cluster.env, **self.env}, stdout=logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        logf.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig, group: bool = True) -> None:
        try:
            (os.killpg if group else os.kill)(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        from cluster.pipeline import registry

        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: see {self.cluster.root}/{self.name}.log")
            try:
                if any(w.pid == self.pid and w.ready for w in registry.workers(self.cluster.redis)):
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout_s} s")

    def stop(self) -> None:
        self.keep = False
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(5)


@dataclass
class Fault:
    t: float
    kind: str
    target: str


@dataclass
class Outcome:
    scenario: str
    jobs: int = 0
    faults: int = 0
    kills: int = 0
    restarts: int = 0
    verified: int = 0
    failed: dict = field(default_factory=dict)  # job -> error
    lost: list = field(default_factory=list)
    doubled: int = 0
    duplicates: int = 0
    redispatches: int = 0
    waits: list = field(default_factory=list)   # (seconds, job, unit, reason)
    unexplained: list = field(default_factory=list)  # re-dispatches with no fault before them
    seconds: float = 0.0

    def longest_wait(self) -> float:
        return max((w[0] for w in self.waits), default=0.0)

    def row(self) -> str:
        failed = len(self.failed)
        return (f"| {self.scenario} | {self.jobs} | {self.faults} | {self.kills} | {self.restarts} | {self.verified} | {failed} | "
                f"{len(self.lost)} | {self.doubled} | {self.redispatches} | {self.longest_wait():.1f} | {self.seconds:.0f} |")


HEADER = ("| scenario | jobs | faults | kills | restarts | verified | failed (named) | lost | doubled | re-dispatches "
          "| longest wait before re-dispatch (s) | wall (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


class FaultCluster:
    """Redis (AOF) + 1 synthesis, 1 aggregate, ``provers`` CPU provers; settings as environment."""

    def __init__(self, root: Path, params: str, *, provers: int = 2, restart_delay_s: float = 1.0,
                 env: dict | None = None):
        from cluster import settings
        from cluster.pipeline.app import configure
        from cluster.ops.redis_server import RedisServer

        self.root, self.params, self.restart_delay_s = Path(root), params, restart_delay_s
        self.root.mkdir(parents=True, exist_ok=True)
        self.password = secrets.token_hex(12)
        self.server = RedisServer(password=self.password, data_dir=self.root / "redis", persist=True).start()
        tests = ROOT / "tests" / "integration"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(tests), os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
            "ZKHIVE_REDIS__URL": self.server.url,
            "ZKHIVE_REDIS__PASSWORD": self.password,
            "ZKHIVE_BLOBS__DIR": str(self.root / "blobs"),
            "ZKHIVE_SRS__PARAM_CACHE": str(self.root / "keys"),
            "ZKHIVE_SRS__PRELOAD": json.dumps([params]),
            **({"ZKHIVE_WORKER__CIRCUIT_MODULES": '["circuits_for_tests"]'} if params.startswith("test-") else {}),
            **(env or {}),
        }
        for k in [k for k in self.env if k.startswith("ZKHIVE_") and k not in (env or {})
                  and k not in ("ZKHIVE_REDIS__URL", "ZKHIVE_REDIS__PASSWORD", "ZKHIVE_BLOBS__DIR",
                                "ZKHIVE_SRS__PARAM_CACHE", "ZKHIVE_SRS__PRELOAD", "ZKHIVE_WORKER__CIRCUIT_MODULES")]:
            del self.env[k]  # default settings: nothing from the caller's environment
        self.env.pop("ZKHIVE_CONFIG", None)
        if str(tests) not in sys.path:
            sys.path.append(str(tests))
        from cluster.pipeline.app import app

        self._previous = app.zkhive_settings  # given back at stop (the tests' process goes on)
        configure(settings.load(env={k: v for k, v in self.env.items() if k.startswith("ZKHIVE_")}))
        forget_broker(app)  # a process that talked to another cluster before (the tests)
        from cluster.pipeline.app import runtime
        from synthesis.circuits import get_circuit

        self.rt = runtime()
        self.circuit = get_circuit(params)
        self.rt.keys.setup(self.circuit)
        self.redis = self.server.client()
        self.workers: list[Worker] = []
        self.faults: list[Fault] = []
        self.restarts = 0
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep, daemon=True)
        self._docs: dict[int, dict] = {}
        self._parsed: dict[str, object] = {}

    # -- processes ------------------------------------------------------------------------------
    def start(self, provers: int = 2) -> "FaultCluster":
        self.workers = [Worker(self, "synthesis"), Worker(self, "aggregate")]
        self.workers += [Worker(self, "prove", f"cpu:{i}") for i in range(provers)]
        for w in self.workers:
            w.wait_ready()
        self._keeper.start()
        return self

    def _keep(self) -> None:
        """The keeper's part: a dead worker starts again after the delay."""
        died: dict[Worker, float] = {}
        while not self._stop.wait(0.1):
            for w in list(self.workers):
                if not w.keep or w.alive():
                    died.pop(w, None)
                    continue
                t = died.setdefault(w, time.monotonic())
                if time.monotonic() - t >= self.restart_delay_s:
                    w.start()
                    w.restarts += 1
                    self.restarts += 1
                    died.pop(w, None)

    def by_role(self, role: str) -> list[Worker]:
        return [w for w in self.workers if w.role == role]

    def worker_of(self, worker_id: str | None) -> Worker | None:
        """The harness's worker whose registry id is ``worker_id`` (a prover: by device)."""
        if not worker_id:
            return None
        role = worker_id.split(".")[0]
        if role == "prove":
            dev = worker_id.split(".")[2]  # prove.<host>.cpu0.0
            return next((w for w in self.by_role("prove") if w.device == f"cpu:{dev[3:]}"), None)
        return next(iter(self.by_role(role)), None)

    def kill(self, w: Worker, why: str) -> None:
        w.signal(signal.SIGKILL)
        self.faults.append(Fault(time.time(), f"SIGKILL {why}", w.name))
        log(f"SIGKILL {w.name} ({why})")

    def wait_all_ready(self, timeout_s: float = 120.0) -> None:
        end = time.monotonic() + timeout_s
        for w in self.workers:
            while not w.alive() and time.monotonic() < end:
                time.sleep(0.1)
            w.wait_ready(max(1.0, end - time.monotonic()))

    def restart_redis(self, down_s: float) -> None:
        self.server.proc.kill()  # SIGKILL: what is in the AOF is what survives
        self.server.proc.wait(5)
        self.faults.append(Fault(time.time(), "redis SIGKILL", "redis"))
        log(f"redis killed; restarting in {down_s:.1f} s")
        time.sleep(down_s)
        self.server.start(timeout_s=30)
        self.restarts += 1

    def stop(self) -> None:
        self._stop.set()
        for w in self.workers:
            w.keep = False
        for w in self.workers:
            w.signal(signal.SIGCONT)
            w.signal(signal.SIGTERM)
        for w in self.workers:
            w.stop()
        # the app points back where it pointed before (its pools and result consumer of this
        # Redis closed while it is still up)
        from cluster.pipeline.app import app, configure
        configure(self._previous)
        forget_broker(app)
        self.server.stop()

    # -- jobs -----------------------------------------------------------------------------------
    def doc(self, i: int) -> dict:
        """C1 documents: three distinct ones (making one takes seconds), reused under new job ids."""
        if i % 3 not in self._docs:
            self._docs[i % 3] = make_c1(self.params, 1000 + i % 3)
        return self._docs[i % 3]

    def submit(self, job_id: str, i: int):
        from cluster.client import submit
        return retry_redis(lambda: submit(self.doc(i), job_id=job_id))

    def events(self, job_id: str) -> list[dict]:
        from cluster.pipeline import timeline
        return retry_redis(lambda: timeline.load(self.redis, job_id))

    def first_event(self, job_ids, kind: str, timeout_s: float = 60.0, since: float = 0.0,
                    nth: int = 0) -> dict | None:
        """The ``nth`` (0: first) ``kind`` event after ``since`` of the jobs, polled every 5 ms."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            found = [{**e, "job": j} for j in job_ids for e in self.events(j) if e["event"] == kind and e["t"] > since]
            if len(found) > nth:
                return sorted(found, key=lambda e: e["t"])[nth]
            time.sleep(0.005)
        return None

    def status(self, job_id: str) -> str | None:
        return retry_redis(lambda: self.rt.jobs.status(job_id))

    def wait_jobs(self, job_ids, bound_s: float) -> None:
        end = time.monotonic() + bound_s
        while time.monotonic() < end:
            if all(self.status(j) in ("done", "failed", "cancelled") for j in job_ids):
                return
            time.sleep(0.2)

    def judge(self, out: Outcome, job_ids, t0: float) -> Outcome:
        """Each job verified / failed (named) / lost; doubled partitions; waits before re-dispatch."""
        from gpu.groth16 import Proof, verify

        vk = self.rt.keys.load_vk(self.circuit)
        for i, j in enumerate(job_ids):
            st = retry_redis(lambda: self.rt.jobs.state(j))
            evs = self.events(j)
            ends: dict[int, list[dict]] = {}
            for e in evs:
                if e["event"] == "prove_end":
                    ends.setdefault(e["partition"], []).append(e)
                elif e["event"] == "duplicate":
                    out.duplicates += 1
            out.doubled += sum(len(v) - 1 for v in ends.values() if len(v) > 1)
            if st.get("status") == "done":
                res = self.rt.blobs.get_json(st["result"])
                proof = bytes.fromhex(res["proof"])
                doc = self.doc(int(j.rsplit("-", 1)[1]))
                key = json.dumps(doc, sort_keys=True)[:200]
                c1 = self._parsed.get(key) or self._parsed.setdefault(key, self.circuit.parse_c1(doc))
                ok = True
                for k in range(self.circuit.num_partitions()):
                    raw = proof[192 * k:192 * (k + 1)]
                    ok &= verify(vk, self.circuit.public_inputs(c1, k), Proof.from_bytes(raw))
                    first = ends.get(k, [{}])[0].get("proof_sha")
                    if first is not None and not raw.hex().startswith(first):
                        out.doubled += 1  # the proof in the result is not the first one stored
                if ok:
                    out.verified += 1
                else:
                    out.failed[j] = "PROOF DOES NOT VERIFY"
            elif st.get("status") == "failed" and st.get("error"):
                out.failed[j] = st["error"]
            else:
                out.lost.append(j)
            for e in evs:
                if e["event"] != "redispatched" or e["t"] < t0:
                    continue
                out.redispatches += 1
                before = [f.t for f in self.faults if f.t <= e["t"] and f.t >= t0]
                unit = "aggregate" if e.get("partition") is None else e["partition"]
                if not before:
                    out.unexplained.append((j, unit, e.get("reason")))
                    continue
                out.waits.append((round(e["t"] - max(before), 3), j, unit, e.get("reason")))
        out.jobs = len(job_ids)
        out.faults = sum(1 for f in self.faults if f.t >= t0)
        out.kills = sum(1 for f in self.faults if f.t >= t0 and "SIGKILL" in f.kind)
        out.seconds = time.time() - t0
        return out


def forget_broker(app) -> None:
    """After pointing this process's app back at its previous broker: drop the pools and the
    result backend made for this cluster's Redis (Celery keeps them across ``conf.update``), and
    close the backend's pub/sub while this Redis is still up, so results of tasks sent here do
    not reach for it when they are collected (Celery's Redis backend; private attributes)."""
    backend = app._backend_cache or getattr(app._local, "backend", None)
    rc = getattr(backend, "result_consumer", None)
    if rc is not None and getattr(rc, "_pubsub", None) is not None:
        try:
            rc.stop()
        except Exception:
            pass
        rc._pubsub = None
        getattr(rc, "subscribed_to", set()).clear()
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)
    app._pool = None
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None
    if "control" in app.__dict__:
        app.control.mailbox.__dict__.pop("producer_pool", None)


def retry_redis(fn, budget_s: float = 60.0):
    """The harness's own Redis calls, while Redis restarts."""
    import redis

    end = time.monotonic() + budget_s
    while True:
        try:
            return fn()
        except (redis.ConnectionError, redis.TimeoutError):
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


# -- scenarios ---------------------------------------------------------------------------------------

def worker_kill(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    """Kills at random points; one new job before each fault, so work is always in flight."""
    kinds = ["handover-synthesis", "handover-prove", "mid-synthesis", "mid-prove", "mid-aggregate",
             "synthesis-child"]
    plan = [kinds[i % len(kinds)] for i in range(n_faults)]
    rng.shuffle(plan)
    jobs = []
    for i, kind in enumerate(plan):
        c.wait_all_ready()
        since = time.time()
        j = f"{prefix}-{len(jobs)}"
        jobs.append(j)
        if kind == "handover-synthesis":
            c.submit(j, len(jobs) - 1)
            time.sleep(rng.uniform(0, 0.060))
            c.kill(c.by_role("synthesis")[0], "0-60 ms after a submit")
        else:
            c.submit(j, len(jobs) - 1)
            trigger = {"handover-prove": "prove_routed", "mid-synthesis": "synthesis_start",
                       "mid-prove": "prove_pickup", "mid-aggregate": "aggregate_start",
                       "synthesis-child": "synthesis_start"}[kind]
            # the first or the second partition's event (a prover each, most of the time)
            nth = 0 if kind in ("mid-aggregate", "synthesis-child") else rng.randrange(c.circuit.num_partitions())
            e = c.first_event([j], trigger, since=since, nth=nth)
            if e is None:
                log(f"{kind}: no {trigger} event; no fault")
                continue
            if kind == "handover-prove":
                time.sleep(rng.uniform(0, 0.060))
                q = e.get("queue", "")
                dev = q.rsplit(".", 1)[-1]  # prove.<host>.cpu0
                w = next((w for w in c.by_role("prove") if w.device == f"cpu:{dev[3:]}"), None)
                if w is not None:
                    c.kill(w, f"0-60 ms after a partition was routed to it ({e['job']}/{e['partition']})")
            elif kind == "mid-aggregate":
                time.sleep(rng.uniform(0, 0.05))
                c.kill(c.by_role("aggregate")[0], f"mid-aggregate ({e['job']})")
            elif kind == "synthesis-child":
                import psutil

                time.sleep(rng.uniform(0, 0.5))
                w = c.by_role("synthesis")[0]
                try:
                    kids = psutil.Process(w.pid).children()
                except psutil.NoSuchProcess:
                    kids = []
                if kids:
                    os.kill(kids[0].pid, signal.SIGKILL)
                    c.faults.append(Fault(time.time(), "SIGKILL synthesis pool child", w.name))
                    log(f"SIGKILL a pool child of {w.name} mid-synthesis ({e['job']}/{e['partition']})")
            else:
                time.sleep(rng.uniform(0, 0.8))
                w = c.worker_of(e.get("worker"))
                if w is not None:
                    c.kill(w, f"{kind} ({e['job']}/{e['partition']})")
        time.sleep(spacing_s)
    return jobs


def redis_restart(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    jobs = []
    for i in range(n_faults):
        c.wait_all_ready()
        since = time.time()
        for _ in range(2):
            j = f"{prefix}-{len(jobs)}"
            jobs.append(j)
            c.submit(j, len(jobs) - 1)
        trigger = rng.choice(["synthesis_start", "prove_pickup", "synthesis_end", "prove_end"])
        c.first_event(jobs[-2:], trigger, since=since)
        time.sleep(rng.uniform(0, 0.5))
        c.restart_redis(rng.uniform(0.5, 3.0))
        time.sleep(spacing_s)
    return jobs


def sigstop(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float,
            frozen_s: float = 20.0):
    jobs = []
    for i in range(n_faults):
        c.wait_all_ready()
        since = time.time()
        j = f"{prefix}-{len(jobs)}"
        jobs.append(j)
        c.submit(j, len(jobs) - 1)
        e = c.first_event([j], "prove_pickup", since=since, nth=i % c.circuit.num_partitions())
        w = c.worker_of(e.get("worker")) if e else None
        if w is None:
            continue
        time.sleep(rng.uniform(0, 0.3))
        w.signal(signal.SIGSTOP)
        c.faults.append(Fault(time.time(), "SIGSTOP prover", w.name))
        log(f"SIGSTOP {w.name} mid-prove ({j}/{e['partition']}) for {frozen_s:.0f} s")
        c.wait_jobs([j], frozen_s)
        w.signal(signal.SIGCONT)
        log(f"SIGCONT {w.name}")
        time.sleep(spacing_s)
    return jobs


def duplicates(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    """Copies of waiting messages: each message in the synthesis and prove queues twice more."""
    from cluster.pipeline.queues import queued_messages

    jobs = []
    for i in range(n_faults):
        since = time.time()
        batch = []
        for _ in range(2):
            j = f"{prefix}-{len(jobs)}"
            jobs.append(j)
            batch.append(j)
            c.submit(j, len(jobs) - 1)
        trigger = rng.choice(["queued", "synthesis_end"])
        c.first_event(batch, trigger, since=since)
        copied = 0
        for lst, raw, msg in list(queued_messages(c.redis)):
            if msg.get("headers", {}).get("task") not in ("zkhive.synthesize_partition", "zkhive.prove_partition"):
                continue
            for _ in range(2):
                m = json.loads(raw)
                m["properties"]["delivery_tag"] = str(uuid.uuid4())
                c.redis.rpush(lst, json.dumps(m))
                copied += 1
        c.faults.append(Fault(time.time(), f"{copied} duplicate messages", "queues"))
        log(f"queued {copied} duplicate messages")
        time.sleep(spacing_s)
    return jobs


def corrupt_vk(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    """The aggregate worker's key cache holds a verifying key with one flipped byte."""
    import shutil

    agg = c.by_role("aggregate")[0]
    bad = c.root / "bad-keys"
    shutil.copytree(c.rt.keys.root, bad, dirs_exist_ok=True)
    vk = bad / c.rt.keys.path(c.circuit, "vk").name
    raw = bytearray(vk.read_bytes())
    raw[rng.randrange(64, len(raw))] ^= 1 << rng.randrange(8)
    vk.write_bytes(bytes(raw))
    agg.stop()
    broken = Worker(c, "aggregate", env={"ZKHIVE_SRS__PARAM_CACHE": str(bad)})
    c.workers[c.workers.index(agg)] = broken
    broken.wait_ready()
    c.faults.append(Fault(time.time(), "corrupt verifying key", broken.name))
    jobs = []
    try:
        for i in range(n_faults):
            j = f"{prefix}-{len(jobs)}"
            jobs.append(j)
            c.submit(j, len(jobs) - 1)
        c.wait_jobs(jobs, 120)
    finally:
        broken.stop()
        good = Worker(c, "aggregate")
        c.workers[c.workers.index(broken)] = good
        good.wait_ready()
    return jobs


RUNNERS = {"worker-kill": worker_kill, "redis-restart": redis_restart, "sigstop": sigstop,
           "duplicates": duplicates, "corrupt-vk": corrupt_vk}
#: faults per scenario at --scale 1
FAULTS = {"worker-kill": 24, "redis-restart": 8, "sigstop": 3, "duplicates": 4, "corrupt-vk": 2}


def run_scenario(c: FaultCluster, name: str, n_faults: int, *, seed: int, spacing_s: float = 8.0,
                 bound_s: float = 180.0) -> Outcome:
    rng = random.Random(f"{seed}/{name}")
    restarts0 = c.restarts
    t0 = time.time()
    log(f"scenario {name}: {n_faults} faults")
    jobs = RUNNERS[name](c, rng, n_faults, name, spacing_s)
    c.wait_jobs(jobs, bound_s)
    out = c.judge(Outcome(name), jobs, t0)
    out.restarts = c.restarts - restarts0
    log(out.row())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="porep-lite-4k")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--scale", type=float, default=1.0, help="faults per scenario, times this")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spacing", type=float, default=8.0, help="seconds between faults")
    ap.add_argument("--restart-delay", type=float, default=1.0)
    ap.add_argument("--root", default=None, help="run directory (default: a new one under /tmp)")
    args = ap.parse_args(argv)

    import tempfile

    root = Path(args.root or tempfile.mkdtemp(prefix="zkhive-faults-"))
    c = FaultCluster(root, args.params, restart_delay_s=args.restart_delay)
    outs = []
    try:
        t = time.time()
        c.start()
        log(f"cluster ready in {time.time() - t:.1f} s ({root})")
        for name in args.scenarios.split(","):
            outs.append(run_scenario(c, name, max(1, round(FAULTS[name] * args.scale)), seed=args.seed,
                                     spacing_s=args.spacing))
    finally:
        c.stop()
    print(f"# {args.params}, 2 CPU provers, 1 synthesis worker, 1 aggregate worker, default delivery "
          f"settings; {os.cpu_count()} cores; seed {args.seed}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(HEADER)
    for o in outs:
        print(o.row())
    for o in outs:
        for j, err in o.failed.items():
            print(f"- {o.scenario} {j} failed: {err.splitlines()[0][:160]}")
        for w in sorted(o.waits, reverse=True)[:3]:
            print(f"- {o.scenario} wait {w[0]:.1f} s: {w[1]} unit {w[2]}: {w[3]}")
        for u in o.unexplained:
            print(f"- {o.scenario} re-dispatch without a fault before it: {u}")
    bad = [o for o in outs if o.lost or o.doubled or o.longest_wait() > 60
           or any("DOES NOT VERIFY" in e for e in o.failed.values())]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
