"""What every circuit family shares, so that a new family is not a copy of the last one.

A *family* (porep-lite, filecoin) is a package under ``synthesis`` that registers its
parameter sets (``synthesis.circuits.register``) when imported and names its sealing side here.
This package holds what the families had each written for themselves:

- ``params``: the circuit digest (parameters, circuit version, the code that builds the matrices);
- ``c1``: the C1 schema's building blocks (canonical field elements, the strict model base, the
  one-line error from pydantic's first error, length checks naming the JSON path);
- ``graph``: the SplitMix64 parent graph and the seeded challenge draw of the synthetic families;
- ``sector``: a sector directory (``sector.json`` + ``sector.npz``) written atomically and read
  back with one-line errors;
- ``circuit``: the parts of ``synthesis.circuits.Circuit`` that do not depend on the gadgets
  (digest, partitions, public-input order checks, the on-disk matrix cache, the vanilla check
  report).

``FAMILIES`` lists every family: ``synthesis.circuits`` imports them to register their sets, the
sector commands find a family's sealing side by its name (``sealing(name)``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Family:
    """One circuit family: its package, and the modules of its sealing side."""
    name: str
    package: str
    #: the module with ``Sector`` (``load``, ``save``), ``SectorError``, ``generate(prm, seed)``,
    #: ``c1_document(sector, seed)`` and ``interactive_seed(sector)``
    sector: str
    #: the module with ``json_schema()`` (``zkhive sector c1 --schema``)
    c1: str


FAMILIES: dict[str, Family] = {
    "porep-lite": Family("porep-lite", "synthesis.porep", "synthesis.porep.sector",
                         "synthesis.porep.c1"),
    "filecoin": Family("filecoin", "synthesis.filecoin", "synthesis.filecoin.sector",
                       "synthesis.filecoin.c1"),
}

#: The family of a sector directory written before sector.json named its family.
DEFAULT = "porep-lite"


def get(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown circuit family {name!r}; known: {', '.join(sorted(FAMILIES))}") from None


def sealing(name: str) -> ModuleType:
    """The sealing-side module of family ``name``."""
    return importlib.import_module(get(name).sector)


def schema(name: str) -> ModuleType:
    return importlib.import_module(get(name).c1)
