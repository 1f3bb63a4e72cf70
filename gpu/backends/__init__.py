"""Prover backends: what computes the sums of a Groth16 proof over one assignment.

A backend takes (proving key, R1CS, assignment) and returns ``ProofTerms``: the five
multi-scalar multiplications a, b_g1, b_g2, l, h, having checked that the assignment satisfies
the system and computed the QAP quotient H on the way. The prover (gpu.groth16.prover) adds the
randomisers r, s. Backends: ``cpu`` (the host library and arkworks' MSM) and ``cuda`` (issue 8).
"""
from __future__ import annotations

from gpu.groth16.errors import BackendError

from .base import Backend, ProofTerms

_instances: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The process-wide backend called ``name`` ("cpu", "cuda", or "auto": cuda when a GPU and
    PyCUDA are present, else cpu)."""
    if name == "auto":
        name = "cuda" if cuda_available() else "cpu"
    if name not in _instances:
        if name == "cpu":
            from .cpu import CpuBackend
            _instances[name] = CpuBackend()
        elif name == "cuda":
            try:
                from .cuda import CudaBackend  # type: ignore[import-not-found]
            except ImportError as e:
                raise BackendError(f"the cuda backend is not available here: {e}") from None
            _instances[name] = CudaBackend()
        else:
            raise BackendError(f"unknown prover backend {name!r}: use cpu, cuda or auto")
    return _instances[name]


def cuda_available() -> bool:
    try:
        import pycuda.driver as drv  # noqa: F401
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


__all__ = ["Backend", "ProofTerms", "get_backend", "cuda_available"]
