"""Satisfaction checks for a Synth run in both modes at once (tests, small circuits).

``assignments(s)`` turns the values mode's list (per-variable (B, 4) arrays, BitBlocks,
FeBlocks) and ``s.public`` into one z = (1, public, aux) per batch row; ``check(s, row)`` holds it
against the shape's R1CS and raises ``UnsatisfiedConstraint`` naming the first failing
constraint (index and the gadget's name for it).
"""
from __future__ import annotations

import numpy as np

from .. import field
from ..gadgets.core import BitBlock, FeBlock, Synth


def aux_values(values, batch: int) -> np.ndarray:
    """(B, n_aux, 4) from a Synth's values list."""
    parts = []
    for v in values:
        if isinstance(v, BitBlock):
            out = np.zeros((batch, v.bits.shape[1], 4), dtype=np.uint64)
            out[..., 0] = v.bits
            parts.append(out)
        elif isinstance(v, FeBlock):
            parts.append(v.vals)
        else:
            parts.append(np.asarray(v, dtype=np.uint64)[:, None, :])
    return np.concatenate(parts, axis=1) if parts else np.zeros((batch, 0, 4), np.uint64)


def assignments(s: Synth) -> np.ndarray:
    """(B, 1 + public + aux, 4): z for each batch row."""
    b = s.batch
    pub = getattr(s, "public", [])
    one = np.zeros((b, 1, 4), dtype=np.uint64)
    one[:, 0, 0] = 1
    parts = [one]
    if pub:
        parts.append(np.stack(pub, axis=1))
    parts.append(aux_values(s.values, b))
    return np.concatenate(parts, axis=1)


def check(s: Synth, row: int = 0, z: np.ndarray | None = None) -> None:
    """Raise UnsatisfiedConstraint for the first constraint row ``row``'s z fails."""
    r1cs = s.cs.to_r1cs()
    if z is None:
        z = assignments(s)[row]
    if r1cs.num_variables != len(z):
        raise AssertionError(f"shape has {r1cs.num_variables} variables, values {len(z)}")
    r1cs.check(np.ascontiguousarray(z))


def set_value(z: np.ndarray, index: int, value: int) -> np.ndarray:
    """A copy of z with variable ``index`` set to ``value`` (mod r)."""
    z = z.copy()
    z[index] = field.vec_from_ints([value % field.MODULUS])[0]
    return z
