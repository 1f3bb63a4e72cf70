"""Poseidon Merkle trees over Fr vectors (built batched through the host library)."""
from __future__ import annotations

import numpy as np

from ..bellpepper.neptune import hash_native


def build(leaves: np.ndarray, arity: int) -> list[np.ndarray]:
    """All levels, leaves first, root last (shape (1, 4)); len(leaves) a power of arity."""
    levels = [np.ascontiguousarray(leaves, dtype=np.uint64)]
    while len(levels[-1]) > 1:
        cur = levels[-1]
        if len(cur) % arity:
            raise ValueError(f"level of {len(cur)} nodes is not a multiple of arity {arity}")
        levels.append(hash_native(cur.reshape(-1, arity, 4)))
    return levels


def path(levels: list[np.ndarray], index: int, arity: int) -> np.ndarray:
    """(depth, arity - 1, 4): per level the siblings of the node on index's path, in order."""
    out = []
    for level in levels[:-1]:
        group, pos = divmod(index, arity)
        block = level[group * arity:(group + 1) * arity]
        out.append(np.delete(block, pos, axis=0))
        index = group
    return np.stack(out) if out else np.zeros((0, arity - 1, 4), dtype=np.uint64)
