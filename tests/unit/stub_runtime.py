"""A cluster without a broker, for unit tests of the task bodies (dramatiq's StubBroker idea).

The job store, the registry, the routing and the timeline are the real ones, over an in-memory
Redis (fakeredis, with Lua for the job store's scripts); blobs live in memory; the dispatcher
(cluster.pipeline.workflow.CeleryDispatch's stand-in) appends messages to a list instead of sending them,
routing prove messages with the real ``route_partition`` as Celery's router would. ``drain()``
delivers the messages, oldest first, to the stub worker serving each queue, through the same
bodies (cluster.pipeline.tasks.synthesize, prove, aggregate_job) the Celery tasks call; a chain's next
step and the chord's body follow as Celery would send them (the body only when every header
chain succeeded). Provers prove for real on the CPU backend.
"""
from __future__ import annotations

import hashlib
import itertools
import uuid
from dataclasses import dataclass, field

import fakeredis
from celery.exceptions import Retry

from cluster.pipeline import registry
from cluster import settings
from cluster.pipeline.blobs import BlobError, BlobRef, BlobStore
from cluster.errors import JobFailed
from cluster.pipeline.jobs import JobStore
from cluster.pipeline.keys import KeyCache
from cluster.pipeline.lease import Leases
from cluster.pipeline.prover import Prover, parse_device


class MemoryBlobStore(BlobStore):
    """Blobs in a dict, checked on read like every store (cluster.pipeline.blobs.BlobStore.get)."""

    name = "redis"  # a reference names a store kind; this one stands in for the Redis store

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes, self.data = max_bytes, {}

    def put(self, data: bytes, kind: str = "blob") -> BlobRef:
        sha = hashlib.sha256(data).hexdigest()
        self.data[sha] = bytes(data)
        return BlobRef(store="redis", sha256=sha, size=len(data), kind=kind)

    def _read(self, ref: BlobRef) -> bytes:
        if ref.sha256 not in self.data:
            raise BlobError(f"blob {ref.short()} is missing")
        return self.data[ref.sha256]

    def delete(self, ref) -> None:
        self.data.pop(ref.sha256, None)


@dataclass
class Message:
    name: str            # "synthesize" | "prove" | "aggregate"
    args: tuple
    kwargs: dict
    queue: str
    task_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    retries: int = 0
    chord: str | None = None   # the job whose chord this message belongs to
    then: "Message | None" = None  # a chain's next step (gets this step's result first)

    def job_id(self) -> str:
        # synthesize(job, k); prove([assignment,] job, k); aggregate(results, job)
        return self.args[0] if self.name == "synthesize" else self.args[-2] if self.name == "prove" \
            else self.args[-1]

    def partition(self) -> int | None:
        return None if self.name == "aggregate" else self.args[-1]


class StubDispatch:
    """What the tasks, the client and the watchdog send, appended to ``cluster.queue``."""

    def __init__(self, cluster: "StubCluster"):
        self.cluster = cluster

    def job(self, rec) -> None:
        self.cluster.chords[rec.job_id] = {"left": rec.num_partitions, "failed": False}
        for k in range(rec.num_partitions):
            self.cluster.send(Message("synthesize", (rec.job_id, k), {}, "synthesis", chord=rec.job_id,
                                      then=Message("prove", (rec.job_id, k), {}, "", chord=rec.job_id)))

    def partition(self, rec, k, assignment, exclude) -> None:
        prove = Message("prove", (rec.job_id, k), {"exclude": exclude}, "")
        if assignment is None:
            self.cluster.send(Message("synthesize", (rec.job_id, k), {}, "synthesis", then=prove))
        else:
            prove.args = ({"partition": k, "assignment": assignment}, rec.job_id, k)
            self.cluster.send(prove)

    def aggregate(self, rec) -> None:
        self.cluster.send(Message("aggregate", (None, rec.job_id), {}, "aggregate"))

    def queued_units(self, r) -> dict[tuple[str, str], list[str]]:
        """Where each unit's messages wait (CeleryDispatch.queued_units), from the stub's list."""
        where: dict[tuple[str, str], list[str]] = {}
        for m in self.cluster.queue:
            unit = "aggregate" if m.name == "aggregate" else str(m.partition())
            where.setdefault((m.job_id(), unit), []).append(m.queue)
        return where

    def drop_queued(self, r, job_id: str) -> int:
        before = len(self.cluster.queue)
        self.cluster.queue = [m for m in self.cluster.queue if m.job_id() != job_id]
        return before - len(self.cluster.queue)


class StubRuntime:
    """cluster.pipeline.app.Runtime's fields, for one stub worker (shared stores, its own identity)."""

    def __init__(self, cluster: "StubCluster", worker=None, prover=None):
        self.settings, self.redis = cluster.settings, cluster.redis
        self.jobs, self.blobs, self.keys = cluster.jobs, cluster.blobs, cluster.keys
        self.leases = cluster.leases
        self.dispatch = cluster.dispatch
        self.worker, self.prover = worker, prover

    def ttl(self) -> int:
        return self.settings.delivery.result_ttl_s


class StubCluster:
    """One synthesis and one aggregate worker, and ``add_prover(device)`` for each device."""

    def __init__(self, key_dir, **delivery):
        self.settings = settings.load(env={f"ZKHIVE_DELIVERY__{k.upper()}": str(v) for k, v in delivery.items()})
        self.redis = fakeredis.FakeRedis()
        self.jobs = JobStore(self.redis, self.settings.delivery.result_ttl_s)
        self.leases = Leases(self.redis, self.settings.delivery.lease_ttl_s, self.settings.delivery.result_ttl_s)
        self.blobs = MemoryBlobStore()
        self.keys = KeyCache(key_dir)
        self.dispatch = StubDispatch(self)
        self.queue: list[Message] = []
        self.chords: dict[str, dict] = {}
        #: (message, outcome) of every delivery: "ok", "retry" or the JobFailed raised
        self.log: list[tuple[Message, object]] = []
        self.synthesis = StubRuntime(self, self._info("synthesis", "synthesis.stub.1", ["synthesis"]))
        self.aggregator = StubRuntime(self, self._info("aggregate", "aggregate.stub.1", ["aggregate"]))
        self.provers: dict[str, StubRuntime] = {}

    def _info(self, role, worker_id, queues, device=None):
        return registry.WorkerInfo(worker_id=worker_id, role=role, host="stub", pid=1, queues=queues,
                                   device=device, ready=True)

    def add_prover(self, device: str, *, keys: KeyCache | None = None, memory_limit: int | None = None,
                   backend=None) -> StubRuntime:
        dev = parse_device(device)
        prover = Prover(dev, keys or self.keys, memory_limit)
        if backend is not None:
            prover.backend = backend
        info = self._info("prove", f"prove.stub.{dev.kind}{dev.index}.0", [dev.queue("stub")], str(dev))
        rt = StubRuntime(self, info, prover)
        self.provers[info.queues[0]] = rt
        self.publish(rt)
        return rt

    def publish(self, rt: StubRuntime) -> None:
        """The heartbeat: the registry entry with the prover's resident keys and free memory."""
        rt.worker.resident_keys = rt.prover.resident_names()
        rt.worker.free_memory = rt.prover.free_memory()
        registry.publish(self.redis, rt.worker, ttl_s=3600)

    def kill(self, rt: StubRuntime) -> None:
        """The prover died: its registry entry is gone, its queue has no consumer."""
        registry.leave(self.redis, rt.worker.worker_id)
        self.provers = {q: p for q, p in self.provers.items() if p is not rt}

    # -- the broker -------------------------------------------------------------------------------
    def send(self, msg: Message) -> None:
        if msg.name == "prove" and not msg.queue:  # Celery's router, when the message is sent
            from cluster.pipeline.routing import route_partition

            job_id, k = msg.args[-2], msg.args[-1]
            msg.queue = route_partition(self.synthesis, job_id, k, tuple(msg.kwargs.get("exclude") or ())).queue
        self.queue.append(msg)

    def runtime_for(self, queue: str) -> StubRuntime | None:
        return {"synthesis": self.synthesis, "aggregate": self.aggregator}.get(queue) or self.provers.get(queue)

    def drain(self, limit: int = 100) -> None:
        """Deliver queued messages until none is left that a worker serves."""
        if self.step(limit) == limit and self._next() is not None:
            raise AssertionError(f"still {len(self.queue)} messages after {limit} deliveries")

    def step(self, n: int) -> int:
        """Deliver at most n messages; returns how many."""
        done = 0
        for _ in itertools.repeat(None, n):
            msg = self._next()
            if msg is None:
                break
            self.queue.remove(msg)
            self.deliver(msg)
            done += 1
        return done

    def _next(self) -> Message | None:
        return next((m for m in self.queue if self.runtime_for(m.queue) is not None), None)

    def deliver(self, msg: Message):
        from cluster.pipeline import tasks

        rt = self.runtime_for(msg.queue)
        d = tasks.Delivery(task_id=msg.task_id, retries=msg.retries, in_chord=msg.chord is not None,
                           retry=lambda args, kwargs, queue, exc=None, countdown=0.2: self._retry(msg, args, kwargs, queue))
        body = {"synthesize": tasks.synthesize, "prove": tasks.prove,
                "aggregate": lambda rt, d, _, job_id: tasks.aggregate_job(rt, job_id)}[msg.name]
        try:
            result = body(rt, d, *msg.args, **msg.kwargs)
        except Retry:
            self.log.append((msg, "retry"))
            return None
        except JobFailed as e:
            self.log.append((msg, e))
            self._chord_part(msg, failed=True)
            return e
        finally:
            if rt.prover is not None:
                self.publish(rt)
        self.log.append((msg, "ok"))
        if msg.then is not None:
            nxt = msg.then
            nxt.args = (result, *nxt.args)
            self.send(nxt)
        else:
            self._chord_part(msg, failed=False)
        return result

    def _retry(self, msg: Message, args, kwargs, queue):
        again = Message(msg.name, tuple(args), dict(kwargs), queue or msg.queue, task_id=msg.task_id,
                        retries=msg.retries + 1, chord=msg.chord, then=msg.then)
        if again.name == "prove" and not queue:
            again.queue = ""
        self.send(again)
        raise Retry()

    def _chord_part(self, msg: Message, failed: bool) -> None:
        chord = self.chords.get(msg.chord) if msg.chord else None
        if chord is None:
            return
        chord["failed"] |= failed
        chord["left"] -= 1
        if chord["left"] == 0 and not chord["failed"]:  # Celery runs the body only then
            self.send(Message("aggregate", (None, msg.chord), {}, "aggregate"))

    # -- what tests read ------------------------------------------------------------------------
    def events(self, job_id: str, kind: str | None = None, partition: int | None = None) -> list[dict]:
        from cluster.pipeline import timeline

        return [e for e in timeline.load(self.redis, job_id)
                if (kind is None or e["event"] == kind) and (partition is None or e.get("partition") == partition)]

    def failures(self) -> list[JobFailed]:
        return [o for _, o in self.log if isinstance(o, JobFailed)]
