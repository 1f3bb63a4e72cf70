"""Groth16 over BLS12-381 (Groth 2016, "On the Size of Pairing-based Non-interactive Arguments"),
as arkworks' ark-groth16 and bellperson implement it."""
from .errors import BackendError, CircuitMismatch, Groth16Error, KeyFormatError, ProofFormatError
from .keys import ProvingKey, VerifyingKey, read_header
from .proof import PROOF_BYTES, Proof, split_proofs
from .prover import prove
from .setup import setup as _setup
from .verifier import verify

__all__ = ["setup", "prove", "verify", "Proof", "ProvingKey", "VerifyingKey", "PROOF_BYTES",
           "split_proofs", "read_header", "Groth16Error", "KeyFormatError", "ProofFormatError",
           "CircuitMismatch", "BackendError"]


def setup(r1cs, *, backend="cpu", seed: bytes | None = None):
    """Fresh (pk, vk) for ``r1cs`` (gpu/groth16/setup.py). ``backend``: a name ("cpu", "cuda",
    "cuda:N", "auto") or a Backend; its batched fixed-base multiplication makes the queries.
    Names are resolved here, above the backends, because the backends call the setup too."""
    if isinstance(backend, str) and backend != "cpu":
        from gpu.backends import get_backend
        backend = get_backend(backend)
    return _setup(r1cs, backend=backend, seed=seed)
