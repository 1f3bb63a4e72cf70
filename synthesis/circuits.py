"""The contract between a circuit family and the rest of zkhive.

A *parameter set* (e.g. ``porep-lite-2k``) fixes one circuit shape: its R1CS matrices are built
once and cached; per proof, each partition's assignment is a pure function of
(parameter set, C1 input, partition index), so any worker can (re)do it. The cluster only ever
talks to circuits through this interface.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .r1cs import R1CS


class C1Error(ValueError):
    """A C1 input is malformed or its vanilla proofs do not check. ``field`` names the JSON path
    (``partitions[3].challenges[7].tree_d_path[2]``), ``partition`` the partition index."""

    def __init__(self, message: str, *, field: str | None = None, partition: int | None = None):
        self.field, self.partition, self.message = field, partition, message
        where = []
        if partition is not None:
            where.append(f"partition {partition}")
        if field:
            where.append(f"field {field}")
        super().__init__(f"{'; '.join(where)}: {message}" if where else message)


@runtime_checkable
class Circuit(Protocol):
    #: parameter-set name, unique across circuit families
    name: str

    def r1cs(self) -> R1CS:
        """The constraint matrices (built once, cached on disk by ``digest``)."""

    def digest(self) -> str:
        """Hex digest of the circuit definition (parameters and code version)."""

    def num_partitions(self) -> int:
        """Partitions per proof for this parameter set."""

    def parse_c1(self, doc: dict[str, Any]) -> Any:
        """Validate a C1 document (raise C1Error naming the field); returns the parsed model."""

    def public_inputs(self, c1: Any, partition: int) -> list[int]:
        """Partition ``partition``'s public inputs, in the circuit's input order."""

    def synthesize(self, c1: Any, partition: int) -> np.ndarray:
        """The full assignment z = (1, public, aux) of one partition; raises C1Error when the
        partition's vanilla proof does not check."""


_REGISTRY: dict[str, Circuit] = {}


def register(circuit: Circuit) -> Circuit:
    _REGISTRY[circuit.name] = circuit
    return circuit


def get_circuit(name: str) -> Circuit:
    """The parameter set called ``name``; KeyError names the close ones and the families (the
    whole list, dozens of sets, is `zkhive circuits`': an error stays one short line)."""
    _load_families()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        import difflib

        from .limits import clip

        names = sorted(_REGISTRY)
        close = difflib.get_close_matches(name, names, n=4, cutoff=0.6) \
            if isinstance(name, str) else []
        hint = f"did you mean {', '.join(close)}? " if close else ""
        families = sorted({n.rsplit("-", 1)[0] for n in names if not n.startswith("test-")})
        raise KeyError(f"unknown parameter set {clip(name)}; {hint}{len(names)} known, of the "
                       f"families {', '.join(families)} (`zkhive circuits` lists them)") from None


def known() -> list[str]:
    _load_families()
    return sorted(_REGISTRY)


def _load_families() -> None:
    # importing a family registers its parameter sets
    import importlib

    from .family import FAMILIES

    for mod in (f.package for f in FAMILIES.values()):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
