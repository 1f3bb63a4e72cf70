"""The circuit digest: what names a parameter set's matrices and proving keys.

A digest covers the parameters, the family's circuit version and the digest of the code that
decides the constraint matrices (``source_digest``): a change to a gadget that nobody marked
with a new circuit version still gets new cached matrices and new keys, instead of a
"shape (3524, 4), expected (3477, 4)" at prove time.
"""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

#: ``synthesis/``: the patterns of ``source_digest`` are relative to it
ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def source_digest(patterns: tuple[str, ...]) -> str:
    """SHA-256 over the files matching ``patterns`` (globs under ``synthesis/``), path and bytes."""
    h = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def circuit_digest(family: str, version: int, patterns: tuple[str, ...], fields: dict[str, Any]) -> str:
    """The hex digest of one parameter set: family, circuit version, sources, parameters."""
    doc = {"family": family, "version": version, "source": source_digest(patterns), **fields}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
