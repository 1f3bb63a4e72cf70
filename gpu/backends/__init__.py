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
    """The process-wide backend called ``name``: "cpu", "cuda" (device 0), "cuda:N", or "auto"
    (cuda:0 when a GPU and PyCUDA are present, else cpu). A CUDA backend opens its device's
    context on the calling thread: call this in the worker process, never at import."""
    if name == "auto":
        name = "cuda:0" if cuda_available() else "cpu"
    kind, _, index = name.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise BackendError(f"unknown prover backend {name!r}: use cpu, cuda, cuda:N or auto")
    key = "cpu" if kind == "cpu" else f"cuda:{int(index or 0)}"
    if key not in _instances:
        if kind == "cpu":
            from .cpu import CpuBackend
            _instances[key] = CpuBackend()
        else:
            from gpu.errors import GpuError
            try:
                from .cuda import CudaBackend
                _instances[key] = CudaBackend(int(index or 0))
            except (ImportError, GpuError) as e:
                raise BackendError(f"the cuda backend is not available here: {e}") from None
    return _instances[key]


def cuda_available() -> bool:
    try:
        import pycuda.driver as drv  # noqa: F401
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


__all__ = ["Backend", "ProofTerms", "get_backend", "cuda_available"]
