"""The parts of a family's ``synthesis.circuits.Circuit`` that do not depend on its gadgets.

``FamilyCircuit`` holds one parameter set (``prm``, with ``name``, ``partitions``, ``digest()``)
and gives: the partition lookup with its one-line error, the on-disk cache of a built form of the
matrices (load, else build and save: a half-copied file is rebuilt), and the report of a
partition's vanilla checks (the first failing challenge, named with its field).
"""
from __future__ import annotations

import os
import threading
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import numpy as np

from ..circuits import C1Error
from ..compact import CompactR1CS

T = TypeVar("T")

#: what a cached matrix file may raise when it is missing, stale or half-written
CACHE_ERRORS = (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile)


def vec_from_hex(hexes: list[str], shape: tuple[int, ...]) -> np.ndarray:
    """Hex strings (validated by the C1 model) as an Fr array, without a Python int each."""
    raw = bytes.fromhex("".join(x[2:].zfill(64) for x in hexes))
    be = np.frombuffer(raw, dtype=">u8").reshape(-1, 4)[:, ::-1]  # big-endian limbs, reversed
    return np.ascontiguousarray(be, dtype=np.uint64).reshape(*shape, 4)


def cached(load: Callable[[], T], build: Callable[[], T], save: Callable[[T], None]) -> T:
    """``load()``, or when the cache is missing or unreadable ``build()`` then ``save`` it."""
    try:
        return load()
    except CACHE_ERRORS:
        value = build()
        save(value)
        return value


class FamilyCircuit:
    """Shared plumbing of a family's Circuit: ``prm`` is its parameter set, ``document`` the
    family's parsed C1 model class (the type ``parse_c1`` returns)."""

    family = "?"
    document: type = object

    def __init__(self, prm):
        self.prm = prm
        self.name = prm.name
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def digest(self) -> str:
        return self.prm.digest()

    def num_partitions(self) -> int:
        return self.prm.partitions

    def _partition(self, c1, k: int):
        """Partition ``k``'s proofs of a parsed C1 document; C1Error for an index out of range."""
        if not isinstance(c1, self.document):
            raise TypeError("pass the result of parse_c1")
        if not 0 <= k < self.prm.partitions:
            raise C1Error(f"partition index {k} is outside 0..{self.prm.partitions - 1}", partition=k)
        return c1.partitions[k]


def cache_dir() -> Path:
    """$ZKHIVE_CACHE_DIR (default ~/.cache/zkhive): where the compact matrices are cached."""
    return Path(os.environ.get("ZKHIVE_CACHE_DIR", Path.home() / ".cache" / "zkhive"))


class CompactMatrices:
    """What a circuit whose matrices are kept compact answers alike (filecoin): its compact
    matrices, built once per parameter set by ``build_compact()`` (the circuit's hook) and cached
    in ``matrices_path()`` (``$ZKHIVE_CACHE_DIR/r1cs/<matrices_prefix>-<digest>.npz``; a missing
    or half-written file is built again); whether they are built (in memory, or in that file);
    and the full matrices, expanded once from ``compact_r1cs()`` (~40 bytes a nonzero). Its
    ``__init__`` sets ``_lock``, ``_compact`` and ``_r1cs``."""

    #: the cache file's name before ``-<digest>.npz``
    matrices_prefix = "?"

    def build_compact(self) -> CompactR1CS:
        raise NotImplementedError

    def matrices_path(self) -> Path:
        return cache_dir() / "r1cs" / f"{self.matrices_prefix}-{self.digest()}.npz"

    def compact_r1cs(self) -> CompactR1CS:
        with self._lock:
            if self._compact is None:
                path = self.matrices_path()
                self._compact = cached(lambda: CompactR1CS.load(path), self.build_compact,
                                       lambda cr: cr.save(path))
            return self._compact

    def is_built(self) -> bool:
        return self._compact is not None or self.matrices_path().exists()

    def r1cs(self):
        cr = self.compact_r1cs()
        with self._lock:
            if self._r1cs is None:
                self._r1cs = cr.to_r1cs()
            return self._r1cs


class SyntheticCircuit(FamilyCircuit):
    """The synthetic families' C1 layout (porep-lite): public inputs (replica_id,
    comm_d, comm_r, then per challenge v and its parents), challenges drawn from the seed and
    parents from the family's graph module (``graph``: ``challenge``, ``parents``)."""

    graph: Any = None

    def public_inputs(self, c1, partition: int) -> list[int]:
        part = self._partition(c1, partition)
        out = [int(c1.replica_id, 16), int(c1.comm_d, 16), int(c1.comm_r, 16)]
        for ch in part.challenges:
            out += [ch.node, *(p.node for p in ch.parents)]
        return out

    def check_challenges(self, c1, k: int) -> None:
        """Every challenge is the one the seed gives, every parent the graph's."""
        prm, part, graph = self.prm, self._partition(c1, k), self.graph
        seed, rid = bytes.fromhex(c1.seed[2:]), int(c1.replica_id, 16)
        want_parents = graph.parents(prm, np.array([ch.node for ch in part.challenges])).tolist()
        for i, ch in enumerate(part.challenges):
            at = f"partitions[{k}].challenges[{i}]"
            want = graph.challenge(prm, seed, rid, k, i)
            if ch.node != want:
                raise C1Error(f"challenge {i}: node {ch.node} is not the challenge derived from "
                              f"the seed ({want})", field=f"{at}.node", partition=k)
            for j, p in enumerate(ch.parents):
                if p.node != want_parents[i][j]:
                    raise C1Error(f"challenge {i}, layers 1..{prm.layers}: parent {j} of node "
                                  f"{ch.node} is {want_parents[i][j]}, not {p.node}",
                                  field=f"{at}.parents[{j}].node", partition=k)


def block_inputs(s, cs, parents: int, *, header: bool) -> dict:
    """The inputs of a synthetic family's recorded block (porep-lite's matrices): the
    public replica_id, comm_d, comm_r (a challenge block: also its challenge and ``parents``
    parent indices), then comm_c and comm_r_last, the two auxiliaries every block shares."""
    pub = {k: s.input(cs.alloc_input(), None) for k in ("replica_id", "comm_d", "comm_r")}
    if not header:
        pub["challenge"] = s.input(cs.alloc_input(), None)
        pub["parents"] = [s.input(cs.alloc_input(), None) for _ in range(parents)]
    pub["comm_c"] = s.input(cs.alloc(), None)
    pub["comm_r_last"] = s.input(cs.alloc(), None)
    return pub


def report_first_failure(k: int, challenges: int, checks: Iterable[tuple[np.ndarray, str, str]]) -> None:
    """``checks``: (per-challenge failure mask, field under the challenge, message). Raises a
    C1Error for the first challenge (then the first check) that fails, naming its field."""
    checks = list(checks)
    for i in range(challenges):
        for mask, where, msg in checks:
            if mask[i]:
                raise C1Error(f"challenge {i}, {msg}",
                              field=f"partitions[{k}].challenges[{i}].{where}", partition=k)


def differs(val: np.ndarray, want: Any) -> np.ndarray:
    """Per batch row: does the (B, 4) value differ from ``want`` (an int, or a (B, 4) array)?"""
    from ..bellpepper.core import const_vec

    want = const_vec(want, len(val)) if isinstance(want, int) else want
    return np.any(val != want, axis=1)
