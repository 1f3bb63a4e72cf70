"""Groth16 over BLS12-381 (Groth 2016, "On the Size of Pairing-based Non-interactive Arguments"),
as arkworks' ark-groth16 and bellperson implement it."""
from .errors import BackendError, CircuitMismatch, Groth16Error, KeyFormatError, ProofFormatError
from .keys import ProvingKey, VerifyingKey, read_header
from .proof import PROOF_BYTES, Proof, split_proofs
from .prover import prove
from .setup import setup
from .verifier import verify

__all__ = ["setup", "prove", "verify", "Proof", "ProvingKey", "VerifyingKey", "PROOF_BYTES",
           "split_proofs", "read_header", "Groth16Error", "KeyFormatError", "ProofFormatError",
           "CircuitMismatch", "BackendError"]
