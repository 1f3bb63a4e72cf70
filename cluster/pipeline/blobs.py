"""Large data out of band: task messages carry a ``BlobRef`` (store, sha256, size), never the data.

Blobs are content-addressed (the key *is* the sha256), so writing the same assignment twice is
one blob, a reference cannot point outside the store, and every read is checked: the size first
(before reading anything, against ``blobs.max_bytes``), then the hash of what was read.

- ``DirBlobStore``: files under a directory every worker mounts (the default). Writes go to a
  temporary file renamed into place, so a reader never sees half a blob.
- ``RedisBlobStore``: the blob in a Redis key with a TTL, for the embedded one-machine setup;
  refuses payloads over ``blobs.redis_max_bytes`` (Redis holds them in memory).

Arrays travel as ``.npy`` (``np.load(..., allow_pickle=False)``), documents as JSON.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cluster.errors import BlobError, BlobStoreFull

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class BlobRef(BaseModel):
    """What a message carries instead of the data."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    store: Literal["dir", "redis"]
    sha256: str
    size: int = Field(ge=0)
    #: what the blob holds ("assignment", "c1", "result"), for messages and clean-up
    kind: str = Field("blob", max_length=32, pattern=r"^[a-z0-9_-]+$")

    @field_validator("sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        if not _HEX64.match(v):
            raise ValueError("must be 64 lowercase hex digits")
        return v

    def short(self) -> str:
        return f"{self.kind}:{self.sha256[:12]} ({self.size} B)"


class BlobStore:
    name: str
    max_bytes: int

    def put(self, data: bytes, kind: str = "blob") -> BlobRef:
        raise NotImplementedError

    def _read(self, ref: BlobRef) -> bytes:
        raise NotImplementedError

    def delete(self, ref: BlobRef) -> None:
        raise NotImplementedError

    def get(self, ref: BlobRef | dict) -> bytes:
        """The blob's bytes, checked against the reference's size and sha256."""
        ref = parse_ref(ref)
        if ref.store != self.name:
            raise BlobError(f"blob {ref.short()} is in the {ref.store!r} store, this is {self.name!r}")
        if ref.size > self.max_bytes:
            raise BlobError(f"blob {ref.short()} claims {ref.size} bytes, over the limit {self.max_bytes}")
        data = self._read(ref)
        if len(data) != ref.size:
            raise BlobError(f"blob {ref.short()}: read {len(data)} bytes, the reference says {ref.size}")
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise BlobError(f"blob {ref.short()}: content does not match its sha256 (corrupt or replaced)")
        return data

    # -- typed helpers --------------------------------------------------------------------------
    def put_array(self, arr: np.ndarray, kind: str = "array") -> BlobRef:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
        return self.put(buf.getvalue(), kind)

    def get_array(self, ref: BlobRef | dict, *, dtype=None, shape: tuple | None = None) -> np.ndarray:
        ref = parse_ref(ref)
        try:
            arr = np.load(io.BytesIO(self.get(ref)), allow_pickle=False)
        except ValueError as e:
            raise BlobError(f"blob {ref.short()} is not a plain .npy array: {e}") from None
        if dtype is not None and arr.dtype != np.dtype(dtype):
            raise BlobError(f"blob {ref.short()}: dtype {arr.dtype}, expected {np.dtype(dtype)}")
        if shape is not None and tuple(arr.shape) != tuple(shape):
            raise BlobError(f"blob {ref.short()}: shape {arr.shape}, expected {tuple(shape)}")
        return arr

    def put_json(self, doc: Any, kind: str = "json") -> BlobRef:
        return self.put(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(), kind)

    def get_json(self, ref: BlobRef | dict) -> Any:
        ref = parse_ref(ref)
        try:
            return json.loads(self.get(ref))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BlobError(f"blob {ref.short()} is not JSON: {e}") from None


def parse_ref(ref: BlobRef | dict) -> BlobRef:
    if isinstance(ref, BlobRef):
        return ref
    if not isinstance(ref, dict):
        raise BlobError(f"a blob reference must be an object, got {type(ref).__name__}")
    from pydantic import ValidationError

    from synthesis.limits import json_path, validation_line

    try:
        return BlobRef(**ref)
    except ValidationError as e:  # one line naming the field, not pydantic's dump
        loc, msg = validation_line(e)
        raise BlobError(f"malformed blob reference: field {json_path(loc) or '?'}: {msg}") from None
    except TypeError as e:
        raise BlobError(f"malformed blob reference: {e}") from None


class DirBlobStore(BlobStore):
    name = "dir"

    def __init__(self, root: str | os.PathLike, max_bytes: int = 16 << 30):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def put(self, data: bytes, kind: str = "blob") -> BlobRef:
        if len(data) > self.max_bytes:
            raise BlobError(f"{kind} of {len(data)} bytes is over blobs.max_bytes={self.max_bytes}")
        sha = hashlib.sha256(data).hexdigest()
        path = self._path(sha)
        if not (path.exists() and path.stat().st_size == len(data)):
            tmp = None
            try:  # every step that takes room (a directory, a file, its bytes) is in here
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except OSError as e:
                if tmp is not None:
                    Path(tmp).unlink(missing_ok=True)
                if e.errno in (errno.ENOSPC, errno.EDQUOT):  # back-pressure, not a bad job
                    raise BlobStoreFull(f"blob store {self.root}: no room for {kind} of {len(data)} "
                                        f"bytes ({self.room()})") from None
                raise
            except BaseException:
                if tmp is not None:
                    Path(tmp).unlink(missing_ok=True)
                raise
        return BlobRef(store="dir", sha256=sha, size=len(data), kind=kind)

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.root).free

    def free_inodes(self) -> int | None:
        """Files that can still be made on the store's filesystem (None: it does not count them)."""
        st = os.statvfs(self.root)
        return st.f_favail if st.f_files else None

    def room(self) -> str:
        """``N bytes free, M inodes free`` of the store's filesystem, for messages."""
        inodes = self.free_inodes()
        return f"{self.free_bytes()} bytes free" + ("" if inodes is None else f", {inodes} inodes free")

    def check_room(self, min_free: int) -> None:
        """Refuse new work while the store's disk has less than ``min_free`` bytes free, or no
        inode left for a blob (its directory and its file)."""
        free = self.free_bytes()
        if min_free and free < min_free:
            raise BlobStoreFull(f"blob store {self.root}: {free} bytes free, under blobs.min_free_bytes="
                                f"{min_free}: free space (or lower the setting) and submit again")
        inodes = self.free_inodes()
        if inodes is not None and inodes < 2:
            raise BlobStoreFull(f"blob store {self.root}: {inodes} inodes free (no room for a file): "
                                f"remove files there and submit again")

    def _read(self, ref: BlobRef) -> bytes:
        path = self._path(ref.sha256)
        try:
            with open(path, "rb") as f:
                return f.read(ref.size + 1)  # one more byte shows a longer file
        except FileNotFoundError:
            raise BlobError(f"blob {ref.short()} is missing from {self.root}") from None

    def delete(self, ref: BlobRef) -> None:
        self._path(parse_ref(ref).sha256).unlink(missing_ok=True)


class RedisBlobStore(BlobStore):
    name = "redis"
    PREFIX = "zkhive:blob:"

    def __init__(self, client, max_bytes: int = 64 << 20, ttl_s: int = 7 * 86400):
        self.r, self.max_bytes, self.ttl_s = client, max_bytes, ttl_s

    def put(self, data: bytes, kind: str = "blob") -> BlobRef:
        if len(data) > self.max_bytes:
            raise BlobError(f"{kind} of {len(data)} bytes is over blobs.redis_max_bytes={self.max_bytes}; "
                            "use blobs.backend = \"dir\" for large data")
        sha = hashlib.sha256(data).hexdigest()
        self.r.set(self.PREFIX + sha, data, ex=self.ttl_s)
        return BlobRef(store="redis", sha256=sha, size=len(data), kind=kind)

    def _read(self, ref: BlobRef) -> bytes:
        data = self.r.get(self.PREFIX + ref.sha256)
        if data is None:
            raise BlobError(f"blob {ref.short()} is missing from Redis (expired or never written)")
        return data

    def delete(self, ref: BlobRef) -> None:
        self.r.delete(self.PREFIX + parse_ref(ref).sha256)


def open_store(settings, redis_client=None) -> BlobStore:
    """The store named by ``settings.blobs``."""
    b = settings.blobs
    if b.backend == "dir":
        return DirBlobStore(b.dir, max_bytes=b.max_bytes)
    if redis_client is None:
        raise BlobError("the redis blob store needs a Redis client")
    return RedisBlobStore(redis_client, max_bytes=min(b.redis_max_bytes, b.max_bytes), ttl_s=b.ttl_s)
