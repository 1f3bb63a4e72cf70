"""The Groth16 prover (Groth 2016, section 3.2), over a backend that does the heavy part.

With r, s fresh per proof and the backend's sums over the assignment z
(a_acc = sum z_k a_query[k], likewise b_g1_acc, b_g2_acc, l_acc over the auxiliary variables,
and h_acc = sum h_i h_query[i] for the QAP quotient H):
  A = alpha + a_acc + r delta                    (G1)
  B = beta + b_g2_acc + s delta                  (G2; the same in G1 for C)
  C = l_acc + h_acc + s A + r B_g1 - r s delta   (G1)
"""
from __future__ import annotations

import numpy as np

from synthesis import field
from synthesis.r1cs import R1CS

from gpu.timing import NULL_TIMER, StageTimer

from . import curve
from .errors import CircuitMismatch
from .keys import ProvingKey
from .proof import Proof


def _nonzero_random() -> int:
    while True:
        x = field.random_element()
        if x:
            return x


def check_key_matches(pk: ProvingKey, r1cs: R1CS) -> None:
    if pk.circuit_digest != r1cs.digest():
        raise CircuitMismatch("the proving key was made for another circuit (circuit digests "
                              f"{pk.circuit_digest.hex()[:16]} and {r1cs.digest().hex()[:16]} differ)")


def prove(pk: ProvingKey, r1cs: R1CS, assignment: np.ndarray, backend="cpu", *,
          r: int | None = None, s: int | None = None, timer: StageTimer | None = None) -> Proof:
    """A proof that ``assignment`` (z = 1, public inputs, aux) satisfies ``r1cs``.
    ``r1cs`` may be a compact circuit and ``assignment`` a Compact or its blob
    (gpu/backends/forms.py).

    Raises synthesis.r1cs.UnsatisfiedConstraint naming the first failing constraint when it does
    not. ``r`` and ``s`` default to fresh randomness; pass them only in tests that compare
    backends. ``backend`` is a name ("cpu", "cuda") or a backend object.
    """
    from gpu.backends import get_backend

    from gpu.backends.forms import is_compact_assignment

    timer = timer or NULL_TIMER
    if isinstance(r1cs, R1CS) and not is_compact_assignment(assignment):
        check_key_matches(pk, r1cs)
        z = r1cs.check_assignment_shape(assignment)
    else:  # a compact circuit or assignment: the backend checks the digest and the shape
        z = assignment
    be = get_backend(backend) if isinstance(backend, str) else backend
    terms = be.prove_terms(pk, r1cs, z, timer)
    return combine(pk, terms, r=r, s=s, timer=timer)


def combine(pk: ProvingKey, terms, *, r: int | None = None, s: int | None = None,
            timer: StageTimer | None = None) -> Proof:
    """A, B, C from a backend's sums with fresh r, s (host work: a few point operations; a
    pipelined prover runs it while the device proves the next partition)."""
    timer = timer or NULL_TIMER
    r = _nonzero_random() if r is None else r % field.MODULUS
    s = _nonzero_random() if s is None else s % field.MODULUS
    with timer.stage("combine"):
        sr, ss = curve.scalar(r), curve.scalar(s)
        a = pk.vk.alpha_g1 + terms.a + pk.delta_g1 * sr
        b = pk.vk.beta_g2 + terms.b_g2 + pk.vk.delta_g2 * ss
        b1 = pk.beta_g1 + terms.b_g1 + pk.delta_g1 * ss
        c = terms.l + terms.h + a * ss + b1 * sr - pk.delta_g1 * curve.scalar(r * s % field.MODULUS)
    return Proof(a, b, c)
