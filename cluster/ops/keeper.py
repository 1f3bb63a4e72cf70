"""The keeper: brings a crashed or frozen process of ``zkhive up`` back; degrades, never abandons.

The seeds' operators fought both failures of supervision: a worker that died and stayed dead
(every partition routed to it waited), and a supervisor that brought a daemon back when they
meant to stop it. The keeper is one process that ``zkhive up`` starts last and ``zkhive down``
stops first, so nothing it supervises can come back after ``down``:

- every ``poll_s`` it reads the state file; a recorded process that is gone (its PID and start
  time no longer name a live process) is started again from its service spec, after a delay
  that doubles with each consecutive short-lived run (``backoff_s`` .. ``max_backoff_s``; a
  prover's stops at ``prove_max_backoff_s``, Redis's at ``redis_max_backoff_s``); a run that
  stays up ``stable_s`` resets the count;
- every step it also rotates each process's log that grew past ``[logs] max_bytes`` (copy to
  ``.1``, truncate in place: ``supervisor.rotate_log``; ``up`` records the setting in the meta);
- restarts run in parallel, each in its own thread: the spawn is recorded under the state
  directory's lock (milliseconds) and the readiness wait happens outside it, so Redis is never
  restarted behind a worker's readiness wait (issue 27: Redis stayed down 181 s while the keeper
  waited for a prover). Redis goes first: while it is gone or not yet ready, no worker is started
  (a worker needs it to register);
- the give-up counts only runs that **never became ready** (``ProcessRecord.unready``): a worker
  that was ready and proved jobs, then was killed young, is a crash, not a failed start. After
  ``max_failures`` unready runs in a row a process is left stopped, with the reason and its log
  tail, **unless it is the last live process of its role**: then it is retried every
  ``max_backoff_s`` (the ceiling) with a note saying so, because a role without a process stops
  every job (``zkhive ps`` / ``status`` show both); ``zkhive restart NAME`` clears either;
- a **frozen** worker (SIGSTOPped, or its heartbeat in the registry older than ``frozen_s``
  while Redis answers: a stuck VM, a deadlock) is SIGKILLed with its children and then restarted
  like a crashed one: its units' leases lapse anyway, but a frozen last worker of a role would
  leave their re-dispatched copies in a queue nobody consumes;
- a **wedged** process whose spec has a liveness probe (``ServiceSpec.alive``: the gateway,
  asked GetStatus with a deadline) that is stopped, or has not answered for ``unanswered_s``,
  is killed and restarted the same way: alive and listening is not serving (issue 39: a
  gateway whose threads all waited on a pool stayed up, and every call hung);
- each restart is recorded in the state file (``restarts``) and told through ``on_event``
  (the ``cluster`` timeline in Redis: ``zkhive timeline cluster``).

Who watches the keeper: ``zkhive status`` warns when it is gone, ``zkhive up`` on a running
cluster starts it again, and so does every worker ``up`` started (``watch_keeper`` in
cluster.ops.membership, a thread of ``zkhive worker``), unless ``down`` has begun
(``meta["stopping"]``).

Stopping: SIGTERM ends the loop between steps; a restart in progress is already in the state
file (the spawn is saved before the readiness wait), so the ``down`` that follows stops the new
process too.
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable

import psutil

from .supervisor import (Busy, ProcessRecord, ServiceSpec, StartFailure, Supervisor, SupervisorError,
                         own_family, rotate_log)

#: the keeper's own record name in the state file (never restarted by itself)
KEEPER = "keeper"
#: roles whose processes report a heartbeat in the registry (checked for freezing)
WORKER_ROLES = ("aggregate", "synthesis", "prove")


def age(rec: ProcessRecord, now: float) -> float:
    """Seconds rec's process had lived at wall-clock time ``now``. With the start recorded as
    seconds since boot, the uptime at ``now`` (now minus the boot time psutil reads now) less
    that: a step of the wall clock moves both the same way, so a process that lived an hour is
    not taken for one that died young after the clock stepped back (nor the reverse); older
    records: now minus create_time, the wall clock's own view."""
    if rec.since_boot:
        return now - psutil.boot_time() - rec.since_boot
    return now - rec.create_time


@dataclass
class KeeperPolicy:
    poll_s: float = 1.0
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    #: a run that lived this long was healthy: its failure count starts again from zero
    stable_s: float = 60.0
    #: consecutive runs that never became ready after which the process is left stopped
    #: (when another process of its role is alive)
    max_failures: int = 5
    #: a worker whose registry heartbeat is this old (Redis answering), or that is stopped
    #: (SIGSTOP) this long, is frozen: killed and restarted
    frozen_s: float = 20.0
    stopped_s: float = 5.0
    #: a ready process with a liveness probe (the gateway) that has failed it this long is wedged
    unanswered_s: float = 10.0
    #: Redis's delay never grows past this: every job stops while it is down, and it starts in
    #: well under a second (the campaign's Redis kills, 8 in 3 minutes, had it waiting 60 s)
    redis_max_backoff_s: float = 2.0
    #: nor a prover's past this (a crash's doubling): a device without its prover proves
    #: nothing, and six young deaths in a row kept one out ~64 s (issue 39); a prover that never
    #: becomes ready and is the last of its role is still retried at ``max_backoff_s``
    prove_max_backoff_s: float = 10.0

    def delay(self, failures: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * (2 ** max(0, failures - 1)))


class Keeper:
    """Restarts the gone (and frozen) processes of one state directory. ``specs()`` returns the
    service spec of each restartable name (``zkhive up``'s plan); ``on_event(event, **fields)``
    is told about restarts and give-ups; ``heartbeats()`` returns ``{pid: heartbeat_at}`` of this
    host's registry entries, or None when Redis cannot be read (no freeze is judged then);
    ``on_gone(record)`` is told once of each worker process found gone (crashed, SIGKILLed,
    killed as frozen), before its restart's delay: ``zkhive keeper`` asks the watchdogs for a
    sweep then, so the units it held are re-dispatched at once (cluster.pipeline.reconcile)."""

    def __init__(self, state_dir, specs: Callable[[], dict[str, ServiceSpec]], *,
                 policy: KeeperPolicy | None = None,
                 on_event: Callable[..., None] | None = None, out=print,
                 heartbeats: Callable[[], dict[int, float] | None] | None = None,
                 on_gone: Callable[[ProcessRecord], None] | None = None):
        self.sup = Supervisor(state_dir)
        self.specs = specs
        self.policy = policy or KeeperPolicy()
        self.on_event = on_event or (lambda event, **f: None)
        self.out = out
        self.heartbeats = heartbeats or (lambda: None)
        self.on_gone = on_gone or (lambda rec: None)
        self._told_gone: dict[str, int] = {}  # name -> the pid on_gone was told of
        self._due: dict[str, float] = {}  # name -> when the next start may happen
        self._spec_cache: dict[str, ServiceSpec] | None = None
        self._last_reason: dict[str, str] = {}
        self._starting: dict[str, threading.Thread] = {}  # readiness waits in flight
        self._suspect: dict[str, float] = {}  # name -> since when it looks frozen
        self._redis_back_at: float | None = 0.0  # when heartbeats could last be read again
        self._mutex = threading.Lock()  # one thread at a time edits self.sup
        self.stopping = threading.Event()

    def _spec(self, name: str) -> ServiceSpec | None:
        if self._spec_cache is None:
            self._spec_cache = self.specs()
        return self._spec_cache.get(name)

    # -- one look -----------------------------------------------------------------------------------
    def step(self, now: float | None = None) -> list[str]:
        """One look at the state file; returns the names restarted (or given up, or killed as
        frozen) this step. Readiness waits go on in threads (``wait()`` joins them)."""
        now = time.time() if now is None else now
        with self._mutex:
            try:
                if not self.sup.load() or self.sup.meta.get("stopping"):
                    self.stopping.set()  # `down` began or removed the state file: nothing to keep
                    return []
            except SupervisorError as e:
                self.out(f"keeper: {e}")
                return []
            records = [r for r in self.sup.records if r.name != KEEPER and not r.by_hand]
            logs = self.sup.meta.get("logs") or {}
            mine = [r.log for r in self.sup.records if not r.by_hand]
        self._rotate(mine, int(logs.get("max_bytes") or 0), int(logs.get("backups") or 0))
        acted = self._thaw_frozen(records, now)
        # Redis first: a worker started while Redis is away fails to register and counts unready
        redis_down = any(r.role == "redis" and (r.name in self._starting or r.process() is None)
                         for r in records)
        for rec in sorted(records, key=lambda r: r.role != "redis"):
            if rec.given_up or self.stopping.is_set():
                continue
            if rec.process() is not None:
                self._due.pop(rec.name, None)
                continue
            if redis_down and rec.role != "redis":
                continue
            if rec.role in WORKER_ROLES and self._told_gone.get(rec.name) != rec.pid:
                self._told_gone[rec.name] = rec.pid
                try:
                    self.on_gone(rec)
                except Exception as e:  # Redis away: the leases lapse by themselves
                    self.out(f"keeper: could not report {rec.name} gone: {e}")
            died_young = bool(rec.create_time) and age(rec, now) < self.policy.stable_s
            failures = rec.failures + 1 if died_young else 0
            unready = 0 if rec.ready_at else rec.unready + 1
            last = self._last_of_role(records, rec)
            # the last of a role is retried at the ceiling once it has failed too often
            delay = self.policy.max_backoff_s if last and unready >= self.policy.max_failures \
                else self.policy.delay(max(failures, 1))
            # a key holder is a prover's first need (cluster/pipeline/keyholder.py): as soon
            if rec.role in ("prove", "keyholder") and unready < self.policy.max_failures:
                delay = min(delay, self.policy.prove_max_backoff_s)
            if rec.role == "redis":
                delay = min(delay, self.policy.redis_max_backoff_s)
            due = self._due.setdefault(rec.name, now + delay)
            if now < due:
                continue
            if self._restart(rec.name, failures, unready, last):
                acted.append(rec.name)
        return list(dict.fromkeys(acted))  # a frozen one killed and restarted: named once

    def _rotate(self, logs: list[str], max_bytes: int, backups: int) -> None:
        """``[logs]``: rotate each process's log that grew past ``max_bytes`` (``up`` records
        the setting in the state file's meta)."""
        for log in dict.fromkeys(logs):
            try:
                if rotate_log(log, max_bytes, backups):
                    self.out(f"keeper: rotated {log} (over {max_bytes} bytes; {backups} kept)")
            except OSError as e:
                self.out(f"keeper: cannot rotate {log}: {e}")

    @staticmethod
    def _last_of_role(records: list[ProcessRecord], rec: ProcessRecord) -> bool:
        return not any(r is not rec and r.role == rec.role and r.process() is not None
                       for r in records)

    def _thaw_frozen(self, records: list[ProcessRecord], now: float) -> list[str]:
        """SIGKILL (with its children) each ready worker that is stopped or whose heartbeat is
        stale, and each ready process with a liveness probe that is stopped or has failed it for
        ``unanswered_s``; the next step restarts it like any gone process."""
        beats = None
        killed = []
        for rec in records:
            spec = self._spec(rec.name) if rec.role not in WORKER_ROLES else None
            probe = spec.alive if spec is not None else None
            if (rec.role not in WORKER_ROLES and probe is None) or not rec.ready_at or rec.name in self._starting:
                self._suspect.pop(rec.name, None)
                continue
            proc = rec.process()
            if proc is None:
                self._suspect.pop(rec.name, None)
                continue
            try:
                stopped = proc.status() == psutil.STATUS_STOPPED
            except psutil.NoSuchProcess:
                continue
            why = None
            if stopped:
                since = self._suspect.setdefault(rec.name, now)
                if now - since >= self.policy.stopped_s:
                    why = f"stopped (SIGSTOP) for {now - since:.0f} s"
            elif probe is not None:
                reason = probe(rec)
                if reason is None:
                    self._suspect.pop(rec.name, None)
                    continue
                since = self._suspect.setdefault(rec.name, now)
                if now - since >= self.policy.unanswered_s:
                    why = f"alive but not answering for {now - since:.0f} s: {reason}"
            else:
                if beats is None:
                    beats = self.heartbeats()
                    if beats is None:  # Redis away: nobody's heartbeat can be judged
                        self._suspect.clear()
                        self._redis_back_at = None
                        return killed
                    if self._redis_back_at is None:  # (back): heartbeats are judged from now on
                        self._redis_back_at = now
                at = beats.get(rec.pid)
                if at is not None and now - at < self.policy.frozen_s:
                    self._suspect.pop(rec.name, None)
                    continue
                since = self._suspect.setdefault(rec.name, max(now if at is None else at, self._redis_back_at))
                if now - since >= self.policy.frozen_s:
                    why = (f"no heartbeat in the registry for {now - since:.0f} s" if at is None
                           else f"its heartbeat is {now - at:.0f} s old")
            if why is None:
                continue
            self._suspect.pop(rec.name, None)
            self._kill_family(proc)
            self.out(f"keeper: {rec.name} (pid {rec.pid}) is frozen ({why}): killed; it is restarted next")
            self.on_event("worker_frozen" if probe is None else "process_wedged", name=rec.name,
                          pid=rec.pid, reason=why)
            # a frozen run was ready: the restart is a crash's, without the young-death backoff
            self._due[rec.name] = now
            killed.append(rec.name)
        return killed

    @staticmethod
    def _kill_family(proc: psutil.Process) -> None:
        family = own_family(proc)  # not a keeper this worker revived, nor what that keeper started
        for p in family:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(family, timeout=5)

    # -- restarting ---------------------------------------------------------------------------------
    def _restart(self, name: str, failures: int, unready: int, last: bool) -> bool:
        spec = self._spec(name)
        if spec is None:
            return False  # not a service of this plan (a record from an older version)
        try:
            with self._mutex, self.sup.locked():
                self.sup.load()
                rec = self.sup.record(name)
                if rec is None or rec.process() is not None or rec.given_up or self.sup.meta.get("stopping"):
                    return False  # `zkhive restart` or `down` got there first
                rec.failures, rec.unready = failures, unready
                reason = self._last_reason.get(name)
                if unready >= self.policy.max_failures:
                    why = (f"failed to become ready {unready} times in a row"
                           + (f"; last: {reason}" if reason else ""))
                    if not last:
                        return self._give_up(rec, why)
                    rec.note = (f"{why}; the last {rec.role} process, so it is retried every "
                                f"{self.policy.max_backoff_s:.0f} s")
                    self.sup.save()
                new = self.sup.replace(spec)
                self.out(f"keeper: {name} was gone; started again as pid {new.pid} "
                         f"(restart {new.restarts})")
        except Busy:
            return False  # `up`, `down` or `restart` holds the state: look again next step
        self._due.pop(name, None)
        t = threading.Thread(target=self._await_ready, args=(spec, new), daemon=True,
                             name=f"keeper-{name}")
        self._starting[name] = t  # before start: its finally removes only itself
        t.start()
        return True

    def _await_ready(self, spec: ServiceSpec, new: ProcessRecord) -> None:
        try:
            try:
                self.sup.wait_ready(spec, new)
            except StartFailure as e:
                # counted as an unready run by the next step, which also applies the backoff
                self._stop_pid(new)
                self._last_reason[spec.name] = e.reason
                self.out(f"keeper: {spec.name} failed to start: {e.reason}")
                self.on_event("worker_start_failed", name=spec.name, reason=e.reason,
                              failures=new.unready + 1)
                return
            self._update(new, ready_at=time.time(), unready=0, note="")
            self._last_reason.pop(spec.name, None)
            self.on_event("worker_restarted", name=spec.name, pid=new.pid, restarts=new.restarts)
        finally:
            if self._starting.get(spec.name) is threading.current_thread():
                del self._starting[spec.name]

    def _stop_pid(self, new: ProcessRecord) -> None:
        self.sup.stop_one(new, grace_s=5)

    def _update(self, new: ProcessRecord, **fields) -> None:
        """Set fields of ``new``'s record, if the state file still records that same run."""
        for _ in range(100):
            try:
                with self._mutex, self.sup.locked(wait_s=1.0):
                    if not self.sup.load():
                        return
                    rec = self.sup.record(new.name)
                    if rec is None or rec.pid != new.pid:
                        return
                    for k, v in fields.items():
                        setattr(rec, k, v)
                    self.sup.save()
                    return
            except Busy:
                if self.stopping.is_set():
                    return

    def _give_up(self, rec, reason: str, tail: str | None = None) -> bool:
        from .supervisor import log_tail

        tail = log_tail(rec.log, 12) if tail is None else tail
        rec.given_up = f"{reason}\n{tail.rstrip()}"
        self.sup.save()
        self.out(f"keeper: leaving {rec.name} stopped: {reason}")
        self.on_event("worker_given_up", name=rec.name, reason=reason)
        return True

    def wait(self, timeout_s: float = 60.0) -> None:
        """Join the readiness waits in flight (tests)."""
        end = time.monotonic() + timeout_s
        for t in list(self._starting.values()):
            t.join(max(0.0, end - time.monotonic()))

    def run(self) -> None:
        """Loop until SIGTERM/SIGINT or until the state file is gone."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        while not self.stopping.is_set():
            self.step()
            self.stopping.wait(self.policy.poll_s)
