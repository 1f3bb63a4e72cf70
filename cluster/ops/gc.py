"""``zkhive gc``: remove what the ``dir`` blob store holds and no job needs any more.

Blobs in Redis expire with their key (``blobs.ttl_s``); files in the ``dir`` store did not (issue
27: "blobs are never collected"). A file is removed when it is older than ``blobs.ttl_s`` (or
``--older-than``) **and** no job record still in Redis references it (its C1 and public inputs,
an assignment, its result): a job's records expire after ``delivery.result_ttl_s``, so a blob
outlives every job that names it. Half-written ``.tmp-*`` files older than an hour go too (a
worker killed mid-write).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

_HEX = set("0123456789abcdef")


@dataclass
class Collected:
    removed: list[Path] = field(default_factory=list)
    removed_bytes: int = 0
    kept_referenced: int = 0
    kept_young: int = 0


def referenced(r) -> set[str]:
    """The sha256 of every blob a job record in Redis names."""
    from cluster.pipeline.jobkeys import PREFIX

    shas: set[str] = set()
    for k in r.scan_iter(match=PREFIX + "*", count=1000):
        name = k.decode(errors="replace")
        kind = r.type(k)
        if kind == b"string" and (name.count(":") == 2 or ":assign:" in name):
            raws = [r.get(k)]
        elif kind == b"hash" and name.endswith(":state"):
            raws = [r.hget(k, "result")]
        else:
            continue
        for raw in raws:
            try:
                doc = json.loads(raw) if raw else None
            except (ValueError, UnicodeDecodeError):
                continue
            named = [doc.get(f) for f in ("c1", "publics")] if isinstance(doc, dict) else []
            for ref in (doc, *named):
                if isinstance(ref, dict) and isinstance(ref.get("sha256"), str):
                    shas.add(ref["sha256"])
    return shas


def collect(root: Path, r, older_than_s: float, *, dry_run: bool = False, now: float | None = None) -> Collected:
    now = time.time() if now is None else now
    keep = referenced(r)
    out = Collected()
    for shard in sorted(p for p in Path(root).iterdir() if p.is_dir() and len(p.name) == 2):
        for f in shard.iterdir():
            try:
                st = f.stat()
            except FileNotFoundError:
                continue
            tmp = f.name.startswith(".tmp-")
            if not tmp and not (len(f.name) == 64 and set(f.name) <= _HEX):
                continue  # not ours
            if now - st.st_mtime < (3600 if tmp else older_than_s):
                out.kept_young += 1
                continue
            if not tmp and f.name in keep:
                out.kept_referenced += 1
                continue
            if not dry_run:
                try:
                    os.unlink(f)
                except FileNotFoundError:
                    continue
            out.removed.append(f)
            out.removed_bytes += st.st_size
    return out
