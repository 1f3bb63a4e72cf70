"""How it is proved fast: Groth16 keys, the prover over a backend interface (cpu, cuda), the
verifier, CUDA kernels and their drivers, and host builds of the curve code for CPU tests.

Dependency rule: ``gpu`` imports ``synthesis`` (circuits, matrices) and ``arith`` (the shared
field arithmetic), never ``cluster``."""


def __getattr__(name):
    # lazy, so importing a gpu submodule does not pull in the curve library
    if name in ("setup", "prove", "verify"):
        from . import groth16
        return getattr(groth16, name)
    raise AttributeError(f"module 'gpu' has no attribute {name!r}")


__all__ = ["setup", "prove", "verify"]
