"""Proving keys made in the prover's own process (``[srs] in_process``), for keys too large to be
files: a 2^27 key is 76 GB uncompressed, beside a 64 GB disk and 128 GB of RAM on the H200 host.

A prover whose settings name a parameter set in ``srs.in_process`` never reads that set's
proving key from ``param_cache``. It makes the key itself with the backend's
``setup_resident(circuit, seed=...)`` (the CUDA backend straight into device memory, the CPU
backend in host memory), at start when the set is also in ``srs.preload`` (before the worker
reports ready), else on the first partition that needs it, and keeps it resident like any
other key. What leaves the process is the verifying key (a few hundred bytes), published into
``param_cache`` as ``<params>.<digest16>.vk`` where the aggregate worker and ``zkhive verify``
read it:

- written to a temporary file in the same directory, then hard-linked into place (``os.link``
  fails when the name exists): two provers publishing at once never leave a half-written or
  mixed file, and the first one wins;
- a vk already there is compared byte for byte with this prover's: the same means another
  prover (same seed) published it; a different one is refused (CircuitMismatch: another seed or
  ceremony made it, and proofs from this prover would not verify against it); an unreadable one
  is refused too (KeyFormatError naming the file): a corrupt published key is an operator's to
  remove, never silently replaced.

Every prover with the same ``srs.setup_seed`` makes the same key (``gpu.groth16.setup.
seeded_draw``), so several provers, on several hosts, each holding its own copy, produce proofs
that one published vk checks. That is a development ceremony: whoever knows the seed knows the
trapdoor. A setting that names ``in_process`` sets without a seed is refused at start.

The registry entry of such a prover lists the sets in ``makes_keys``; submission accepts a job
whose key is in the key cache, resident on a live prover, or made by one (cluster.pipeline.workflow).
"""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from cluster.errors import SettingsError

log = logging.getLogger(__name__)


class InProcessKeys:
    """Which keys this prover makes itself, and how (the seed, where the vk goes)."""

    def __init__(self, srs, keys):
        self.names = list(dict.fromkeys(srs.in_process))
        self.keys = keys
        self.seed = srs.seed() if self.names else None
        if self.names and self.seed is None:
            raise SettingsError(f"srs.in_process names {', '.join(self.names)} but neither "
                                "srs.setup_seed nor srs.setup_seed_file is set: in-process keys "
                                "come from a development ceremony's seed")

    def makes(self, circuit) -> bool:
        return circuit.name in self.names

    def fitting(self, backend, preload=()) -> list[str]:
        """The sets this prover can make on its device: those whose key and one proof fit the
        device's ledger budget (gpu.budget.admit_shape on the circuit's counts, nothing
        allocated). A set that never fits is dropped with a warning, so the registry does not
        announce a key this prover cannot hold (a preloaded one fails the start instead, with the
        ledger's breakdown)."""
        from gpu.budget import DeviceMemoryExhausted, admit_shape
        from synthesis.circuits import get_circuit

        from .devshare import key_shape

        budget = getattr(backend, "budget", None)
        out = []
        for name in self.names:
            shape = key_shape(get_circuit(name)) if budget is not None else None
            if shape is not None:
                try:
                    admit_shape(budget, shape, f"the in-process key of {name}")
                except DeviceMemoryExhausted as e:
                    if name in preload:
                        raise
                    log.warning("not announcing %s: %s", name, e)
                    continue
            out.append(name)
        return out

    def make(self, backend, circuit):
        """(resident, vk): the key made and held by ``backend``, its vk published."""
        import time

        t0 = time.time()
        resident, vk = backend.setup_resident(circuit, seed=self.seed)
        log.info("made the key of %s in process in %.1f s", circuit.name, time.time() - t0)
        try:
            publish_vk(self.keys, circuit, vk)
        except BaseException:
            backend.unload(vk.circuit_digest)
            raise
        return resident, vk


def publish_vk(keys, circuit, vk) -> Path:
    """Put ``vk`` at the key cache's vk path, atomically and first writer wins; an existing file
    must be this very key (else CircuitMismatch or KeyFormatError naming the file)."""
    path = keys.path(circuit, "vk")
    data = vk.to_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # fails if another prover got there first: compare below
                log.info("published the verifying key of %s at %s", circuit.name, path)
                return path
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    check_published(path, circuit, vk, data)
    return path


def check_published(path: Path, circuit, vk, data: bytes) -> None:
    from gpu.groth16 import VerifyingKey
    from gpu.groth16.errors import CircuitMismatch, KeyFormatError

    existing = path.read_bytes()
    if existing == data:
        return
    try:
        other = VerifyingKey.from_bytes(existing)
    except (KeyFormatError, ValueError) as e:
        raise KeyFormatError(f"the published verifying key {path} of {circuit.name} is unreadable "
                             f"({e}); remove it and the next prover that makes the key publishes "
                             "it again") from None
    why = ("it was made for another circuit" if other.circuit_digest != vk.circuit_digest
           else "another setup seed or ceremony made it")
    raise CircuitMismatch(f"the published verifying key {path} of {circuit.name} is not the one this "
                          f"prover makes ({why}): proofs from this prover would not verify against "
                          "it; give every prover the same srs.setup_seed, or remove the file")

