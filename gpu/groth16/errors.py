"""Errors of the Groth16 engine.

    Groth16Error
    ├── KeyFormatError      a key file is corrupt, truncated, of another version or circuit
    ├── ProofFormatError    192 proof bytes that do not decode to valid curve points
    ├── CircuitMismatch     a key used with the wrong circuit, or a wrong number of inputs
    └── BackendError        a prover backend is unknown or unavailable on this machine
"""


class Groth16Error(Exception):
    pass


class KeyFormatError(Groth16Error, ValueError):
    pass


class ProofFormatError(Groth16Error, ValueError):
    pass


class CircuitMismatch(Groth16Error, ValueError):
    pass


class BackendError(Groth16Error, RuntimeError):
    pass
