"""A sector directory: ``sector.json`` (family, parameter set, seed, replica id, commitments) and
``sector.npz`` (the family's arrays; numpy, no pickle), written atomically and read back with a
one-line ``SectorError`` for anything missing, malformed or inconsistent."""
from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .. import field, limits
from .synthetic import C1_VERSION


class SectorError(ValueError):
    """A sector directory is missing, from another parameter set, or inconsistent."""


def hexfe(x: int) -> str:
    return f"0x{x:064x}"


def vec_hex(v: np.ndarray) -> list[str]:
    """An Fr vector (any shape ending in 4 limbs) as a flat list of hex strings."""
    return [hexfe(x) for x in field.vec_to_ints(np.asarray(v).reshape(-1, 4))]


def c1_document(sector, seed: bytes, circuit: str, challenges, parents, d_path, rc_path) -> dict:
    """The C1 input of a synthetic family's proof job (porep-lite's schema: family/c1.py):
    per partition k the openings of ``challenges(prm, seed, replica_id, k)``, each with its data
    leaf, TreeD path, column, TreeC and TreeR paths and its ``parents(prm, nodes)`` columns;
    ``d_path(v)``, ``rc_path(tree, v)``: the family's Merkle paths of leaf v in TreeD and in
    TreeC / TreeR (levels of sibling arrays)."""
    prm = sector.prm

    def column(v: int) -> list[str]:
        return vec_hex(sector.labels[:, v])

    def paths(tree, v: int) -> list[list[str]]:
        return [vec_hex(lv) for lv in rc_path(tree, v)]

    partitions = []
    for k in range(prm.partitions):
        chals = []
        for v in challenges(prm, seed, sector.replica_id, k):
            pars = parents(prm, np.array([v]))[0].tolist()
            chals.append({
                "node": v,
                "data_leaf": vec_hex(sector.data[v])[0],
                "tree_d_path": vec_hex(d_path(v)),
                "column": column(v),
                "tree_c_path": paths(sector.tree_c, v),
                "tree_r_path": paths(sector.tree_r, v),
                "parents": [{"node": p, "column": column(p), "tree_c_path": paths(sector.tree_c, p)}
                            for p in pars],
            })
        partitions.append({"challenges": chals})
    return {"version": C1_VERSION, "circuit": circuit, "params": prm.name,
            "seed": "0x" + seed.hex(), "replica_id": hexfe(sector.replica_id),
            "comm_d": hexfe(sector.comm_d), "comm_r": hexfe(sector.comm_r),
            "comm_c": hexfe(sector.comm_c), "comm_r_last": hexfe(sector.comm_r_last),
            "partitions": partitions}


def save(directory: str | Path, arrays: Mapping[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write ``sector.npz`` (atomically: a reader never sees half a file) and ``sector.json``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, d / "sector.npz")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    (d / "sector.json").write_text(json.dumps(meta, indent=2) + "\n")
    return d


def read_meta(directory: str | Path, sets: Mapping[str, Any]) -> tuple[dict, Any, bytes, int]:
    """(meta, parameter set, seed, replica id) from ``sector.json``, bounded by synthesis.limits."""
    d = Path(directory)
    try:
        meta = limits.read(d / "sector.json")  # bounded: one line for any bad file
        prm = sets[meta["params"]]
        seed = bytes.fromhex(meta["seed"][2:])
        replica_id = int(meta["replica_id"], 16)
    except FileNotFoundError as e:
        raise SectorError(f"{d}: not a sector directory ({e.filename} is missing)") from None
    except (KeyError, ValueError, TypeError) as e:
        raise SectorError(f"{d / 'sector.json'}: malformed ({e!r})") from None
    return meta, prm, seed, replica_id


def read_arrays(directory: str | Path, names) -> dict[str, np.ndarray]:
    """The named arrays of ``sector.npz``."""
    path = Path(directory) / "sector.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            return {n: z[n] for n in names}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise SectorError(f"{path}: unreadable or incomplete ({e})") from None


def check_commitment(directory: str | Path, meta: dict, comm_r: int) -> None:
    """The arrays read back must give the comm_r that sector.json recorded."""
    if hexfe(comm_r) != meta.get("comm_r"):
        raise SectorError(f"{directory}: sector.npz does not match comm_r in sector.json")


def family_of(directory: str | Path, default: str) -> str:
    """The family a sector directory says it belongs to (``default`` when it names none or cannot
    be read: the family's own ``Sector.load`` then reports what is wrong)."""
    try:
        meta = limits.read(Path(directory) / "sector.json")
        return meta.get("family", default) if isinstance(meta, dict) else default
    except (OSError, ValueError):
        return default
