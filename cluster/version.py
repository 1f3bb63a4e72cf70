"""What code a process runs: the package version and a digest of the source files.

A worker reports both in the registry, so after a deploy ``zkhive status`` shows any worker still
running the old code (same version string, different digest) instead of leaving it to guesswork.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cluster", "gpu", "synthesis")
SUFFIXES = (".py", ".cu", ".cuh", ".cpp")


@lru_cache(maxsize=1)
def package_version() -> str:
    try:
        from importlib.metadata import version
        return version("zkhive")
    except Exception:  # running from a checkout that is not pip-installed
        import tomllib
        try:
            return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over (relative path, contents) of every source file, first 12 hex digits."""
    h = hashlib.sha256()
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*")):
            if path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode() + b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()[:12]
