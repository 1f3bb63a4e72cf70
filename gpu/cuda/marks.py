"""CUDA events between an MSM's stages, kept only under ``ZKHIVE_MSM_PROFILE=1``::

    mark = StageMarks(stream)
    mark("start"); ...; mark("sort"); ...; mark("accumulate")
    profile = mark.times()     # {"sort": ms, "accumulate": ms}; {} when profiling is off

A name that comes back (a stage of every round) sums its times.
"""
from __future__ import annotations

import os

from gpu.cuda import loader


class StageMarks:
    def __init__(self, stream=None):
        self.on = os.environ.get("ZKHIVE_MSM_PROFILE") == "1"
        self.stream = stream
        self._marks: list = []

    def __call__(self, name: str) -> None:
        if self.on:
            ev = loader.driver().Event()
            ev.record(self.stream)
            self._marks.append((name, ev))

    def times(self) -> dict[str, float]:
        """ms from each mark to the next, under the later mark's name (waits for the last)."""
        if not self._marks:
            return {}
        self._marks[-1][1].synchronize()
        out: dict[str, float] = {}
        for (_, a), (name, b) in zip(self._marks, self._marks[1:]):
            out[name] = out.get(name, 0.0) + a.time_till(b)
        return out
