"""Fault campaign (issues 15, 27): a real CPU cluster of ``zkhive up``, its real keeper included,
under SIGKILL of every role (sustained), Redis kills (also while the keeper waits for a
worker), a killed keeper, SIGSTOP (a prover; the only synthesis worker), duplicate deliveries
and a corrupt verifying key; prints the table of docs/faults.md.

    python bench/fault_campaign.py                       # every scenario, the longer campaign
    python bench/fault_campaign.py --scale 0.3 --scenarios sustained,keeper-kill --seed 7

The cluster: ``zkhive up --devices cpu:0,cpu:1`` from a settings file of its own (Redis with an
append-only file and a password, one synthesis worker, one aggregate worker, two CPU provers,
Flower, the exporter and the keeper: real processes, restarted only by the keeper),
porep-lite-4k (``--params``), default delivery settings (lease 5 s, watchdog every 2 s, grace
2 s, visibility timeout 2 h, job deadline 4 h) and the keeper's defaults (backoff 1-60 s,
frozen after 5 s stopped or 20 s without a heartbeat).

Scenarios (each a stream of jobs with faults between them):

- ``worker-kill``: SIGKILL (of the whole process group) of a worker chosen at random points:
  the synthesis worker 0-60 ms after a submit (the hand-over window), a prover 0-60 ms after a
  partition is routed to it, a worker mid-synthesis / mid-prove, the aggregate worker
  mid-aggregate, one synthesis pool child mid-task;
- ``sustained``: each role killed in turn, again and again, each kill within 60 s of the
  process's start, once it has work in hand (the old keeper gave up on such workers);
- ``redis-restart``: Redis SIGKILLed mid-job and kept down 0.5-3 s (its keeper frozen
  meanwhile), then restarted by the keeper from its AOF;
- ``redis-during-restart``: a worker killed, then Redis killed while the keeper waits for that
  worker's readiness;
- ``keeper-kill``: the keeper SIGKILLed, then a worker mid-job;
- ``sigstop``: a prover frozen (SIGSTOP) mid-prove (the keeper replaces it after 5 s);
- ``frozen-sole``: the only synthesis worker frozen mid-synthesis, never woken;
- ``duplicates``: every waiting message copied two more times (as visibility-timeout restores
  and re-dispatches would queue it);
- ``corrupt-vk``: the aggregate worker restarted with a verifying key with one flipped bit.

Each job must end verified (its proof checked here by the pairing verifier against public
inputs from its C1) or failed with a named reason within ``--bound`` seconds; ``lost`` counts
those that did not. ``doubled`` counts partitions stored twice (two ``prove_end`` winners, or a
proof that is not the first stored one): must be 0. ``longest wait`` is the longest time from a
fault to the re-dispatch of a unit it lost (each ``redispatched`` event against the latest fault
before it; faults are spaced so that attribution is unambiguous): must be <= 30 s.
``longest back to ready`` is the longest time from a kill or freeze of a process until a new
one passed its readiness check (the keeper's ``ready_at``); ``never back`` counts those that did
not within 180 s: must be 0.

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
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCENARIOS = ("worker-kill", "sustained", "redis-restart", "redis-during-restart", "keeper-kill",
             "sigstop", "frozen-sole", "duplicates", "corrupt-vk")


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
    """One process of the cluster's state file (``zkhive up``'s ``cluster.json``), by name: its
    PID changes each time the keeper starts it again."""

    def __init__(self, cluster: "FaultCluster", name: str):
        self.cluster, self.name = cluster, name
        self.role = name.split("-", 1)[0]
        tail = name.split("-", 1)[1] if "-" in name else ""
        self.device = f"cpu:{tail[3:]}" if self.role == "prove" and tail.startswith("cpu") else None

    def record(self):
        return self.cluster.record(self.name)

    @property
    def pid(self) -> int:
        return self.record().pid

    @property
    def log(self) -> Path:
        return Path(self.record().log)

    def alive(self) -> bool:
        rec = self.record()
        return rec is not None and rec.process() is not None

    def signal(self, sig, group: bool = True) -> None:
        try:  # each process of `up` leads its own session: its group is it and its children
            (os.killpg if group else os.kill)(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        from cluster.pipeline import registry

        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                pid = self.pid
                if self.role == "redis":
                    if self.cluster.redis.ping():
                        return
                elif self.role == "keeper":
                    if self.alive():
                        return
                elif any(w.pid == pid and w.ready for w in registry.workers(self.cluster.redis)):
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout_s} s: see {self.log}")


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
    #: (process, seconds from its kill or freeze until a new one passed its readiness; None: never)
    recover: list = field(default_factory=list)
    seconds: float = 0.0

    def longest_wait(self) -> float:
        return max((w[0] for w in self.waits), default=0.0)

    def never_back(self) -> list[str]:
        return [name for name, t in self.recover if t is None]

    def longest_back(self) -> str:
        times = [(t, name) for name, t in self.recover if t is not None]
        return f"{max(times)[0]:.1f} ({max(times)[1]})" if times else "-"

    def row(self) -> str:
        failed = len(self.failed)
        return (f"| {self.scenario} | {self.jobs} | {self.faults} | {self.kills} | {self.restarts} | {self.verified} | {failed} | "
                f"{len(self.lost)} | {self.doubled} | {self.redispatches} | {self.longest_wait():.1f} | "
                f"{self.longest_back()} | {len(self.never_back())} | {self.seconds:.0f} |")


HEADER = ("| scenario | jobs | faults | kills | restarts | verified | failed (named) | lost | doubled | re-dispatches "
          "| longest wait before re-dispatch (s) | longest back to ready (s) | never back | wall (s) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


class FaultCluster:
    """``zkhive up`` with its real keeper: Redis (AOF, password), 1 synthesis, 1 aggregate,
    ``provers`` CPU provers, Flower, the exporter, the keeper; settings in a TOML file."""

    def __init__(self, root: Path, params: str, *, provers: int = 2, env: dict | None = None):
        from cluster import settings
        from cluster.ops.supervisor import free_ports
        from cluster.pipeline.app import configure

        self.root, self.params, self.provers = Path(root), params, provers
        self.root.mkdir(parents=True, exist_ok=True)
        self.run_dir = self.root / "run"
        self.password = secrets.token_hex(12)
        tests = ROOT / "tests" / "integration"
        redis_port, flower_port, metrics_port = free_ports(3)
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        modules = '\ncircuit_modules = ["circuits_for_tests"]' if params.startswith("test-") else ""
        self.config = self.root / "zkhive.toml"
        self.config.write_text(
            f'[redis]\nurl = "{redis_url}"\npassword = "{self.password}"\n'
            f'[blobs]\ndir = "{self.root / "blobs"}"\n'
            f'[srs]\nparam_cache = "{self.root / "keys"}"\npreload = ["{params}"]\n'
            f'[flower]\nport = {flower_port}\npassword = "{secrets.token_hex(8)}"\n'
            f'[metrics]\nport = {metrics_port}\n'
            f'[worker]\nhost = "vm"{modules}\n')
        self.env = {k: v for k, v in {**os.environ, **(env or {})}.items()
                    if not k.startswith("ZKHIVE_") or k in (env or {})}  # default settings otherwise
        self.env.update({
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(tests), os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1", "ZKHIVE_CONFIG": str(self.config),
            "ZKHIVE_STATE_DIR": str(self.root / "state")})
        if str(tests) not in sys.path:
            sys.path.append(str(tests))
        from cluster.pipeline.app import app

        self._previous = app.zkhive_settings  # given back at stop (the tests' process goes on)
        self.settings = settings.load(self.config, env={})
        configure(self.settings)
        forget_broker(app)  # a process that talked to another cluster before (the tests)
        from cluster.pipeline.app import runtime
        from synthesis.circuits import get_circuit

        self.rt = runtime()
        self.circuit = get_circuit(params)
        self.rt.keys.setup(self.circuit)
        self.redis = self.rt.redis
        self.faults: list[Fault] = []
        self._docs: dict[int, dict] = {}
        self._parsed: dict[str, object] = {}
        self.recover: list = []  # (name, seconds back to ready or None), scenarios append

    def zkhive(self, *args, timeout: float = 600) -> subprocess.CompletedProcess:
        res = subprocess.run([sys.executable, "-m", "cluster", *args, "--config", str(self.config),
                              "--run-dir", str(self.run_dir)], cwd=ROOT, env=self.env,
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode:
            raise RuntimeError(f"zkhive {' '.join(args)}: {res.returncode}\n{res.stdout}\n{res.stderr}")
        return res

    # -- processes ------------------------------------------------------------------------------
    def start(self) -> "FaultCluster":
        devices = ",".join(f"cpu:{i}" for i in range(self.provers))
        log(self.zkhive("up", "--devices", devices, "--synthesis-workers", "1").stdout.strip())
        return self

    def state(self):
        from cluster.ops.supervisor import Supervisor

        sup = Supervisor(self.run_dir)
        for _ in range(50):  # the keeper replaces the file atomically; a read never sees half
            try:
                sup.load()
                return sup
            except Exception:
                time.sleep(0.05)
        sup.load()
        return sup

    def record(self, name: str):
        return self.state().record(name)

    @property
    def workers(self) -> list[Worker]:
        return [Worker(self, r.name) for r in self.state().records
                if r.role in ("synthesis", "aggregate", "prove") and not r.by_hand]

    @property
    def restarts(self) -> int:
        return sum(r.restarts for r in self.state().records)

    def by_role(self, role: str) -> list[Worker]:
        return [w for w in self.workers if w.role == role]

    def worker_of(self, worker_id: str | None) -> Worker | None:
        """The worker whose registry id is ``worker_id`` (a prover: by device)."""
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

    def wait_all_ready(self, timeout_s: float = 180.0) -> None:
        end = time.monotonic() + timeout_s
        for w in [Worker(self, "redis"), *self.workers, Worker(self, "keeper")]:
            w.wait_ready(max(1.0, end - time.monotonic()))

    def restart_redis(self, down_s: float) -> None:
        """Redis SIGKILLed and kept down ``down_s`` (its keeper frozen meanwhile), then the keeper
        brings it back from its AOF."""
        keeper = Worker(self, "keeper")
        keeper.signal(signal.SIGSTOP, group=False)
        try:
            self.kill(Worker(self, "redis"), "redis")
            self.faults[-1].kind = "redis SIGKILL"
            time.sleep(down_s)
        finally:
            keeper.signal(signal.SIGCONT, group=False)
        Worker(self, "redis").wait_ready(60)

    def back_to_ready(self, name: str, since: float, old_pid: int, timeout_s: float = 180.0) -> float | None:
        """Seconds from ``since`` until ``name`` is a new process (not ``old_pid``) that passed
        its readiness check (the keeper records ``ready_at``), or None. (Not by start time:
        psutil's create_time is boot time, whole seconds, plus ticks, so it can read up to 1 s
        early, before the fault, for a process the keeper started at once.)"""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            rec = self.record(name)
            if name == "keeper":  # revived by a worker, which does not wait for its readiness
                if rec is not None and rec.pid != old_pid and rec.process() is not None:
                    return max(0.0, time.time() - since)
            elif rec is not None and rec.pid != old_pid and rec.ready_at > since:
                return rec.ready_at - since
            time.sleep(0.1)
        return None

    def stop(self) -> None:
        for r in self.state().records:  # nothing left frozen: the warm shutdown needs them awake
            try:
                os.killpg(r.pid, signal.SIGCONT) if r.process() else None
            except (ProcessLookupError, PermissionError):
                pass
        # the app points back where it pointed before (its pools and result consumer of this
        # Redis closed while it is still up)
        from cluster.pipeline.app import app, configure
        configure(self._previous)
        forget_broker(app)
        log(self.zkhive("down", "--grace", "20").stdout.strip().splitlines()[-1])

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
    """The key cache's verifying key with one flipped bit; the aggregate worker restarted on
    purpose (`zkhive restart aggregate`) so it reads it; the good key back after."""
    vk = c.rt.keys.path(c.circuit, "vk")
    good = vk.read_bytes()
    raw = bytearray(good)
    raw[rng.randrange(64, len(raw))] ^= 1 << rng.randrange(8)
    vk.write_bytes(bytes(raw))
    jobs = []
    try:
        c.zkhive("restart", "aggregate")
        c.faults.append(Fault(time.time(), "corrupt verifying key", "aggregate-0"))
        for i in range(n_faults):
            j = f"{prefix}-{len(jobs)}"
            jobs.append(j)
            c.submit(j, len(jobs) - 1)
        c.wait_jobs(jobs, 120)
    finally:
        vk.write_bytes(good)
        c.zkhive("restart", "aggregate")
    return jobs


def _trigger_for(c: FaultCluster, w: Worker) -> tuple[str, str | None]:
    """The event after which ``w`` has work in hand, and the queue it must name (provers)."""
    if w.role == "synthesis":
        return "synthesis_start", None
    if w.role == "aggregate":
        return "aggregate_start", None
    return "prove_routed", f"cpu{w.device.split(':')[1]}"


def _kill_when_busy(c: FaultCluster, rng, w: Worker, job: str, since: float, why: str) -> None:
    """SIGKILL ``w`` once it has the job's work in hand (its trigger event), or after 15 s."""
    kind, queue = _trigger_for(c, w)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        evs = [e for e in c.events(job) if e["event"] == kind and e["t"] > since
               and (queue is None or str(e.get("queue", "")).endswith(queue))]
        if evs:
            time.sleep(rng.uniform(0, 0.3))
            break
        time.sleep(0.01)
    c.kill(w, why)


def sustained(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    """Every role killed in turn, over and over, each kill within 60 s of the process's start
    and after it was ready and had work (issue 27: the old keeper counted these as failed
    starts and, after 5, left the only synthesis and aggregate workers stopped)."""
    names = ["synthesis-0", "aggregate-0"] + [w.name for w in c.by_role("prove")]
    per_role = max(1, -(-n_faults // len(names)))
    plan = [names[min(i // per_role, len(names) - 1)] for i in range(n_faults)]  # each in a row
    jobs = []
    for name in plan:
        w = Worker(c, name)
        c.wait_all_ready()
        since = time.time()
        j = f"{prefix}-{len(jobs)}"
        jobs.append(j)
        c.submit(j, len(jobs) - 1)
        age = time.time() - w.record().create_time
        old = w.pid
        _kill_when_busy(c, rng, w, j, since, f"sustained: {age:.0f} s after its start")
        c.recover.append((w.name, c.back_to_ready(w.name, c.faults[-1].t, old)))
        time.sleep(spacing_s)
    return jobs


def redis_during_restart(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str,
                         spacing_s: float):
    """A worker killed, then Redis killed while the keeper waits for that worker's readiness
    (issue 27: Redis stayed down 181 s behind a prover's readiness wait)."""
    jobs = []
    for i in range(n_faults):
        c.wait_all_ready()
        since = time.time()
        for _ in range(2):
            j = f"{prefix}-{len(jobs)}"
            jobs.append(j)
            c.submit(j, len(jobs) - 1)
        w = rng.choice(c.workers)
        old_pid = w.pid
        _kill_when_busy(c, rng, w, jobs[-2], since, "before a Redis kill")
        old = c.faults[-1].t
        end = time.monotonic() + 30
        while time.monotonic() < end:  # the keeper started it again: not ready yet
            rec = w.record()
            if rec.pid != old_pid and rec.process() is not None:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.5))
        redis_pid = Worker(c, "redis").pid
        c.kill(Worker(c, "redis"), f"while the keeper waits for {w.name}")
        c.recover.append(("redis", c.back_to_ready("redis", c.faults[-1].t, redis_pid)))
        c.recover.append((w.name, c.back_to_ready(w.name, old, old_pid)))
        time.sleep(spacing_s)
    return jobs


def keeper_kill(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    """The keeper SIGKILLed, then a worker mid-job: a worker brings the keeper back
    (``ZKHIVE_KEEPER_WATCH_S``, 5 s), which brings the worker back."""
    jobs = []
    for i in range(n_faults):
        c.wait_all_ready()
        since = time.time()
        keeper_pid = Worker(c, "keeper").pid
        c.kill(Worker(c, "keeper"), "the keeper")
        keeper_killed = c.faults[-1].t
        j = f"{prefix}-{len(jobs)}"
        jobs.append(j)
        c.submit(j, len(jobs) - 1)
        w = rng.choice(c.workers)
        old_pid = w.pid
        _kill_when_busy(c, rng, w, j, since, "with the keeper dead")
        c.recover.append(("keeper", c.back_to_ready("keeper", keeper_killed, keeper_pid)))
        c.recover.append((w.name, c.back_to_ready(w.name, c.faults[-1].t, old_pid)))
        time.sleep(spacing_s)
    return jobs


def frozen_sole(c: FaultCluster, rng: random.Random, n_faults: int, prefix: str, spacing_s: float):
    """The only synthesis worker frozen (SIGSTOP) mid-synthesis and never woken: the keeper
    kills and replaces it (issue 27: its unit waited in a queue nobody else consumes)."""
    jobs = []
    for i in range(n_faults):
        c.wait_all_ready()
        since = time.time()
        j = f"{prefix}-{len(jobs)}"
        jobs.append(j)
        c.submit(j, len(jobs) - 1)
        w = Worker(c, "synthesis-0")
        c.first_event([j], "synthesis_start", since=since)
        time.sleep(rng.uniform(0, 0.3))
        pid = w.pid
        w.signal(signal.SIGSTOP)
        c.faults.append(Fault(time.time(), "SIGSTOP the sole synthesis worker", w.name))
        log(f"SIGSTOP {w.name} (pid {pid}), the only synthesis worker, mid-synthesis ({j})")
        c.recover.append((w.name, c.back_to_ready(w.name, c.faults[-1].t, pid)))
        try:
            os.killpg(pid, signal.SIGCONT)  # in case it is still there (it should not be)
        except ProcessLookupError:
            pass
        time.sleep(spacing_s)
    return jobs


RUNNERS = {"worker-kill": worker_kill, "redis-restart": redis_restart, "sigstop": sigstop,
           "duplicates": duplicates, "corrupt-vk": corrupt_vk, "sustained": sustained,
           "redis-during-restart": redis_during_restart, "keeper-kill": keeper_kill,
           "frozen-sole": frozen_sole}
#: faults per scenario at --scale 1
FAULTS = {"worker-kill": 24, "redis-restart": 8, "sigstop": 3, "duplicates": 4, "corrupt-vk": 2,
          "sustained": 24, "redis-during-restart": 6, "keeper-kill": 4, "frozen-sole": 3}


def run_scenario(c: FaultCluster, name: str, n_faults: int, *, seed: int, spacing_s: float = 8.0,
                 bound_s: float = 180.0) -> Outcome:
    rng = random.Random(f"{seed}/{name}")
    restarts0 = c.restarts
    recover0 = len(c.recover)
    t0 = time.time()
    log(f"scenario {name}: {n_faults} faults")
    jobs = RUNNERS[name](c, rng, n_faults, name, spacing_s)
    c.wait_jobs(jobs, bound_s)
    out = c.judge(Outcome(name), jobs, t0)
    out.restarts = c.restarts - restarts0
    out.recover = c.recover[recover0:]
    log(out.row())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="porep-lite-4k")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--scale", type=float, default=1.0, help="faults per scenario, times this")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spacing", type=float, default=8.0, help="seconds between faults")
    ap.add_argument("--root", default=None, help="run directory (default: a new one under /tmp)")
    args = ap.parse_args(argv)

    import tempfile

    root = Path(args.root or tempfile.mkdtemp(prefix="zkhive-faults-"))
    c = FaultCluster(root, args.params)
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
    print(f"# `zkhive up` with its keeper: {args.params}, 2 CPU provers, 1 synthesis worker, 1 aggregate "
          f"worker, default delivery settings; {os.cpu_count()} cores; seed {args.seed}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
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
        back: dict = {}
        for name, t in o.recover:
            if t is not None:
                back[name] = max(back.get(name, 0.0), t)
        if back:
            print(f"- {o.scenario} back to ready, longest: "
                  + ", ".join(f"{n} {t:.1f} s" for n, t in sorted(back.items())))
        for name in o.never_back():
            print(f"- {o.scenario}: {name} never came back")
    bad = [o for o in outs if o.lost or o.doubled or o.longest_wait() > 30 or o.never_back()
           or any("DOES NOT VERIFY" in e for e in o.failed.values())]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
