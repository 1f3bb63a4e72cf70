"""Groth16 proving and verifying keys, and their file format.

Names follow the paper (Groth 2016, section 3.2) as arkworks spells them:
alpha_g1, beta_g1/g2, gamma_g2, delta_g1/g2, gamma_abc_g1 (the public-input terms),
a_query, b_g1_query, b_g2_query, h_query, l_query.

File format (all integers little-endian), version 2 (version 1, read too, is the same with
uncompressed sections):

    offset  size      field
    0       8         magic b"ZKHIVEK\\0"
    8       4         format version (2)
    12      4         kind: 1 proving key, 2 verifying key
    16      32        circuit digest (synthesis.r1cs.R1CS.digest)
    48      8 x 4     num_public, num_aux, num_constraints, domain_size
    80      4         number of sections S
    84      4         reserved (0)
    88      48 x S    section table: point kind u32 (1 = G1, 2 = G2), reserved u32,
                      point count u64, sha256 of the section's bytes (32)
    88+48S  32        sha256 of every header byte before it
    ...               the sections in table order; each point compressed as arkworks and ZCash
                      write it (G1 48 bytes, G2 96: x big-endian, G2 x.c1 then x.c0, flags in
                      the top 3 bits; gpu/groth16/compress.py); version 1: uncompressed affine
                      x || y, little-endian (G1 96 bytes, G2 192 bytes), identity all zeros

A proving key's sections: alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2,
gamma_abc_g1, a_query, b_g1_query, b_g2_query, h_query, l_query; a verifying key's: alpha_g1,
beta_g2, gamma_g2, delta_g2, gamma_abc_g1. Keys are written and read section by section in
chunks, hashing as they go, so a key is never held twice in memory. Because every byte is
covered by a hash, the queries are read straight into byte arrays (gpu.groth16.points.PointArray)
without decoding or checking a point (the CUDA backend uploads those bytes as they are; the CPU
backend decodes them once, unchecked: 0.3 us instead of 41 us a point); a file that fails a hash
is refused before any of it is used. The hashes guard against corruption, not against a forged
file: keep key files where only the operator can write. Compressed sections are decompressed
as they are read (on the device when a CUDA context is current in the reading thread, else on
the host), into the same uncompressed arrays.
"""
from __future__ import annotations

import hashlib
import os
import stat
import struct

import numpy as np
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from py_arkworks_bls12381 import G1Point, G2Point

from .curve import G1_BYTES, G2_BYTES
from .errors import KeyFormatError
from .points import PointArray

MAGIC = b"ZKHIVEK\0"
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
#: point kind -> bytes a point in a section, per format version
WIDTHS = {1: {1: G1_BYTES, 2: G2_BYTES}, 2: {1: 48, 2: 96}}
KIND_PK, KIND_VK = 1, 2
G1_KIND, G2_KIND = 1, 2
_HEADER = struct.Struct("<8sII32sQQQQII")
_SECTION = struct.Struct("<IIQ32s")
CHUNK = 1 << 15  # points per read/write chunk
DECOMPRESS_CHUNK = 1 << 22  # points per decompression batch (a device launch is worth it)
SINGLE_POINTS = {"alpha_g1", "beta_g1", "beta_g2", "gamma_g2", "delta_g1", "delta_g2"}

VK_SECTIONS = (("alpha_g1", G1_KIND), ("beta_g2", G2_KIND), ("gamma_g2", G2_KIND),
               ("delta_g2", G2_KIND), ("gamma_abc_g1", G1_KIND))
PK_SECTIONS = (("alpha_g1", G1_KIND), ("beta_g1", G1_KIND), ("beta_g2", G2_KIND),
               ("gamma_g2", G2_KIND), ("delta_g1", G1_KIND), ("delta_g2", G2_KIND),
               ("gamma_abc_g1", G1_KIND), ("a_query", G1_KIND), ("b_g1_query", G1_KIND),
               ("b_g2_query", G2_KIND), ("h_query", G1_KIND), ("l_query", G1_KIND))


@dataclass
class VerifyingKey:
    alpha_g1: G1Point
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g2: G2Point
    gamma_abc_g1: PointArray
    circuit_digest: bytes
    num_aux: int = 0
    num_constraints: int = 0
    domain_size: int = 0

    @property
    def num_public(self) -> int:
        return len(self.gamma_abc_g1) - 1

    def save(self, path: str | os.PathLike) -> None:
        _write(path, KIND_VK, self, VK_SECTIONS)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "VerifyingKey":
        meta, sections = _read(path, KIND_VK, VK_SECTIONS)
        return cls(*(sections[n] for n, _ in VK_SECTIONS),
                   circuit_digest=meta["digest"], num_aux=meta["num_aux"],
                   num_constraints=meta["num_constraints"], domain_size=meta["domain_size"])

    def to_bytes(self) -> bytes:
        import io
        buf = io.BytesIO()
        _write_stream(buf, KIND_VK, self, VK_SECTIONS)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "VerifyingKey":
        import tempfile
        with tempfile.NamedTemporaryFile() as f:
            f.write(data)
            f.flush()
            return cls.load(f.name)


@dataclass
class ProvingKey:
    vk: VerifyingKey
    beta_g1: G1Point
    delta_g1: G1Point
    a_query: PointArray
    b_g1_query: PointArray
    b_g2_query: PointArray
    h_query: PointArray
    l_query: PointArray
    circuit_digest: bytes
    num_public: int
    num_aux: int
    num_constraints: int
    domain_size: int

    # the verifying key's points, reachable under their section names for the writer
    alpha_g1 = property(lambda self: self.vk.alpha_g1)
    beta_g2 = property(lambda self: self.vk.beta_g2)
    gamma_g2 = property(lambda self: self.vk.gamma_g2)
    delta_g2 = property(lambda self: self.vk.delta_g2)
    gamma_abc_g1 = property(lambda self: self.vk.gamma_abc_g1)

    def save(self, path: str | os.PathLike) -> None:
        _write(path, KIND_PK, self, PK_SECTIONS)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ProvingKey":
        meta, s = _read(path, KIND_PK, PK_SECTIONS)
        vk = VerifyingKey(s["alpha_g1"], s["beta_g2"], s["gamma_g2"], s["delta_g2"],
                          s["gamma_abc_g1"], meta["digest"], meta["num_aux"],
                          meta["num_constraints"], meta["domain_size"])
        return cls(vk, s["beta_g1"], s["delta_g1"], s["a_query"], s["b_g1_query"],
                   s["b_g2_query"], s["h_query"], s["l_query"], meta["digest"],
                   meta["num_public"], meta["num_aux"], meta["num_constraints"],
                   meta["domain_size"])

    def check_shape(self) -> None:
        """The queries' lengths agree with the circuit sizes recorded in the key."""
        nvars = 1 + self.num_public + self.num_aux
        want = {"gamma_abc_g1": self.num_public + 1, "a_query": nvars, "b_g1_query": nvars,
                "b_g2_query": nvars, "h_query": self.domain_size - 1, "l_query": self.num_aux}
        for name, n in want.items():
            if len(getattr(self, name)) != n:
                raise KeyFormatError(f"proving key: {name} has {len(getattr(self, name))} points, "
                                     f"the circuit sizes need {n}")


# --- writing -------------------------------------------------------------------------------

def _section_bytes(obj, name: str, pkind: int) -> tuple[int, Iterator[bytes]]:
    """(point count, chunks of the section's compressed bytes)."""
    from .compress import compress

    v = getattr(obj, name)
    if isinstance(v, list):  # points built in memory (tests, exports)
        v = PointArray.from_points(G1Point if pkind == G1_KIND else G2Point, v)
    if isinstance(v, PointArray):
        rows = CHUNK
        return len(v), (compress(v.raw[i:i + rows], pkind).tobytes() for i in range(0, len(v), rows))
    return 1, iter([v.to_compressed_bytes()])


def _meta_of(obj) -> tuple:
    return obj.num_public, obj.num_aux, obj.num_constraints, obj.domain_size


def _write(path, kind: int, obj, layout) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        _write_stream(f, kind, obj, layout)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # readers see the old file or the whole new one, never a partial


def _write_stream(f: BinaryIO, kind: int, obj, layout) -> None:
    digest = obj.circuit_digest
    if len(digest) != 32:
        raise KeyFormatError("circuit digest must be 32 bytes")
    table_at = _HEADER.size
    header_len = table_at + _SECTION.size * len(layout) + 32
    f.write(b"\0" * header_len)  # placeholder: hashes are known only after the body
    entries = []
    for name, pkind in layout:
        count, chunks = _section_bytes(obj, name, pkind)
        h = hashlib.sha256()
        for chunk in chunks:
            h.update(chunk)
            f.write(chunk)
        entries.append(_SECTION.pack(pkind, 0, count, h.digest()))
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, kind, digest, *_meta_of(obj), len(layout), 0)
    head += b"".join(entries)
    f.seek(0)
    f.write(head + hashlib.sha256(head).digest())
    f.seek(0, 2)


# --- reading -------------------------------------------------------------------------------

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (a symbolic link to one is): a FIFO,
    device, socket or directory is refused at once, naming the path, instead of blocking in
    ``open`` or ``read`` (O_NONBLOCK: opening a FIFO with no writer returns at once; on a
    regular file the flag changes nothing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise KeyFormatError(f"{path}: no such file") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise KeyFormatError(f"{path}: {what}, not a regular file: a key file must be one")
    return os.fdopen(fd, "rb")


def read_header(path) -> dict:
    """Parse and check a key file's header only (cheap: used by the registry and `zkhive keys`)."""
    with open_regular(path) as f:
        meta, _ = _read_header(f, path)
    return meta


def _read_header(f: BinaryIO, path) -> tuple[dict, list[tuple[int, int, bytes]]]:
    raw = f.read(_HEADER.size)
    if len(raw) < _HEADER.size:
        raise KeyFormatError(f"{path}: {len(raw)} bytes is too short for a key file header "
                             f"({_HEADER.size} bytes)")
    magic, version, kind, digest, npub, naux, ncons, dom, nsec, _ = _HEADER.unpack(raw)
    if magic != MAGIC:
        raise KeyFormatError(f"{path}: not a zkhive key file (bad magic at offset 0)")
    if version not in READ_VERSIONS:
        raise KeyFormatError(f"{path}: key format version {version} at offset 8; this zkhive "
                             f"reads versions {', '.join(map(str, READ_VERSIONS))}: regenerate the key")
    if nsec > 64:
        raise KeyFormatError(f"{path}: section count {nsec} at offset 80 is implausible")
    table = f.read(_SECTION.size * nsec)
    hh = f.read(32)
    if len(table) < _SECTION.size * nsec or len(hh) < 32:
        raise KeyFormatError(f"{path}: header truncated")
    if hashlib.sha256(raw + table).digest() != hh:
        raise KeyFormatError(f"{path}: header hash mismatch at offset "
                             f"{_HEADER.size + len(table)}: the header is corrupted")
    sections = [_SECTION.unpack_from(table, i * _SECTION.size)[::1] for i in range(nsec)]
    meta = {"kind": kind, "version": version, "digest": digest, "num_public": npub, "num_aux": naux,
            "num_constraints": ncons, "domain_size": dom,
            "header_len": _HEADER.size + len(table) + 32,
            "sections": [(k, n, h) for k, _r, n, h in sections]}
    return meta, meta["sections"]


def _read(path, want_kind: int, layout) -> tuple[dict, dict]:
    path = Path(path)
    with open_regular(path) as f:
        meta, sections = _read_header(f, path)
        if meta["kind"] != want_kind:
            names = {KIND_PK: "proving key", KIND_VK: "verifying key"}
            raise KeyFormatError(f"{path}: holds a {names.get(meta['kind'], meta['kind'])}, "
                                 f"expected a {names[want_kind]}")
        if len(sections) != len(layout):
            raise KeyFormatError(f"{path}: {len(sections)} sections, expected {len(layout)}")
        expected = meta["header_len"]
        for (name, pkind), (kind, n, _) in zip(layout, sections):
            if kind != pkind:
                raise KeyFormatError(f"{path}: section {name} has point kind {kind}, expected {pkind}")
            if kind not in (G1_KIND, G2_KIND):
                raise KeyFormatError(f"{path}: section {name} has point kind {kind}")
            expected += n * WIDTHS[meta["version"]][kind]
        size = os.fstat(f.fileno()).st_size
        if size != expected:
            raise KeyFormatError(f"{path}: file is {size} bytes but its header describes "
                                 f"{expected} (truncated or padded)")
        out = {}
        offset = meta["header_len"]
        for (name, pkind), (kind, n, digest) in zip(layout, sections):
            point = G1Point if kind == G1_KIND else G2Point
            width = G1_BYTES if kind == G1_KIND else G2_BYTES
            stored = WIDTHS[meta["version"]][kind]
            raw = np.empty((n, width), dtype=np.uint8)
            h = hashlib.sha256()
            if stored == width:  # version 1: straight into the array, one copy of the key in RAM
                flat = raw.reshape(-1)
                for i in range(0, n, CHUNK):
                    k = min(CHUNK, n - i)
                    view = memoryview(flat[i * width:(i + k) * width])
                    if f.readinto(view) != k * width:
                        raise KeyFormatError(f"{path}: truncated inside section {name}")
                    h.update(view)
            else:
                _read_compressed(f, path, name, kind, raw, h, offset, stored)
            if h.digest() != digest:
                raise KeyFormatError(f"{path}: section {name} (bytes {offset}..{offset + n * stored}) "
                                     f"does not match its hash: the file is corrupted")
            arr = PointArray(point, raw)
            if name in SINGLE_POINTS:
                if n != 1:
                    raise KeyFormatError(f"{path}: section {name} holds {n} points, expected 1")
                try:
                    out[name] = arr[0]
                except Exception as e:
                    raise KeyFormatError(f"{path}: section {name} at offset {offset} does not "
                                         f"decode ({e})") from None
            else:
                out[name] = arr
            offset += n * stored
    return meta, out


def _read_compressed(f, path, name, kind, raw, h, offset, stored) -> None:
    """Read a compressed section in batches, hashing and decompressing each into ``raw``. The
    hash of the whole section is checked by the caller, so a corrupted batch is refused then
    even where it happened to decompress; one that does not decompress is refused here."""
    from .compress import decompress

    n = len(raw)
    buf = np.empty((min(n, DECOMPRESS_CHUNK), stored), dtype=np.uint8)
    for i in range(0, n, DECOMPRESS_CHUNK):
        k = min(DECOMPRESS_CHUNK, n - i)
        view = memoryview(buf[:k].reshape(-1))
        if f.readinto(view) != k * stored:
            raise KeyFormatError(f"{path}: truncated inside section {name}")
        h.update(view)
        try:
            decompress(buf[:k], kind, where=f"{path}: section {name}", out=raw[i:i + k], first=i)
        except KeyFormatError as e:
            raise KeyFormatError(f"{e} (the section starts at file offset {offset}, "
                                 f"{stored} bytes a point)") from None
