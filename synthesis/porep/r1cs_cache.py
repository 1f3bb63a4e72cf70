"""The on-disk cache of porep-lite's matrices: ``$ZKHIVE_CACHE_DIR/r1cs/<digest>.npz``, written
atomically, checked on load (shape, dtypes, ``R1CS.validate``)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..r1cs import R1CS, SparseMatrix
from .params import PorepParams


def cache_path(digest: str) -> Path:
    from arith.native import cache_dir
    return cache_dir("r1cs") / f"{digest}.npz"


def save_r1cs(r1cs: R1CS, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"sizes": np.array([r1cs.num_public, r1cs.num_aux], dtype=np.int64)}
    for name, m in (("a", r1cs.a), ("b", r1cs.b), ("c", r1cs.c)):
        arrays.update({f"{name}_indptr": m.indptr, f"{name}_indices": m.indices,
                       f"{name}_coeffs": m.coeffs})
    fd, tmp = tempfile.mkstemp(suffix=".npz.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)  # readers never see a partial file
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_r1cs(path: Path, prm: PorepParams) -> R1CS:
    with np.load(path, allow_pickle=False) as z:
        num_public, num_aux = (int(x) for x in z["sizes"])
        mats = [SparseMatrix(z[f"{n}_indptr"], z[f"{n}_indices"], z[f"{n}_coeffs"]) for n in "abc"]
    if num_public != prm.num_public:
        raise ValueError(f"{path}: cached matrices have {num_public} public inputs, "
                         f"{prm.name} has {prm.num_public}")
    for m in mats:
        if m.indptr.dtype != np.int64 or m.indices.dtype != np.int64 or m.coeffs.dtype != np.uint64:
            raise ValueError(f"{path}: cached matrices have the wrong dtypes")
    r1cs = R1CS(num_public, num_aux, *mats)
    r1cs.validate()
    return r1cs
