"""How it is proved fast: Groth16 keys, the prover over a backend interface (cpu, cuda), the
verifier, CUDA kernels and their drivers, and the host build of the same field code."""


def __getattr__(name):
    # lazy, so `import gpu.native` (used by synthesis) does not pull in the curve library
    if name in ("setup", "prove", "verify"):
        from . import groth16
        return getattr(groth16, name)
    raise AttributeError(f"module 'gpu' has no attribute {name!r}")


__all__ = ["setup", "prove", "verify"]
