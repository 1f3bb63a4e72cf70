"""A process's resident memory at its peak while something runs, sampled every 5 ms (the memory
benchmarks: what one request costs the process that takes it)."""
from __future__ import annotations

import threading
import time


class PeakRss:
    """``with PeakRss(proc) as m: ...``; ``m.idle`` before, ``m.peak`` the largest seen (bytes)."""

    def __init__(self, proc, every_s: float = 0.005):
        self.proc, self.every_s = proc, every_s
        self.idle = self.peak = proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.every_s)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
