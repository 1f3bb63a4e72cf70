"""The interface every prover backend implements."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class ProofTerms:
    a: object      # sum z_k a_query[k]               (G1)
    b_g1: object   # sum z_k b_g1_query[k]            (G1)
    b_g2: object   # sum z_k b_g2_query[k]            (G2)
    l: object      # sum z_aux_k l_query[k]           (G1)
    h: object      # sum h_i h_query[i]               (G1)


class Backend(Protocol):
    name: str

    def prove_terms(self, pk, r1cs, z: np.ndarray, timer) -> ProofTerms:
        """Check z satisfies r1cs (raise UnsatisfiedConstraint), compute H, and the five MSMs."""

    def fixed_base(self, base, scalars: np.ndarray) -> list:
        """[s * base for s in scalars] (key generation)."""
