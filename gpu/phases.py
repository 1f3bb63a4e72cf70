"""The seconds of each phase of a prover's start (issue 40 item 3: where a ready prover's time
goes): ``with phase("scan"): ...`` anywhere on the load's path, from the process's start
(cluster/pipeline/lifecycle.py) through the key's load (cluster/pipeline/prover.py, the
.params reader gpu/groth16/bellperson.py, the CUDA backend's sections and engines) to ready.

Every phase is logged as it ends, one line each (``start phase NAME: S s (at T s)``, T the
seconds since the process started), and kept in the recorder ``collect`` made current, which
the prover's status carries (``WorkerInfo.start_phases``: `zkhive status`, the metric
``zkhive_start_phase_seconds``). With no recorder current a phase is only logged.

Some phases hold others (their seconds are not to be added to them): "prover (backend)" holds
"CUDA context" and "cubins (NTT, prover)"; "section NAME" holds "page-locked buffers" and, for
a, "waited for the densities"; "tail engines" and "tail engines (beside the reads)" hold
"split MSM modules"; "waited for the matrices" and "waited for the tail engines" are the
load's waits for that thread's two parts. A phase named "... (beside the reads)" ran on a
thread of its own, off the critical path; "ready" is the whole."""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager

log = logging.getLogger("zkhive.start")


def process_started() -> float:
    """The epoch second this process started (its /proc stat start time), else now."""
    try:
        import psutil
        return float(psutil.Process(os.getpid()).create_time())
    except Exception:
        return time.time()


class Phases:
    """Phases in the order they ended: name -> seconds (a name seen twice adds up), and when
    each ended, from ``origin`` (the process's start)."""

    def __init__(self, origin: float | None = None):
        self.origin = process_started() if origin is None else origin
        self.seconds: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float, end: float | None = None) -> None:
        end = time.time() if end is None else end
        with self._lock:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + seconds, 3)
            self.ended[name] = round(end - self.origin, 3)
        log.info("start phase %s: %.2f s (at %.2f s)", name, seconds, end - self.origin)

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return dict(self.seconds)


_current: Phases | None = None


@contextmanager
def collect(rec: Phases):
    """Make ``rec`` the recorder every ``phase`` adds to (one start at a time: the prover's)."""
    global _current
    before, _current = _current, rec
    try:
        yield rec
    finally:
        _current = before


def current() -> Phases | None:
    return _current


@contextmanager
def phase(name: str):
    """Time the block as phase ``name`` (logged; kept by the current recorder, if any), also when
    it raises: a start that fails says how far it got."""
    t = time.time()
    try:
        yield
    finally:
        add(name, time.time() - t)


def add(name: str, seconds: float) -> None:
    """A phase timed elsewhere (a section's fill: gpu/cuda/params.py ``last_fill``)."""
    rec = _current
    if rec is not None:
        rec.add(name, seconds)
    else:
        log.info("start phase %s: %.2f s", name, seconds)
