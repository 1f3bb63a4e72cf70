"""Satisfaction checks for a Synth run in both modes at once (tests, small circuits).

``assignments(s)`` turns the values mode's list (per-variable (B, 4) arrays, BitBlocks,
FeBlocks) and ``s.public`` into one z = (1, public, aux) per batch row; ``check(s, row)`` holds it
against the shape's R1CS and raises ``UnsatisfiedConstraint`` naming the first failing
constraint (index and the gadget's name for it).
"""
from __future__ import annotations

import numpy as np

from .. import field
from .core import BitBlock, FeBlock, Synth


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


def analyse(cs) -> tuple[list[int], set[int]]:
    """Soundness by analysis (issue 26): (the auxiliary variables no constraint mentions, as
    z indices; the variables with a booleanity row (ONE - x) * x = 0 or the conditional form
    (ONE - m - x) * x = 0), over a shape ConstraintSystem's rows."""
    npub = cs.num_public
    used = set()
    boolean = set()
    for a, b, c in cs._rows:
        used.update(a)
        used.update(b)
        used.update(c)
        if not c and len(b) == 1:
            (x, cb), = b.items()
            if cb == 1 and a.get(x) == field.MODULUS - 1 and a.get(0) == 1 and len(a) <= 3:
                boolean.add(cs._index(x))
    unused = [npub + 1 + j for j in range(cs.num_aux) if -(j + 1) not in used]
    return unused, boolean


def set_value(z: np.ndarray, index: int, value: int) -> np.ndarray:
    """A copy of z with variable ``index`` set to ``value`` (mod r)."""
    z = z.copy()
    z[index] = field.vec_from_ints([value % field.MODULUS])[0]
    return z
