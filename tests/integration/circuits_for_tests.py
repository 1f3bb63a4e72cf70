"""A small real circuit family for the cluster tests: repeated squaring.

Parameter set ``test-squares-<L>x<P>``: each of P partitions proves y = x^(2^L) with x and y
public. A C1 document is ``{"params": NAME, "partitions": [{"x": "0x..", "y": "0x.."}, ...]}``;
``y`` plays the part of a vanilla proof: synthesis refuses a partition whose y is wrong, naming
the field. Imported by the workers through ``worker.circuit_modules``.
"""
from __future__ import annotations

import hashlib
import random
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

from synthesis import field
from synthesis.builder import ConstraintSystem
from synthesis.circuits import C1Error, register


class PartitionInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: str
    y: str


class SquaresC1(BaseModel):
    model_config = ConfigDict(extra="forbid")
    params: str
    partitions: list[PartitionInput]


def _felt(text, where: str) -> int:
    if not isinstance(text, str) or not text.startswith("0x"):
        raise C1Error("must be a 0x-prefixed hex string", field=where)
    try:
        v = int(text, 16)
    except ValueError:
        raise C1Error(f"{text!r} is not hex", field=where) from None
    if not 0 <= v < field.MODULUS:
        raise C1Error("is not below the field modulus", field=where)
    return v


def _chain(x: int, length: int) -> int:
    for _ in range(length):
        x = x * x % field.MODULUS
    return x


class SquareChain:
    def __init__(self, length: int, partitions: int):
        self.length, self.partitions = length, partitions
        self.name = f"test-squares-{length}x{partitions}"

    def _build(self, cs: ConstraintSystem, x: int | None, y: int | None) -> None:
        xv = cs.alloc_input(x)
        yv = cs.alloc_input(y)
        cur, val = xv, x
        for i in range(self.length - 1):
            val = None if val is None else val * val % field.MODULUS
            nxt = cs.alloc(val)
            cs.enforce(cur, cur, nxt, f"square {i}")
            cur = nxt
        cs.enforce(cur, cur, yv, "output")

    @lru_cache(maxsize=1)
    def r1cs(self):
        cs = ConstraintSystem(with_values=False)
        self._build(cs, None, None)
        return cs.to_r1cs()

    def digest(self) -> str:
        return hashlib.sha256(f"{self.name}/square-chain/v1".encode()).hexdigest()

    def num_partitions(self) -> int:
        return self.partitions

    def parse_c1(self, doc):
        if not isinstance(doc, dict):
            raise C1Error("the C1 input must be a JSON object")
        try:
            c1 = SquaresC1.model_validate(doc)
        except Exception as e:
            err = e.errors()[0]
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
            raise C1Error(err["msg"], field=loc) from None
        if c1.params != self.name:
            raise C1Error(f"is {c1.params!r}, this circuit is {self.name!r}", field="params")
        if len(c1.partitions) != self.partitions:
            raise C1Error(f"has {len(c1.partitions)} entries, expected {self.partitions}", field="partitions")
        return [(_felt(p.x, f"partitions[{k}].x"), _felt(p.y, f"partitions[{k}].y"))
                for k, p in enumerate(c1.partitions)]

    def public_inputs(self, c1, partition: int) -> list[int]:
        return list(c1[partition])

    def synthesize(self, c1, partition: int) -> np.ndarray:
        x, y = c1[partition]
        if _chain(x, self.length) != y:
            raise C1Error(f"is not x^(2^{self.length})", field=f"partitions[{partition}].y", partition=partition)
        cs = ConstraintSystem()
        self._build(cs, x, y)
        return cs.assignment()


class CompactToy:
    """A circuit with compact matrices (tests/compact_circuits.py ``toy``): the prover holds
    such a circuit's key from a .params file over its compact form, as it does
    Filecoin's (issue 40). P partitions, each public input p: z = 1, p, s = p, then per copy
    j x_j, x_j^2, (x_j^2 + 3 p)(1 + x_j), x_j drawn from p (some 0 and 1). A C1 document is
    ``{"params": NAME, "partitions": [{"x": "0x<p>", "y": "0x<p>"}, ...]}`` (y must equal x)."""

    def __init__(self, copies: int, partitions: int):
        self.copies, self.partitions = copies, partitions
        self.name = f"test-compact-{copies}x{partitions}"

    @lru_cache(maxsize=1)
    def compact_r1cs(self):
        from tests.compact_circuits import toy
        return toy(self.copies)

    @lru_cache(maxsize=1)
    def r1cs(self):
        return self.compact_r1cs().to_r1cs()

    def digest(self) -> str:
        return hashlib.sha256(f"{self.name}/compact-toy/v1".encode()).hexdigest()

    def num_partitions(self) -> int:
        return self.partitions

    def parse_c1(self, doc):
        c1 = SquareChain.parse_c1(self, doc)  # the same document shape, checked the same way
        for k, (x, y) in enumerate(c1):
            if x != y:
                raise C1Error("must equal x", field=f"partitions[{k}].y", partition=k)
        return c1

    def public_inputs(self, c1, partition: int) -> list[int]:
        return [c1[partition][0]]

    def synthesize(self, c1, partition: int) -> np.ndarray:
        p = c1[partition][0]
        z = [1, p, p]
        for j in range(self.copies):
            x = j % 2 if j % 3 == 0 else pow(p + j, 3, field.MODULUS)
            y = x * x % field.MODULUS
            z += [x, y, (y + 3 * p) * (1 + x) % field.MODULUS]
        return field.vec_from_ints(z)


SQUARES_A = register(SquareChain(8, 2))   # test-squares-8x2: the main multi-partition circuit
SQUARES_B = register(SquareChain(5, 2))   # test-squares-5x2: a second circuit for routing tests
SQUARES_C = register(SquareChain(6, 3))   # test-squares-6x3: three partitions
SQUARES_SLOW = register(SquareChain(512, 2))  # ~0.2 s a proof: long enough to stop a prover mid-prove
COMPACT = register(CompactToy(40, 2))     # test-compact-40x2: a key over compact matrices


class SlowAggregation(SquareChain):
    """A square chain whose aggregation takes seconds, as a 32 GiB PoRep job's did while the
    aggregate worker parsed its 48 MB C1 again (2.75-4.24 s on the H200's host, 2026-12-05), and
    as any job's still does when its public inputs stored at submission are gone (expired,
    collected, a record of an older build: cluster/pipeline/publics.py, the C1 again): the
    public inputs take ``seconds`` a partition (at submission too), and each partition's
    synthesis ``hold`` seconds, the time a test has to take the stored ones away."""

    def __init__(self, length: int, partitions: int, seconds: float, hold: float = 0.5):
        super().__init__(length, partitions)
        self.name, self.seconds, self.hold = f"test-slowagg-{length}x{partitions}", seconds, hold

    def digest(self) -> str:
        return hashlib.sha256(f"{self.name}/slow-aggregation/v1".encode()).hexdigest()

    def public_inputs(self, c1, partition: int) -> list[int]:
        import time
        time.sleep(self.seconds)
        return super().public_inputs(c1, partition)

    def synthesize(self, c1, partition: int) -> np.ndarray:
        import time
        time.sleep(self.hold)
        return super().synthesize(c1, partition)


SLOW_AGGREGATION = register(SlowAggregation(8, 2, 1.5))   # 3 s an aggregation


class SlowSynthesis(SquareChain):
    """A square chain whose partitions take seconds to synthesize, as a 32 GiB PoRep
    partition's do (~7.5 s, eight at once, on the H200's 16-core host, 2026-12-05)."""

    def __init__(self, length: int, partitions: int, seconds: float):
        super().__init__(length, partitions)
        self.name, self.seconds = f"test-slowsynth-{length}x{partitions}", seconds

    def digest(self) -> str:
        return hashlib.sha256(f"{self.name}/slow-synthesis/v1".encode()).hexdigest()

    def synthesize(self, c1, partition: int) -> np.ndarray:
        import time
        time.sleep(self.seconds)
        return super().synthesize(c1, partition)


SLOW_SYNTHESIS = register(SlowSynthesis(8, 2, 3.0))   # 3 s a partition's synthesis


def make_c1(circuit: SquareChain, seed: int = 0, *, bad_y_partition: int | None = None) -> dict:
    rng = random.Random(seed)
    parts = []
    for k in range(circuit.partitions):
        x = rng.randrange(2, field.MODULUS)
        y = _chain(x, circuit.length)
        if k == bad_y_partition:
            y = (y + 1) % field.MODULUS
        parts.append({"x": hex(x), "y": hex(y)})
    return {"params": circuit.name, "partitions": parts}
