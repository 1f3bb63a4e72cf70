"""The interface every prover backend implements.

A backend computes a proof's sums (``prove_terms``) and key-generation multiples
(``fixed_base``). Residency has one owner, cluster.pipeline.prover.Prover: it decides which proving keys
stay resident, in what order they are evicted (least recently used first, never one a proof is
using) and evicts *before* a new key goes up. A backend only does what it is told:

    resident_bytes(pk, r1cs)  what ``load`` will hold on the device (asked before loading)
    admit(pk, r1cs)           the same, decided by the device's one admission (the rule a key
                              made in process takes too): DeviceMemoryExhausted, naming the
                              bytes, where the key and one proof can never fit
    held_bytes(digest)        what a resident key's booking holds (a key made in process too)
    capacity()                bytes this backend may fill with resident keys, or None
    load(pk, r1cs)            put one key and its matrices on the device (idempotent);
                              GpuOutOfMemory when the device refuses
    unload(digest)            free one key's device memory now
    release()                 free everything (worker shutdown)
    memory_info()             (free, total) bytes of the device, or None

The defaults are those of a backend that keeps nothing on a device (the CPU backend: the key
lives in host memory, in the Prover's cache).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ProofTerms:
    a: object      # sum z_k a_query[k]               (G1)
    b_g1: object   # sum z_k b_g1_query[k]            (G1)
    b_g2: object   # sum z_k b_g2_query[k]            (G2)
    l: object      # sum z_aux_k l_query[k]           (G1)
    h: object      # sum h_i h_query[i]               (G1)


class Backend:
    name: str = "abstract"

    def prove_terms(self, pk, r1cs, z: np.ndarray, timer) -> ProofTerms:
        """Check z satisfies r1cs (raise UnsatisfiedConstraint), compute H, and the five MSMs."""
        raise NotImplementedError

    def fixed_base(self, base, scalars: np.ndarray) -> list:
        """[s * base for s in scalars] (key generation)."""
        raise NotImplementedError

    # -- residency: what the Prover asks and tells -----------------------------------------------
    def resident_bytes(self, pk, r1cs) -> int | None:
        """Bytes ``load(pk, r1cs)`` will hold; None: nothing on a device (the key file's size,
        in host memory, is what the Prover books)."""
        return None

    def admit(self, pk, r1cs) -> int | None:
        """Bytes ``load(pk, r1cs)`` will hold, by the admission a key made in process takes too;
        raises DeviceMemoryExhausted where the key and one proof can never fit. Nothing is
        booked. None: nothing on a device."""
        return self.resident_bytes(pk, r1cs)

    def held_bytes(self, digest: bytes) -> int | None:
        """Bytes booked for the resident key with this circuit digest; None: not known here."""
        return None

    def capacity(self) -> int | None:
        """Bytes this backend may fill with resident keys; None: no device limit of its own."""
        return None

    def load(self, pk, r1cs) -> None:
        """Make the key and its matrices resident; a second call for the same key is free."""

    def unload(self, digest: bytes) -> None:
        """Free what ``load`` holds for the key with this circuit digest (nothing when absent)."""

    def release(self) -> None:
        """Free everything this backend holds (worker shutdown)."""

    #: whether ``prove_terms`` takes a ``synthesis.assignment.Compact`` itself (a backend that
    #: expands it where it proves, e.g. on the device); otherwise the caller expands it first
    accepts_compact: bool = False

    def stage(self, z, num_vars: int):
        """What ``prove_terms`` will take for assignment z, prepared ahead on any thread while
        the device proves something else (the prove-ahead fetcher calls it); this default
        prepares nothing and returns z. The CUDA backend lays a compact blob's planes out in
        page-locked memory here."""
        return z

    def setup_resident(self, circuit, *, seed: bytes | None = None):
        """Make the circuit's key in this process and hold it resident: (resident, vk), where
        ``resident`` is what ``prove_terms`` and ``gpu.groth16.prover.combine`` take in place of
        a ProvingKey. With ``seed``, the same seed gives the same key (a development ceremony).
        This default: the host setup over the full R1CS, then ``load``; the CUDA backend makes
        the key on the device instead."""
        from gpu.groth16.setup import setup

        r1cs = circuit.r1cs()
        pk, vk = setup(r1cs, backend=self, seed=seed)
        self.load(pk, r1cs)
        return pk, vk

    def memory_info(self) -> tuple[int, int] | None:
        """(free, total) bytes of the device; None for a backend without one."""
        return None
