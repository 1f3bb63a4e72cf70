"""First-use work of the kinds ``[srs] preload`` names, done when a process starts instead of
by the first job of each kind (issue 37: a WinningPoSt's budget is a few seconds, goal 1 s).

Measured on the first winning-post-2k job after ``zkhive up`` (bench/winning_path.py, CPU prover,
2026-12-05), against the warm jobs after it: the gateway's SubmitProof 0.335 s (0.025 warm), the
synthesis 0.488 s (0.077), the aggregation 0.597 s (0.032). What they paid:

- Poseidon's constants (``neptune.constants``: round constants from the Grain LFSR, the MDS
  matrix and its inverse, per arity; 0.10 / 0.15 / 0.31 / 0.32 s for arities 2 / 4 / 8 / 11).
  Every process that parses a PoSt, PoRep or SnapDeals document computes them: the gateway
  (its check verifies the vanilla proofs), the synthesis worker and the aggregate worker (each
  parses the job again). Made before the synthesis worker forks, its children inherit them.
- The aggregate worker's read of the set's verifying key (0.13-0.32 s; ``KeyCache.load_vk``
  keeps it afterwards) and the verifier's imports.

A set the workers make in their own process (``[srs] in_process``) has no .vk until its prover
wrote it: the aggregate worker reads it from a thread once the file is there (``VkWatch``).
"""
from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)

#: the Poseidon arities of Filecoin's trees and hashes (storage-proofs' PoseidonArity U2, U4,
#: U8, U11: binary hashes and top trees, sub trees, base trees, TreeC's columns)
POSEIDON_ARITIES = (2, 4, 8, 11)
#: the families whose documents are checked and synthesised with Poseidon
POSEIDON_FAMILIES = ("synthesis.filecoin", "synthesis.porep")
#: how long the aggregate worker looks for a preloaded set's .vk that is not written yet
VK_WATCH_S = 900.0
VK_POLL_S = 1.0


def _line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def circuits(names) -> list:
    """The circuits of ``names`` (an unknown name is left to the check that names it: the prover's
    preload stops its worker; here it is skipped)."""
    from synthesis.circuits import get_circuit

    out = []
    for name in names:
        try:
            out.append(get_circuit(name))
        except KeyError:
            log.warning("warm-up: %s is not a parameter set here; skipped", name)
    return out


def uses_poseidon(circuit) -> bool:
    return type(circuit).__module__.startswith(POSEIDON_FAMILIES)


def poseidon(names) -> float:
    """Poseidon's constants of every Filecoin arity, made now when a set of ``names`` uses them;
    the seconds spent (0 when none does)."""
    if not any(uses_poseidon(c) for c in circuits(names)):
        return 0.0
    from synthesis.bellpepper import neptune

    t = time.perf_counter()
    for arity in POSEIDON_ARITIES:
        neptune.constants(arity)
    return time.perf_counter() - t


def verifier(keys, names) -> tuple[list[str], list]:
    """The verifier imported and each set's verifying key read into ``keys`` (KeyCache.load_vk
    keeps it): the names read, and the circuits whose .vk is not there yet."""
    import gpu.groth16  # noqa: F401 - the verifier's imports (Proof, verify) made now
    from cluster.errors import KeyMissing

    done, missing = [], []
    for c in circuits(names):
        try:
            keys.load_vk(c)
            done.append(c.name)
        except KeyMissing:
            missing.append(c)
        except Exception as e:  # a bad file: the first job fails naming it; the worker starts
            log.warning("warm-up: the verifying key of %s: %s", c.name, _line(e))
    return done, missing


class VkWatch:
    """Reads each circuit's verifying key once its file exists (a prover making the key in its
    own process writes it after the aggregate worker started), every ``poll_s`` for at most
    ``watch_s``; a key that cannot be read is logged and left to the first job (which fails
    naming it)."""

    def __init__(self, keys, missing: list, *, watch_s: float = VK_WATCH_S, poll_s: float = VK_POLL_S,
                 warmed: list[str] | None = None):
        self.keys, self.missing = keys, list(missing)
        #: where each key read is listed (the registry entry's ``warmed``)
        self.warmed = warmed if warmed is not None else []
        self.watch_s, self.poll_s = watch_s, poll_s
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="zkhive-vk-watch", daemon=True)

    def start(self) -> "VkWatch":
        if self.missing:
            self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        from cluster.errors import KeyMissing

        end = time.monotonic() + self.watch_s
        while self.missing and time.monotonic() < end and not self._stop.wait(self.poll_s):
            for c in list(self.missing):
                try:
                    t = time.perf_counter()
                    self.keys.load_vk(c)
                    self.warmed.append(f"vk:{c.name}")
                    log.info("warm-up: read the verifying key of %s in %.2f s", c.name, time.perf_counter() - t)
                except KeyMissing:
                    continue
                except Exception as e:  # a bad file: the first job fails naming it
                    log.warning("warm-up: the verifying key of %s: %s", c.name, _line(e))
                self.missing.remove(c)


def warm_worker(rt, role: str, names) -> VkWatch | None:
    """A worker's warm-up before it consumes: Poseidon for the synthesis and aggregate roles
    (they parse documents), the verifier and the verifying keys for the aggregate role. Returns
    the aggregate worker's VkWatch (stopped at shutdown), else None."""
    names = list(names)
    if not names or role not in ("synthesis", "aggregate"):
        return None
    warmed = rt.worker.warmed if rt.worker is not None else []
    spent = poseidon(names)
    if spent:
        warmed.append("poseidon")
        log.info("warm-up: Poseidon's constants made in %.2f s", spent)
    if role != "aggregate":
        return None
    t = time.perf_counter()
    done, missing = verifier(rt.keys, names)
    warmed += [f"vk:{name}" for name in done]
    if done:
        log.info("warm-up: verifying keys of %s read in %.2f s", ", ".join(done), time.perf_counter() - t)
    return VkWatch(rt.keys, missing, warmed=warmed).start()
