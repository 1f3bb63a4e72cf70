"""What a backend may be handed for a circuit and an assignment, and how each backend takes it.

A circuit: an ``R1CS`` (full CSR), an object whose ``a``, ``b``, ``c`` are compact matrices
(``synthesis.compact.CompactR1CS``: ``Replicated`` header + block + column map), or a circuit
object offering ``compact_r1cs()`` and/or ``r1cs()``. Duck-typed: gpu never imports the cluster,
and the CUDA backend prefers the compact form (filecoin-32g's full R1CS is ~32 GB; compact ~0.5 GB).
An assignment: an (n, 4) uint64 Fr vector, a ``synthesis.assignment.Compact``, or its encoded
blob (``bytes``, "ZKA1"), or a blob staged ahead for the CUDA backend (``is_staged_assignment``:
gpu.cuda.compact.StagedAssignment, its ``blob`` beside the planes laid out in page-locked memory).
"""
from __future__ import annotations

import numpy as np

from gpu.native.compact import compact_of


def full_r1cs(obj):
    """The full R1CS of ``obj`` (expanded from the compact form once per object)."""
    from synthesis.r1cs import R1CS
    if isinstance(obj, R1CS):
        return obj
    if hasattr(obj, "r1cs"):
        return obj.r1cs()
    if hasattr(obj, "to_r1cs"):
        full = obj.__dict__.get("_full_r1cs")
        if full is None:
            full = obj.__dict__["_full_r1cs"] = obj.to_r1cs()
        return full
    raise TypeError(f"{type(obj).__name__} is not a circuit: no R1CS or compact matrices")


def circuit_digest(obj) -> bytes:
    """The digest a key for ``obj`` carries (the compact form's where there is one: the full
    R1CS expanded from it carries the same, synthesis/compact.py)."""
    cr = compact_of(obj)
    return cr.digest() if cr is not None else full_r1cs(obj).digest()


def is_compact_assignment(z) -> bool:
    return isinstance(z, (bytes, bytearray, memoryview)) or (hasattr(z, "kinds") and hasattr(z, "fes")) \
        or getattr(z, "is_staged_assignment", False)


def assignment_blob(z) -> bytes:
    """The encoded blob of a Compact, a staged blob or a blob (bytes)."""
    from synthesis import assignment
    if getattr(z, "is_staged_assignment", False):
        return z.blob
    if isinstance(z, (bytes, bytearray, memoryview)):
        return bytes(z)
    return assignment.encode(z)


def assignment_vector(z, num_vars: int) -> np.ndarray:
    """The (num_vars, 4) vector of any assignment form (host decode: the CPU backend)."""
    from synthesis import assignment
    if getattr(z, "is_staged_assignment", False):
        z = z.blob
    if isinstance(z, (bytes, bytearray, memoryview)):
        return assignment.decode(bytes(z), n=num_vars)
    if hasattr(z, "kinds") and hasattr(z, "fes"):
        if len(z.kinds) != num_vars:
            raise assignment.AssignmentError(f"assignment has {len(z.kinds)} values, the circuit "
                                             f"has {num_vars} variables")
        return z.to_vec()
    return z
