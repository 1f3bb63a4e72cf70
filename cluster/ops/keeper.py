"""The keeper: brings a crashed process of ``zkhive up`` back, with backoff, and knows when to stop.

The seeds' operators fought both failures of supervision: a worker that died and stayed dead
(every partition routed to it waited), and a supervisor that brought a daemon back when they
meant to stop it. The keeper is one process that ``zkhive up`` starts last and ``zkhive down``
stops first, so nothing it supervises can come back after ``down``:

- every ``poll_s`` it reads the state file; a recorded process that is gone (its PID and start
  time no longer name a live process) is started again from its service spec, under the state
  directory's lock, after a delay that doubles with each consecutive short-lived run
  (``backoff_s`` .. ``max_backoff_s``); a run that stays up ``stable_s`` resets the count;
- a process that fails its start (or dies young) ``max_failures`` times in a row is left
  stopped, with the reason and its log tail recorded (``zkhive ps`` / ``status`` show them);
  ``zkhive restart NAME`` clears that and tries again;
- each restart is recorded in the state file (``restarts``) and told through ``on_event``
  (the ``cluster`` timeline in Redis: ``zkhive timeline cluster``).

Stopping: SIGTERM ends the loop between steps; a restart in progress is already in the state
file (``Supervisor.replace`` saves before waiting for readiness), so the ``down`` that follows
stops the new process too.
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .supervisor import Busy, ServiceSpec, StartFailure, Supervisor, SupervisorError

#: the keeper's own record name in the state file (never restarted by itself)
KEEPER = "keeper"


@dataclass
class KeeperPolicy:
    poll_s: float = 1.0
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    #: a run that lived this long was healthy: its failure count starts again from zero
    stable_s: float = 60.0
    #: consecutive failed or short-lived runs after which the process is left stopped
    max_failures: int = 5

    def delay(self, failures: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * (2 ** max(0, failures - 1)))


class Keeper:
    """Restarts the gone processes of one state directory. ``specs()`` returns the service
    spec of each restartable name (``zkhive up``'s plan); ``on_event(event, **fields)`` is told
    about restarts and give-ups."""

    def __init__(self, state_dir, specs: Callable[[], dict[str, ServiceSpec]], *,
                 policy: KeeperPolicy | None = None,
                 on_event: Callable[..., None] | None = None, out=print):
        self.sup = Supervisor(state_dir)
        self.specs = specs
        self.policy = policy or KeeperPolicy()
        self.on_event = on_event or (lambda event, **f: None)
        self.out = out
        self._due: dict[str, float] = {}  # name -> when the next start may happen
        self._spec_cache: dict[str, ServiceSpec] | None = None
        self._last_reason: dict[str, str] = {}
        self.stopping = threading.Event()

    def _spec(self, name: str) -> ServiceSpec | None:
        if self._spec_cache is None:
            self._spec_cache = self.specs()
        return self._spec_cache.get(name)

    def step(self, now: float | None = None) -> list[str]:
        """One look at the state file; returns the names restarted (or given up) this step."""
        now = time.time() if now is None else now
        try:
            if not self.sup.load():
                self.stopping.set()  # `down` removed the state file: nothing left to keep
                return []
        except SupervisorError as e:
            self.out(f"keeper: {e}")
            return []
        acted = []
        for rec in list(self.sup.records):
            if rec.name == KEEPER or rec.given_up or self.stopping.is_set():
                continue
            if rec.process() is not None:
                self._due.pop(rec.name, None)
                continue
            died_young = rec.create_time and now - rec.create_time < self.policy.stable_s
            failures = rec.failures + 1 if died_young else 0
            due = self._due.setdefault(rec.name, now + self.policy.delay(max(failures, 1)))
            if now < due:
                continue
            if self._restart(rec.name, failures):
                acted.append(rec.name)
        return acted

    def _restart(self, name: str, failures: int) -> bool:
        spec = self._spec(name)
        if spec is None:
            return False  # not a service of this plan (a record from an older version)
        try:
            with self.sup.locked():
                self.sup.load()
                rec = self.sup.record(name)
                if rec is None or rec.process() is not None or rec.given_up:
                    return False  # `zkhive restart` or `down` got there first
                rec.failures = failures
                if failures >= self.policy.max_failures:
                    last = self._last_reason.get(name)
                    return self._give_up(rec, f"failed {failures} times in a row (failed to start "
                                              f"or died within {self.policy.stable_s:.0f} s)"
                                              + (f"; last: {last}" if last else ""))
                new = self.sup.replace(spec)
                self.out(f"keeper: {name} was gone; started again as pid {new.pid} "
                         f"(restart {new.restarts})")
                try:
                    self.sup.wait_ready(spec, new)
                except StartFailure as e:
                    # counted as a short-lived run by the next step, which also applies the backoff
                    self.sup.stop_one(new, grace_s=5)
                    self._last_reason[name] = e.reason
                    self.out(f"keeper: {name} failed to start: {e.reason}")
                    self.on_event("worker_start_failed", name=name, reason=e.reason,
                                  failures=failures + 1)
                    self._due.pop(name, None)
                    return True
                self._due.pop(name, None)
                self._last_reason.pop(name, None)
                self.on_event("worker_restarted", name=name, pid=new.pid, restarts=new.restarts)
                return True
        except Busy:
            return False  # `up`, `down` or `restart` holds the state: look again next step

    def _give_up(self, rec, reason: str, tail: str | None = None) -> bool:
        from .supervisor import log_tail

        tail = log_tail(rec.log, 12) if tail is None else tail
        rec.given_up = f"{reason}\n{tail.rstrip()}"
        self.sup.save()
        self.out(f"keeper: leaving {rec.name} stopped: {reason}")
        self.on_event("worker_given_up", name=rec.name, reason=reason)
        return True

    def run(self) -> None:
        """Loop until SIGTERM/SIGINT or until the state file is gone."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        while not self.stopping.is_set():
            self.step()
            self.stopping.wait(self.policy.poll_s)
