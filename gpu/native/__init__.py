"""Host builds of the curve code (curve_host.cpp, setup_host.cpp) for CPU tests and setup.

``for_prover()`` builds and loads the two a CUDA proof itself calls, so that no proof waits on
g++: compact_host.cpp (the assignment's bit planes, read by the upload) and curve_host.cpp (the
MSMs' window sums combined on the host). Each is otherwise built on its first use, and on a
fresh machine that use is the first proof after ``zkhive up``: on an H100 (2026-12-07, a
filecoin-512m partition of ~0.2 s warm) it took 17.2 s, 7.5 s of them in its upload and 9.6 s in
its H MSM, both g++.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor


def _compact() -> None:
    from . import compact
    compact.lib()


def _curve() -> None:
    from . import curve
    curve.lib()


#: the host libraries a CUDA proof calls, by the source they build from
PROVER_LIBRARIES = {"compact_host.cpp": _compact, "curve_host.cpp": _curve}


def for_prover() -> dict[str, float]:
    """Build (where the cache lacks them) and load every library of PROVER_LIBRARIES, at once
    (g++ runs as a process each); the seconds each took. A build that fails raises
    arith.native.NativeBuildError with the compiler's output (no g++: it says what to install)."""
    def timed(load):
        t = time.perf_counter()
        load()
        return time.perf_counter() - t
    with ThreadPoolExecutor(len(PROVER_LIBRARIES)) as pool:
        futures = {name: pool.submit(timed, load) for name, load in PROVER_LIBRARIES.items()}
        return {name: f.result() for name, f in futures.items()}
