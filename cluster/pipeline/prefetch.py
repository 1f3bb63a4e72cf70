"""Prove-ahead: a prove worker proves the next partition waiting in its device queue while the
task in hand does its host-side work, so the device does not idle between tasks.

A prove worker runs Celery's solo pool (one task at a time, the device's context in that
process) with prefetch 1, so without this the device waits, between two partitions, for the
task to combine A, B, C on the host, store the proof, ack, receive the next message, fetch and
hash the next assignment (gigabytes at 2^27) and stage it. Here a thread of the same process:

1. peeks at the next ``depth`` (1-2) messages of the device queue in Redis (every priority
   list, in the order the worker will receive them; nothing is popped: the broker still hands
   each message to exactly one task, with late acks as before);
2. fetches and checks the assignment each one names (blob store: size, sha256), decodes it,
   and has the backend stage it (``Prover.stage``: the CUDA backend lays the planes out in
   page-locked memory, the host side of the proof's upload stage, off the device's path);
3. a second thread runs the device part of the proof (``backend.prove_terms``: upload, A z B z
   C z, H, the five MSMs) with the backend's context current on it, under the prover's device
   lock, while the first fetches the next assignment (at most ``depth`` fetched ahead);
4. keeps the five points, keyed by the message: circuit, job, partition and the assignment's sha256;
5. finishes an urgent unit itself (``complete``: more urgent than ``complete_below``, normal by
   default): its proof combined, stored (first writer wins) and its aggregation sent from here, as
   soon as its device part is done, instead of waiting for its task. The worker's one consumer
   (solo pool) delivers that task only when the task in hand returns, and the task in hand may be
   a normal one whose work this unit preempted, now proving from scratch: measured on the CPU
   prover (2026-12-05, porep-lite-256k backlog), a WinningPoSt proved ahead in 48 s then waited
   51 s more for its task. When its task comes, it finds the proof stored under its own task id
   and returns.

When the task for that partition arrives it takes the points (waiting while they are in flight)
and only combines them with fresh r, s: the proof is the same as one made from scratch (the
points are a deterministic function of key and assignment; the randomness enters in the
combination). A task with no prepared points proves as before. Work done ahead for a message
another prover took (two provers sharing a queue) is dropped after ``STALE_S``.

Priorities (issue 37): work proved ahead never makes a more urgent unit wait. When a message of
a more urgent priority (a lower number: critical 0 before normal 6) is waiting in the queue, or
arrives in a task that found nothing proved ahead for it, every less urgent entry not finished
yet is *preempted*: one still waiting for the device is dropped before it starts, one on the
device stops at its next stage boundary where the backend has them (``Preempted`` raised by its
timer: the CPU backend's matvec, MSM submission, NTT, MSMs; the CUDA backend times its kernels
with device events and has none, so a partition already on the GPU finishes), and the device
lock (``PriorityLock``) then goes to the most urgent waiter. The preempted unit is proved later
by its own task, from scratch (``stats["preempted"]``, a log line). Nothing is
proved ahead for a circuit whose key is not resident (no eviction on speculation), and any error
while proving ahead only drops that entry: the task then meets the error on its own path.

``ZKHIVE_PROVE_AHEAD`` = number of partitions proved ahead (default 1, 0 turns it off).
"""
from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

PROVE_TASK = "zkhive.prove_partition"
#: seconds a finished entry whose message left the queue waits for its task
STALE_S = 120.0
POLL_S = 0.02


def depth_setting() -> int:
    try:
        return max(0, min(2, int(os.environ.get("ZKHIVE_PROVE_AHEAD", "1"))))
    except ValueError:
        return 1


def peek_prove_tasks(r, queue: str, depth: int) -> list[dict]:
    """The next ``depth`` prove tasks of ``queue`` as (job_id, partition, assignment ref) dicts,
    in the order the worker will receive them (kombu's Redis transport pushes on the left and
    pops on the right, one list per priority level, level 0 first). Messages that do not parse
    as prove tasks are skipped, never touched."""
    from .queues import PRIORITY_STEPS

    names = [queue] + [f"{queue}\x06\x16{p}" for p in PRIORITY_STEPS if p]
    pipe = r.pipeline()
    for name in names:
        pipe.lrange(name, -depth, -1)
    out = []
    for raw_list in pipe.execute():
        for raw in reversed(raw_list):
            task = _parse(raw)
            if task is not None:
                out.append(task)
            if len(out) >= depth:
                return out
    return out


def _parse(raw: bytes) -> dict | None:
    try:
        msg = json.loads(raw)
        if msg.get("headers", {}).get("task") != PROVE_TASK:
            return None
        body = msg["body"]
        if msg.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args, kwargs, _ = json.loads(body)
        synthesized, job_id, partition = args[0], args[1], args[2]
        ref = synthesized["assignment"]
        prio = msg.get("properties", {}).get("priority")
        return {"job_id": str(job_id), "partition": int(partition), "ref": ref,
                "sha256": str(ref["sha256"]), "priority": prio if isinstance(prio, int) else None,
                "task_id": str(msg.get("headers", {}).get("id") or "")}
    except Exception:  # not ours to judge: the task itself validates its message
        return None


@dataclass
class _Entry:
    key: tuple
    task: dict
    circuit: object = None
    started: float = field(default_factory=time.time)
    done: threading.Event = field(default_factory=threading.Event)
    finished: float = 0.0
    z: object = None        # the fetched assignment, until the device has proved it
    terms: object = None
    timer: object = None
    error: str | None = None
    #: set when a more urgent unit waits: the entry stops at its next stage (Preempted)
    preempt: threading.Event = field(default_factory=threading.Event)
    #: its task has asked for it (``take``): the task finishes it, never the device thread
    taken: bool = False
    #: the device part is done: the rest (the combination) is never preempted
    proved: bool = False
    #: finished here (``complete``): the proof is stored, the task has nothing left to do
    completed: bool = False

    @property
    def priority(self) -> int:
        p = self.task.get("priority")
        return p if isinstance(p, int) else 9


#: what ``take`` returns for a unit finished and stored by the prove-ahead thread itself
COMPLETED = "completed ahead"


class Preempted(Exception):
    """Raised at a stage boundary of work proved ahead once a more urgent unit waits."""


def _preemptible_timer(entry: _Entry, blocked=lambda p: False, **context):
    """A StageTimer whose every stage first checks the entry's preempt flag, and ``blocked``:
    whether a more urgent task waits for the device."""
    from contextlib import contextmanager

    from gpu.timing import StageTimer

    class _Timer(StageTimer):
        @contextmanager
        def stage(self, name: str, **extra):
            # once its device part is done, the timer is the task's or ``complete``'s (the
            # combination): never preempted
            if not entry.done.is_set() and not entry.proved and \
                    (entry.preempt.is_set() or blocked(entry.priority)):
                raise Preempted(f"preempted before stage {name}: a more urgent unit waits")
            with super().stage(name, **extra):
                yield

    return _Timer(**context)


class ProveAhead:
    """The prove-ahead threads of one prover (see the module docstring): a fetcher that keeps up
    to ``depth`` upcoming assignments fetched and checked, and a device thread that proves them
    in delivery order, so the next fetch overlaps the current proof on the device."""

    def __init__(self, prover, *, peek, circuit_of, fetch, depth: int = 1, complete=None,
                 complete_below: int = 6):
        """``peek(k)`` -> the next k prove tasks (peek_prove_tasks); ``circuit_of(job_id)`` ->
        the job's circuit or None; ``fetch(circuit, ref)`` -> the assignment array;
        ``complete(task, circuit, terms, timer)`` (optional) finishes and stores the proof of a
        unit more urgent than ``complete_below`` (a priority number: normal's 6) whose task has
        not asked for it yet (module docstring, 5)."""
        self.prover, self.depth = prover, depth
        self._peek, self._circuit_of, self._fetch = peek, circuit_of, fetch
        self._complete, self._complete_below = complete, complete_below
        self._entries: dict[tuple, _Entry] = {}
        self._left: dict[tuple, float] = {}  # when an entry's message was first seen gone
        self._names: dict[str, str] = {}  # job id -> its circuit's name
        self._urgent: dict[int, int] = {}  # priority -> tasks of it proving on their own (urgent())
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._todo: "queue.Queue[_Entry | None]" = queue.Queue()
        self.stats = {"hits": 0, "misses": 0, "ahead": 0, "dropped": 0, "preempted": 0, "completed": 0}
        self._completing: "queue.Queue[_Entry | None]" = queue.Queue()
        self._threads = [threading.Thread(target=self._run_fetch, name="prove-ahead-fetch", daemon=True),
                         threading.Thread(target=self._run_device, name="prove-ahead-device", daemon=True)]
        if complete is not None:
            self._threads.append(threading.Thread(target=self._run_complete, name="prove-ahead-complete",
                                                  daemon=True))
        for t in self._threads:
            t.start()

    # -- the task's side ----------------------------------------------------------------------
    def take(self, circuit, sha256: str, timeout: float, priority: int | None = None,
             job_id: str | None = None, partition: int | None = None):
        """(terms, timer) proved ahead for this message (job, partition, assignment), waiting
        while in flight; COMPLETED when this thread finished and stored its proof (``complete``);
        None when nothing was (or it failed). A miss preempts the entries less urgent than
        ``priority`` (the task's): the device is this task's next."""
        key = (circuit.name, job_id, partition, sha256)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.taken = True  # from here the task finishes it (unless complete began)
        self._wake.set()  # the message in hand left the queue: look at the next one now
        if entry is None:
            self.stats["misses"] += 1
            if priority is not None:
                self.preempt_below(priority, f"a task of priority {priority} found nothing proved ahead")
            return None
        entry.done.wait(timeout)
        with self._lock:
            self._entries.pop(key, None)
        if entry.completed:
            return COMPLETED
        if not entry.done.is_set() or entry.error is not None:
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return entry.terms, entry.timer

    @contextlib.contextmanager
    def urgent(self, priority: int):
        """Around a task's own device work (nothing proved ahead for it): meanwhile no entry
        less urgent than ``priority`` starts a stage, so the task waits for the device at most
        one stage of work proved ahead (an entry made after ``take``'s miss included)."""
        with self._lock:
            self._urgent[priority] = self._urgent.get(priority, 0) + 1
        self.preempt_below(priority, f"a task of priority {priority} proves on the device")
        try:
            yield
        finally:
            with self._lock:
                self._urgent[priority] -= 1
                if not self._urgent[priority]:
                    del self._urgent[priority]
            self._wake.set()

    def _blocked(self, priority: int) -> bool:
        """Whether a task more urgent than ``priority`` proves, or waits to, on its own."""
        return any(p < priority for p in list(self._urgent))

    def preempt_below(self, priority: int, why: str) -> int:
        """Preempt every unfinished entry less urgent than ``priority``; returns how many."""
        n = 0
        with self._lock:
            for e in self._entries.values():
                if not e.done.is_set() and not e.preempt.is_set() and e.priority > priority:
                    e.preempt.set()
                    n += 1
                    log.info("prove-ahead of job %s partition %s (priority %s) preempted: %s",
                             e.task["job_id"], e.task["partition"], e.priority, why)
        self.stats["preempted"] += n
        return n

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._todo.put(None)
        self._completing.put(None)
        for t in self._threads:
            t.join(timeout=30)

    # -- the threads --------------------------------------------------------------------------
    def _run_fetch(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(POLL_S * 10)
            self._wake.clear()
            try:
                self._step()
            except Exception as e:  # never take the worker down: the tasks prove on their own
                log.warning("prove-ahead: %s: %s", type(e).__name__, e)
                time.sleep(0.5)

    def _run_device(self) -> None:
        while not self._stop.is_set():
            entry = self._todo.get()
            if entry is None:
                return
            handed = False
            try:
                if entry.preempt.is_set() or self._blocked(entry.priority):
                    raise Preempted("preempted before the device: a more urgent unit waits")
                entry.terms = self.prover.prove_terms(entry.circuit, entry.z, entry.timer, priority=entry.priority)
                entry.proved = True
                self.stats["ahead"] += 1
                entry.z = None
                handed = self._hand_over(entry)
            except Exception as e:
                entry.error = f"{type(e).__name__}: {e}"
                log.info("prove-ahead of job %s partition %s dropped: %s", entry.task["job_id"],
                         entry.task["partition"], entry.error)
            finally:
                entry.z = None
                if not handed:
                    self._finish(entry)
                self._wake.set()  # room for the next fetch

    def _hand_over(self, entry: _Entry) -> bool:
        """An urgent unit whose task has not asked for it goes to the completing thread (module
        docstring, 5), so this thread is at the device lock again at once: were it combining and
        storing here, a normal task waiting for the lock would take the device ahead of the next
        urgent unit."""
        with self._lock:
            if self._complete is None or entry.taken or entry.priority >= self._complete_below:
                return False
            entry.taken = True  # a take() from now on waits for the completion, then finds it done
        self._completing.put(entry)
        return True

    def _run_complete(self) -> None:
        while True:
            entry = self._completing.get()
            if entry is None:
                return
            try:
                self._complete(entry.task, entry.circuit, entry.terms, entry.timer)
                entry.completed = True
                self.stats["completed"] += 1
            except Exception as e:  # the points stay for the task, which combines and stores them
                log.warning("prove-ahead: completing job %s partition %s here failed (%s: %s): its task "
                            "finishes it", entry.task["job_id"], entry.task["partition"], type(e).__name__, e)
            finally:
                self._finish(entry)

    def _finish(self, entry: _Entry) -> None:
        entry.finished = time.time()
        entry.done.set()
        if entry.error is not None:
            with self._lock:
                self._entries.pop(entry.key, None)

    def _circuit_key(self, task: dict) -> tuple | None:
        """The entry key a task would have (its circuit's name, from the job; cached per job)."""
        name = self._names.get(task["job_id"])
        if name is None:
            circuit = self._circuit_of(task["job_id"])
            if circuit is None:
                return None
            name = self._names[task["job_id"]] = circuit.name
            if len(self._names) > 4096:
                self._names.pop(next(iter(self._names)))
        return (name, task["job_id"], task["partition"], task["sha256"])

    def _pending(self) -> int:
        """Entries holding an assignment: fetched and waiting for the device, or on it (a
        preempted one is leaving: it does not hold back the fetch of the urgent one)."""
        return sum(1 for e in self._entries.values() if not e.done.is_set() and not e.preempt.is_set())

    def _step(self) -> None:
        # the messages already entered are still waiting (a task pops its own): look past them
        tasks = self._peek(self.depth + 2)
        # an entry is one message's (job, partition, assignment): two messages with the same
        # assignment (one sector submitted under two ids, or partitions alike) are two entries,
        # never one standing for both (a critical one was skipped as "already ahead" that way)
        waiting = {(t["job_id"], t["partition"], t["sha256"]) for t in tasks}
        now = time.time()
        with self._lock:
            # done work whose message is no longer waiting and was not taken soon after it left
            # the queue went to another prover, or to a task that had nothing to prove
            for key, e in list(self._entries.items()):
                if key[1:] in waiting:
                    continue
                left = self._left.setdefault(key, now)
                if e.done.is_set() and now - max(e.finished, left) > STALE_S / 12:
                    del self._entries[key]
                    self.stats["dropped"] += 1
            self._left = {k: v for k, v in self._left.items() if k in self._entries}
        # a waiting message that nothing is proved ahead for outranks the less urgent work in
        # hand: preempt that work (delivery order is priority order: the loop below then fetches
        # the urgent one first, and the device thread proves in the order fetched)
        keys = [(t, self._circuit_key(t)) for t in tasks if t.get("priority") is not None]
        with self._lock:
            urgent = [t["priority"] for t, k in keys if k not in self._entries]
        if urgent:
            self.preempt_below(min(urgent), f"a message of priority {min(urgent)} waits in the queue")
        for task in tasks:
            with self._lock:
                if self._pending() > self.depth:  # one on the device + depth fetched
                    return
            circuit = self._circuit_of(task["job_id"])
            if circuit is None or not self.prover.is_resident(circuit):
                continue
            key = (circuit.name, task["job_id"], task["partition"], task["sha256"])
            with self._lock:
                if key in self._entries:
                    continue
                entry = self._entries[key] = _Entry(key, task, circuit)
            try:
                entry.timer = _preemptible_timer(entry, self._blocked, job=task["job_id"], partition=task["partition"],
                                                 device=str(self.prover.device))
                with entry.timer.stage("fetch_ahead"):
                    entry.z = self._fetch(circuit, task["ref"])
                # the upload's host side too, while the device proves the partition before
                # (Prover.stage: the CUDA backend's page-locked planes)
                with entry.timer.stage("stage_ahead"):
                    entry.z = self.prover.stage(circuit, entry.z)
            except Exception as e:
                entry.error = f"{type(e).__name__}: {e}"
                self._finish(entry)
                continue
            self._todo.put(entry)
