"""GetStatus's answer, made by one thread of its own and read by every caller.

Issue 39: under 1,000 submissions at once, GetStatus took up to 275 ms (p90 59 ms) although it
runs on threads of its own (server.Lanes): each call read the registry, listed the key cache and
scanned every job's state in Redis, in the one interpreter the submissions share, so each took
its turn many times over. Now one refresher thread makes the answer every ``every_s`` while
someone asks (GetStatus, or a submission's ``queue_position``), and a call returns the latest one:
a copy of a message already built, at most ``every_s`` plus one refresh old.

A snapshot older than ``stale_s`` is not served: the caller then makes the answer itself, as
before, so a gateway whose Redis or refresher is stuck still fails the keeper's liveness probe
(cluster.ops.readiness.gateway_check) instead of answering from memory. The refresher stops
after ``idle_s`` without a caller (no Redis traffic for a gateway nobody watches); the next call
starts it again and waits for its first snapshot.
"""
from __future__ import annotations

import bisect
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)

#: seconds between two snapshots while someone asks
EVERY_S = 0.25
#: a snapshot older than this is not served (the refresher is stuck): the caller computes
STALE_S = 5.0
#: the refresher stops after this long without a caller
IDLE_S = 30.0


@dataclass(frozen=True)
class Snapshot:
    #: when it was made (time.monotonic)
    at: float
    #: the GetStatus response
    response: Any
    #: (priority, submitted_at) of every queued job, sorted: the order they are served in
    queued: list[tuple[int, float]] = field(default_factory=list)

    def served_before(self, priority: int, submitted_at: float) -> int:
        """Queued jobs served before one of ``priority`` submitted at ``submitted_at``."""
        return bisect.bisect_left(self.queued, (priority, submitted_at))


class StatusBoard:
    """``make() -> Snapshot`` run by a thread of its own; ``latest()`` for the callers."""

    def __init__(self, make: Callable[[], Snapshot], *, every_s: float = EVERY_S,
                 stale_s: float = STALE_S, idle_s: float = IDLE_S):
        self._make, self.every_s, self.stale_s, self.idle_s = make, every_s, stale_s, idle_s
        self._lock = threading.Lock()
        self._fresh = threading.Condition(self._lock)
        self._snap: Snapshot | None = None
        self._asked = 0.0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        #: snapshots made, and callers that made their own (a stuck or failing refresher)
        self.made = self.computed_by_caller = 0

    def latest(self) -> Snapshot:
        now = time.monotonic()
        with self._lock:
            self._asked = now
            if self._thread is None or not self._thread.is_alive():
                self._snap, self._error = None, None  # a stopped refresher's snapshot is old
                self._thread = threading.Thread(target=self._run, name="gateway-status", daemon=True)
                self._thread.start()
            if self._snap is None and self._error is None:
                self._fresh.wait_for(lambda: self._snap is not None or self._error is not None, self.stale_s)
            snap = self._snap
        if snap is not None and time.monotonic() - snap.at <= self.stale_s:
            return snap
        # none yet, stale or failing: made here, so the caller sees the error or the hang itself
        self.computed_by_caller += 1
        return self._make()

    def close(self) -> None:
        """Stop the refresher at its next turn (the server stops)."""
        with self._lock:
            self._asked = float("-inf")

    def _run(self) -> None:
        while True:
            with self._lock:
                if time.monotonic() - self._asked > self.idle_s:
                    self._thread = None
                    return
            t0 = time.monotonic()
            try:
                snap, error = self._make(), None
            except Exception as e:  # noqa: BLE001 - the callers make their own and see it
                snap, error = None, e
                log.warning("gateway status not refreshed: %s", str(e).splitlines()[0] if str(e) else type(e).__name__)
            with self._lock:
                if snap is not None:
                    self._snap = snap
                    self.made += 1
                self._error = error
                self._fresh.notify_all()
            time.sleep(max(0.0, self.every_s - (time.monotonic() - t0)))
