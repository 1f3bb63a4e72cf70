"""Per-stage timing for one proof: ``with timer.stage("msm_h"): ...``.

The prover records each stage's wall-clock start and end (host clock; the CUDA backend adds device
event times for its kernels). The cluster turns the records into timeline events of the partition,
so `zkhive timeline` shows where prove time goes. Set ZKHIVE_STAGE_LOG=1 to also print each stage.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager


class StageTimer:
    def __init__(self, **context):
        self.context = context  # job, partition, device ... carried into every record
        self.records: list[dict] = []
        self._echo = os.environ.get("ZKHIVE_STAGE_LOG") == "1"

    @contextmanager
    def stage(self, name: str, **extra):
        start = time.time()
        try:
            yield
        finally:
            end = time.time()
            rec = {"stage": name, "start": start, "end": end, "seconds": end - start, **extra}
            self.records.append(rec)
            if self._echo:
                print(f"[zkhive] {name}: {end - start:.4f} s {self.context}", file=sys.stderr)

    def add(self, name: str, start: float, end: float, **extra) -> None:
        self.records.append({"stage": name, "start": start, "end": end, "seconds": end - start, **extra})

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.records:
            out[r["stage"]] = out.get(r["stage"], 0.0) + r["seconds"]
        return out


class _NullTimer(StageTimer):
    """Records nothing: one instance is shared by every proof without a timer, so a record
    kept here (the CUDA backend's ``add`` of device stages) would grow without end."""

    @contextmanager
    def stage(self, name: str, **extra):
        yield

    def add(self, name: str, start: float, end: float, **extra) -> None:
        pass


NULL_TIMER = _NullTimer()
