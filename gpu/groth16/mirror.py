"""A compressed mirror of a bellperson ``.params`` file (issue 40 item 3): the five query
sections (h, l, a, b_g1, b_g2) with every point compressed (ZCash / arkworks encoding: G1 48
bytes, G2 96, half the .params' uncompressed points), kept in the key cache (``[srs]
param_cache``, cluster/pipeline/keys.py) beside nothing but its own name and read instead of
the .params when it matches it: half the bytes from the disk, one square root a point on the
device (gpu/kernels/mirror.cu) or on the host (gpu/native/compress_host.cpp).

File (format 2; format 1, still read, always held all five sections)::

    0      b"ZKHMIRR1", u32 format, u32 0                          (16 bytes)
    4096   the sections it holds, in the .params' order (h, l, a, b_g1, b_g2; all five, or the
           ones the disk had room for: ``plan_sections``): count * 48 | 96 bytes each, every
           section starting at a multiple of 4096 (zero padding between)
    ...    the header, JSON (below), then u64 its length and b"ZKHMEND1" (the file's last 16
           bytes: a truncated mirror has none and is refused)

The header binds the mirror to its source: the .params' name, size and mtime_ns, SHA-256 of its
verifying-key part (bytes 0 .. the end of IC) and of its first and last MiB, and every section's
count and offset in the .params (its layout, ``bellperson.scan``). Each section is cut into
blocks of BLOCK_POINTS points, each block's SHA-256 recorded (a flipped byte is named by its
block's byte range), the section's digest the SHA-256 of its block digests. SHA-256, not
BLAKE2b: ~2x faster here with the CPU's SHA instructions (1.1 vs 0.49 GB/s a thread,
2026-12-05), and blocks hash on several threads at once (hashlib releases the GIL).

A mirror is written only from a .params that was loaded and checked (the prover's load, or
``zkhive keys mirror`` which checks every point on the curve first), atomically (a temporary
name, renamed when complete), refused when the .params changed while it was being written.
Reading checks the binding first, then each block's digest as it is read, and decompression
itself proves each point on the curve (a non-residue x is refused naming section, index and file
offset); the identity is refused as the .params reader refuses it; with points="full" each
point's subgroup too, as on the .params path.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shutil
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bellperson import FIXED_NAMES, QUERIES, WIDTH, Layout, scan
from .compress import COMPRESSED, FQ_MODULUS
from .errors import KeyFormatError
from .keys import open_regular

log = logging.getLogger(__name__)

MAGIC, END = b"ZKHMIRR1", b"ZKHMEND1"
FORMAT = 2
#: the formats this reader takes: 1 (every section) and 2 (the sections its header lists)
FORMATS = (1, 2)
ALIGN = 4096
#: points a block: the unit hashed, read and decompressed (G1 12 MiB, G2 24 MiB compressed)
BLOCK_POINTS = 1 << 18
MiB = 1 << 20
#: the suffix a mirror's name adds to its .params' name (in param_cache)
SUFFIX = ".mirror"
_HALF_BE = np.frombuffer(((FQ_MODULUS - 1) // 2).to_bytes(48, "big"), dtype=">u8").astype(np.uint64)


class MirrorError(KeyFormatError):
    """A mirror that does not match its .params or its own digests: the load reads the .params."""


# --- compressing the .params' points ------------------------------------------------------

def _larger_half_be(y: np.ndarray) -> np.ndarray:
    """Rows of 48 big-endian bytes (a canonical coordinate) that exceed (p - 1) / 2."""
    w = np.ascontiguousarray(y).view(">u8").astype(np.uint64)   # (n, 6), most significant first
    gt = np.zeros(len(w), dtype=bool)
    undecided = np.ones(len(w), dtype=bool)
    for i in range(6):
        col = w[:, i]
        gt |= undecided & (col > _HALF_BE[i])
        undecided &= col == _HALF_BE[i]
    return gt


def compress_uncompressed(buf: np.ndarray, kind: int, *, where: str = "points",
                          first: int = 0) -> np.ndarray:
    """(n, 96 | 192) ZCash uncompressed big-endian points (a .params section) -> (n, 48 | 96)
    ZCash compressed: x as it lies (G2: x.c1 || x.c0) with 0x80 set and 0x20 where y is the
    larger of y, -y (G2: y.c1 decides unless it is 0, then y.c0). A flag bit already set or a
    zero-filled point is refused (the .params reader refuses both); the identity never occurs."""
    n = len(buf)
    flags = np.flatnonzero(buf[:, 0] & 0xE0)
    if len(flags):
        raise MirrorError(f"{where}: point {first + int(flags[0])}: a flag bit is set in an "
                          "uncompressed point")
    zero = np.flatnonzero(~buf.any(axis=1))
    if len(zero):
        raise MirrorError(f"{where}: point {first + int(zero[0])}: every byte zero")
    half = 48 * kind
    out = np.array(buf[:, :half])
    if kind == 1:
        sign = _larger_half_be(buf[:, 48:96])
    else:
        y1, y0 = buf[:, 96:144], buf[:, 144:192]
        sign = np.where(y1.any(axis=1), _larger_half_be(y1), _larger_half_be(y0))
    out[:, 0] |= np.where(sign, np.uint8(0xA0), np.uint8(0x80))
    return out


# --- the header -----------------------------------------------------------------------------

def _sha(b) -> str:
    return hashlib.sha256(b).hexdigest()


def _pread(fd: int, n: int, at: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        b = os.pread(fd, n - len(out), at + len(out))
        if not b:
            break
        out += b
    return bytes(out)


def binding(params_path, lay: Layout | None = None) -> dict:
    """What ties a mirror to its .params: name, size, mtime_ns, SHA-256 of the verifying-key
    part and of the first and last MiB, and each query section's count and offset (4 MiB read
    at most)."""
    path = Path(params_path)
    lay = lay or scan(path, params=True)
    with open_regular(path) as f:
        st = os.fstat(f.fileno())
        fd = f.fileno()
        vk_end = lay.sections["ic"].end
        return {"name": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                "vk_sha256": _sha(_pread(fd, vk_end, 0)),
                "head_sha256": _sha(_pread(fd, min(MiB, st.st_size), 0)),
                "tail_sha256": _sha(_pread(fd, min(MiB, st.st_size), max(0, st.st_size - MiB))),
                "layout": {name: [lay.sections[name].count, lay.sections[name].start]
                           for name, _ in QUERIES}}


@dataclass
class MirrorSection:
    name: str
    kind: int
    count: int
    offset: int          # byte offset of the first compressed point in the mirror
    src_start: int       # byte offset of the first point in the .params
    blocks: list         # SHA-256 hex of each block_points points
    digest: str          # SHA-256 of the block digests
    block_points: int = BLOCK_POINTS

    @property
    def width(self) -> int:
        return COMPRESSED[self.kind]

    def block_range(self, b: int) -> tuple[int, int]:
        return b * self.block_points, min(self.count, (b + 1) * self.block_points)

    def where(self, b: int) -> str:
        j0, j1 = self.block_range(b)
        return (f"section {self.name}, block {b} (points {j0}..{j1}, byte offsets "
                f"{self.offset + j0 * self.width}..{self.offset + j1 * self.width})")


def _section_digest(blocks: list[str]) -> str:
    return _sha(b"".join(bytes.fromhex(d) for d in blocks))


@dataclass
class Mirror:
    path: Path
    params: Path
    header: dict
    sections: dict
    #: why a section of it was refused (every query then reads the .params)
    refused: str | None = None

    def share(self, lay: Layout) -> float:
        """The part of the .params' query bytes this mirror holds (1.0: every section)."""
        return params_bytes(lay, self.sections) / max(params_bytes(lay, dict(QUERIES)), 1)

    def load_bytes(self, lay: Layout) -> int:
        """The bytes a load through it reads: the mirror and the .params' other sections."""
        return self.path.stat().st_size + params_bytes(
            lay, [q for q, _ in QUERIES if q not in self.sections])

    def check_block(self, sec: MirrorSection, b: int, data) -> None:
        """A block's bytes against its recorded digest."""
        if _sha(data) != sec.blocks[b]:
            raise MirrorError(f"{self.path}: {sec.where(b)}: SHA-256 differs from the digest the "
                              "mirror recorded (a changed or damaged byte)")


def mirror_path(root, params_path) -> Path:
    """Where the mirror of ``params_path`` lies in the key cache ``root``."""
    return Path(root) / (Path(params_path).name + SUFFIX)


def open_mirror(path, params_path, lay: Layout | None = None) -> Mirror:
    """The mirror at ``path`` checked against ``params_path`` (trailer, format, binding, layout,
    section sizes); MirrorError naming what differs."""
    path, params_path = Path(path), Path(params_path)
    lay = lay or scan(params_path, params=True)
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        fd = f.fileno()
        if size < 32:
            raise MirrorError(f"{path}: {size} bytes: truncated (no header)")
        head = _pread(fd, 16, 0)
        if head[:8] != MAGIC:
            raise MirrorError(f"{path}: byte offset 0: not a zkhive .params mirror (magic)")
        fmt = struct.unpack("<I", head[8:12])[0]
        if fmt not in FORMATS:
            raise MirrorError(f"{path}: byte offset 8: format {fmt}, this reader knows "
                              f"{', '.join(map(str, FORMATS))}")
        tail = _pread(fd, 16, size - 16)
        if tail[8:] != END:
            raise MirrorError(f"{path}: byte offset {size - 16}: no end marker: truncated or "
                              "partly written")
        n = struct.unpack("<Q", tail[:8])[0]
        if n > size - 32:
            raise MirrorError(f"{path}: byte offset {size - 16}: a header of {n} bytes does not "
                              f"fit in {size}")
        try:
            header = json.loads(_pread(fd, n, size - 16 - n))
        except ValueError as e:
            raise MirrorError(f"{path}: the header at byte offset {size - 16 - n} is not JSON "
                              f"({e})") from None
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise MirrorError(f"{path}: the header is not a format-{fmt} mirror header")
    want = binding(params_path, lay)
    got = header.get("source", {})
    for k in ("name", "size", "mtime_ns", "vk_sha256", "head_sha256", "tail_sha256", "layout"):
        if got.get(k) != want[k]:
            raise MirrorError(f"{path}: made from another .params than {params_path} (source "
                              f"{k}: {got.get(k)!r} != {want[k]!r}): stale")
    bp_ = header.get("block_points")
    if not isinstance(bp_, int) or not 1 <= bp_ <= 1 << 22:
        raise MirrorError(f"{path}: the header's block_points {bp_!r} is not in 1..{1 << 22}")
    entries = header.get("sections")
    if not isinstance(entries, list):
        raise MirrorError(f"{path}: the header's sections are not a list")
    order, kinds = [q for q, _ in QUERIES], dict(QUERIES)
    secs, at, last = {}, ALIGN, -1
    for i, d in enumerate(entries):
        name = d.get("name") if isinstance(d, dict) else None
        # a subset, each section once, in the .params' order: the offsets below follow from it
        if name not in kinds or order.index(name) <= last:
            raise MirrorError(f"{path}: the header's section entry {i} is named {name!r}, not one "
                              f"of {', '.join(order[last + 1:]) or 'none'} (each section at most "
                              "once, in the .params' order)")
        last = order.index(name)
        try:
            sec = MirrorSection(name, kinds[name], int(d["count"]), int(d["offset"]),
                                int(d["src_start"]), list(d["blocks"]), str(d["digest"]), bp_)
        except (KeyError, TypeError, ValueError):
            raise MirrorError(f"{path}: section {name}: malformed header entry") from None
        if sec.count != lay.sections[name].count or sec.offset != at:
            raise MirrorError(f"{path}: section {name}: the header's count or offset "
                              f"({sec.count} at {sec.offset}) is not the .params' "
                              f"({lay.sections[name].count} at {at})")
        if len(sec.blocks) != -(-sec.count // bp_) or _section_digest(sec.blocks) != sec.digest:
            raise MirrorError(f"{path}: section {name}: the block digests do not hash to the "
                              "section's digest")
        secs[name] = sec
        at = _align(sec.offset + sec.count * sec.width)
    if fmt == 1 and len(secs) != len(QUERIES):
        raise MirrorError(f"{path}: the header lists {len(secs)} sections, not {len(QUERIES)}")
    if not secs:
        raise MirrorError(f"{path}: the header lists no section")
    if at > size - 16 - n:
        raise MirrorError(f"{path}: the sections end at byte offset {at}, past the header at "
                          f"{size - 16 - n}: truncated")
    return Mirror(path, params_path, header, secs)


def _align(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


# --- writing --------------------------------------------------------------------------------

def background_priority() -> None:
    """This thread at idle CPU (nice 19) and idle IO priority (ioprio_set IOPRIO_CLASS_IDLE),
    where the system has them (Linux: per thread)."""
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, 19)
    except (AttributeError, OSError):
        pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        nr = {"x86_64": 251, "aarch64": 30}.get(os.uname().machine)
        if nr is not None:
            libc.syscall(nr, 1, tid, 3 << 13)   # IOPRIO_WHO_PROCESS, IOPRIO_CLASS_IDLE
    except (OSError, AttributeError):
        pass


def mirror_bytes(lay: Layout, block_points: int = BLOCK_POINTS, names=None) -> int:
    """An upper bound of the bytes ``write_mirror`` writes for a .params of layout ``lay`` holding
    the sections ``names`` (default all five): the aligned compressed sections and the JSON
    header (a block's digest ~70 bytes, a section's entry and the binding well under 1 KiB
    each)."""
    at, blocks = ALIGN, 0
    for name, kind in QUERIES:
        if names is not None and name not in names:
            continue
        sec = lay.sections[name]
        at = _align(at + sec.count * COMPRESSED[kind])
        blocks += -(-sec.count // block_points)
    return at + 72 * blocks + 1024 * (len(QUERIES) + 4)


def plan_sections(lay: Layout, room: int, block_points: int = BLOCK_POINTS) -> list[str]:
    """The sections a mirror of at most ``room`` bytes holds: each in the .params' order that
    still fits beside the ones before it. Every section halves its bytes, so any that fits
    saves the same per byte of disk; G1's h, l and a come first (a G1 square root is ~5x
    cheaper than G2's). At 32 GiB on a 64 GiB disk beside its 47.4 GB .params: h, l and a
    (19.0 GB of 23.7), the load reading 28.5 GB where it read 47.4."""
    names: list[str] = []
    for name, _ in QUERIES:
        if mirror_bytes(lay, block_points, names + [name]) <= room:
            names.append(name)
    return names


def params_bytes(lay: Layout, names) -> int:
    """The .params' bytes of the query sections ``names`` (what a load reads from it)."""
    return sum(lay.sections[n].count * WIDTH[k] for n, k in QUERIES if n in names)


def mirror_spare() -> int:
    """Bytes a mirror must leave free on its filesystem (ZKHIVE_PARAMS_MIRROR_SPARE, default
    1 GiB): the key cache shares its disk with the .params, sealing and logs."""
    raw = os.environ.get("ZKHIVE_PARAMS_MIRROR_SPARE", str(1 << 30))
    try:
        spare = int(raw)
    except ValueError:
        spare = -1
    if spare < 0:
        raise MirrorError(f"ZKHIVE_PARAMS_MIRROR_SPARE={raw!r}: expected a byte count >= 0")
    return spare


def _device_of(path) -> int:
    """The filesystem (st_dev) ``path`` is on, or would be made on: its nearest existing
    ancestor's."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return os.stat(p).st_dev


def mirror_room(directory, keep=()) -> tuple[int, str]:
    """The bytes a mirror written in ``directory`` may take (its filesystem's free space less
    ``mirror_spare``, less each ``keep`` entry (path, bytes, setting) whose path is on the same
    filesystem: what another user of the disk must find free, the blob store's
    ``blobs.min_free_bytes``), and the figures in words for an error or a log line."""
    spare, free = mirror_spare(), shutil.disk_usage(directory).free
    words = [f"{spare / 1e9:.2f} GB to spare (ZKHIVE_PARAMS_MIRROR_SPARE)"]
    here = _device_of(directory)
    for path, nbytes, setting in keep:
        if nbytes > 0 and _device_of(path) == here:
            spare += int(nbytes)
            words.append(f"{nbytes / 1e9:.2f} GB left for {path} on the same disk ({setting})")
    return free - spare, f"{', '.join(words)}, the filesystem has {free / 1e9:.2f} GB free"


def write_mirror(params_path, out_path, *, lay: Layout | None = None, threads: int = 4,
                 expect: tuple[int, int] | None = None, progress=None, idle: bool = False,
                 points_check=None, block_points: int = BLOCK_POINTS,
                 room: int | None = None, keep=()) -> Path:
    """Write the mirror of ``params_path`` at ``out_path``: each block of each section read
    (os.pread), compressed (``compress_uncompressed``) and hashed on ``threads`` threads, written
    in order; at most 2 * threads blocks in flight (G2: 48 MiB read, 24 MiB out a block: host
    memory stays under ~1 GiB). ``expect``: the (size, mtime_ns) the .params had when it was
    loaded and checked (refused if it differs, before or after). ``progress(done, total)``: bytes
    of the .params read, below ``total`` until the mirror is in place (its header written,
    synced and renamed: the sync of ~19 GB of written pages takes seconds, and a process
    stopped then leaves no mirror), then ``total`` once. ``idle``: every thread at idle CPU and
    IO priority. ``points_check(raw block, kind, section, first)``: each block's points checked
    before compressing (``zkhive keys mirror``). ``room``: the bytes the mirror may take
    (default: ``mirror_room`` of its directory with ``keep``); it holds the sections that fit
    (``plan_sections``), the rest stay read from the .params. The temporary file is removed on
    any error."""
    params_path, out_path = Path(params_path), Path(out_path)
    lay = lay or scan(params_path, params=True)
    src = binding(params_path, lay)
    if expect is not None and (src["size"], src["mtime_ns"]) != tuple(expect):
        raise MirrorError(f"{params_path}: changed since it was loaded (size, mtime_ns "
                          f"{src['size']}, {src['mtime_ns']} != {tuple(expect)}): no mirror written")
    done = 0
    tmp = out_path.with_name(out_path.name + f".tmp{os.getpid()}.{threading.get_ident()}")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # planned before a byte is written: a 32 GiB .params' mirror is ~24 GB, and a disk that
    # cannot take it (the H200 host's 64 GiB beside the 47.4 GB .params, 2026-12-05) would
    # otherwise fill up part way, for whatever else writes there too. The sections that fit
    # are mirrored (half their bytes off every later load), the others read from the .params.
    need = mirror_bytes(lay, block_points)
    if room is None:
        room, said = mirror_room(out_path.parent, keep)
    else:
        said = f"room for {room / 1e9:.2f} GB"
    names = plan_sections(lay, room, block_points)
    if not names:
        raise MirrorError(f"{out_path.parent}: the mirror of {params_path.name} needs "
                          f"{need / 1e9:.2f} GB (its smallest section alone "
                          f"{min(mirror_bytes(lay, block_points, [q]) for q, _ in QUERIES) / 1e9:.2f}"
                          f" GB) and {said}: no mirror written (free space there, or set [srs] "
                          "param_cache to a directory on a larger disk)")
    if len(names) < len(QUERIES):
        rest = [q for q, _ in QUERIES if q not in names]
        log.warning("%s: the mirror of %s holds sections %s (%.2f GB), not %s (%.2f GB of the "
                    ".params, read from it on every load): %s, the whole mirror needs %.2f GB",
                    out_path.parent, params_path.name, ", ".join(names),
                    mirror_bytes(lay, block_points, names) / 1e9, ", ".join(rest),
                    params_bytes(lay, rest) / 1e9, said, need / 1e9)
    total = params_bytes(lay, names)
    if idle:
        background_priority()
    init = background_priority if idle else None
    sections = []
    try:
        with open_regular(params_path) as f, open(tmp, "wb") as out, \
                ThreadPoolExecutor(max(1, threads), thread_name_prefix="params-mirror",
                                   initializer=init) as pool:
            fd = f.fileno()
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            except (AttributeError, OSError):
                pass
            out.write(MAGIC + struct.pack("<II", FORMAT, 0))
            at = ALIGN
            for name, kind in QUERIES:
                if name not in names:
                    continue
                sec = lay.sections[name]
                w = WIDTH[kind]
                where = f"{params_path}: section {name}"

                def job(j0, j1, sec=sec, w=w, kind=kind, where=where, name=name):
                    raw = _pread(fd, (j1 - j0) * w, sec.offset(j0))
                    if len(raw) != (j1 - j0) * w:
                        raise MirrorError(f"{where}, point {j0} at byte offset {sec.offset(j0)}: "
                                          "truncated")
                    buf = np.frombuffer(raw, np.uint8).reshape(j1 - j0, w)
                    if points_check is not None:
                        points_check(buf, kind, name, j0)
                    comp = compress_uncompressed(buf, kind, where=where, first=j0).tobytes()
                    return comp, hashlib.sha256(comp).hexdigest()

                spans = [(j0, min(sec.count, j0 + block_points))
                         for j0 in range(0, sec.count, block_points)]
                out.seek(at)
                blocks, pending = [], []
                it = iter(spans)
                for s in it:
                    pending.append(pool.submit(job, *s))
                    if len(pending) >= 2 * threads:
                        break
                while pending:
                    comp, d = pending.pop(0).result()
                    nxt = next(it, None)
                    if nxt is not None:
                        pending.append(pool.submit(job, *nxt))
                    out.write(comp)
                    blocks.append(d)
                    done += len(comp) * 2
                    if progress is not None:
                        progress(min(done, total - 1), total)
                sections.append({"name": name, "kind": kind, "count": sec.count, "offset": at,
                                 "src_start": sec.start, "blocks": blocks,
                                 "digest": _section_digest(blocks)})
                at = _align(at + sec.count * COMPRESSED[kind])
            out.seek(0, os.SEEK_END)
            end = out.tell()
            if end < at:   # the last section's padding (an empty section writes nothing)
                out.write(b"\0" * (at - end))
            again = binding(params_path, lay)
            if again != src:
                raise MirrorError(f"{params_path}: changed while its mirror was being written: "
                                  "no mirror written")
            head = json.dumps({"format": FORMAT, "source": src, "block_points": block_points,
                               "digest": "sha256", "sections": sections}).encode()
            out.write(head + struct.pack("<Q", len(head)) + END)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, out_path)
    finally:
        if tmp.exists():
            tmp.unlink()
    if progress is not None:
        progress(total, total)
    return out_path


def host_points_check(points: str):
    """A ``points_check`` for ``write_mirror``: each block's points on the curve ("curve") and
    in the subgroup ("full") on the host (bellperson.first_bad)."""
    from . import bellperson as bp

    def check(buf, kind, name, first):
        raw = bp.from_uncompressed(buf, kind, first=first)
        bad, why = bp.first_bad(raw, kind, points)
        if bad >= 0:
            raise MirrorError(f"section {name}, point {first + bad}: {why}: no mirror written")
    return check


# --- reading on the host --------------------------------------------------------------------

#: mirror.cuh's reasons (its bad word's low 3 bits; gpu/cuda/params.py says them too)
WHY = {1: "a flag is wrong (not compressed, or the point at infinity)", 2: "x is not below p",
       3: "not on the curve: no curve point has that x (a non-residue)",
       4: "not in the prime-order subgroup"}


def host_mirror(comp: np.ndarray, kind: int) -> tuple[np.ndarray, int]:
    """gpu/kernels/mirror.cuh's ``mirror_point`` on the host (gpu/native/compress_host.cpp,
    OpenMP): (n, 48 | 96) compressed -> ((n, 96 | 192) our xy layout, the smallest
    (index << 3 | why) of a point refused, or -1). The identity is refused (why 1)."""
    from .compress import _host
    comp = np.ascontiguousarray(comp, dtype=np.uint8)
    out = np.empty((len(comp), 2 * COMPRESSED[kind]), dtype=np.uint8)
    if not len(comp):
        return out, -1
    word = int(getattr(_host(), f"host_mirror_g{kind}")(len(comp), comp.ctypes.data, out.ctypes.data))
    return out, word

def read_blocks(m: Mirror, name: str, f, b0: int, b1: int):
    """Yield (block, j0, j1, bytes) for blocks b0..b1 of a section, each checked against its
    digest as it is read."""
    sec = m.sections[name]
    w = sec.width
    for b in range(b0, b1):
        j0, j1 = sec.block_range(b)
        data = _pread(f.fileno(), (j1 - j0) * w, sec.offset + j0 * w)
        if len(data) != (j1 - j0) * w:
            raise MirrorError(f"{m.path}: {sec.where(b)}: truncated")
        m.check_block(sec, b, data)
        yield b, j0, j1, data


def check_flags(m: Mirror, sec: MirrorSection, comp: np.ndarray, j0: int) -> None:
    """Compressed points with the compressed flag and no infinity flag (the .params never holds
    the identity)."""
    bad = np.flatnonzero((comp[:, 0] & 0xC0) != 0x80)
    if len(bad):
        j = j0 + int(bad[0])
        raise MirrorError(f"{m.path}: section {sec.name}, point {j} at byte offset "
                          f"{sec.offset + j * sec.width}: "
                          + ("the point at infinity (the .params holds none)"
                             if comp[bad[0], 0] & 0x40 else "the compressed flag is not set"))


def read_section_host(m: Mirror, name: str, *, out: np.ndarray, index, points: str) -> np.ndarray:
    """A section into ``out`` (our layout, one row a variable; ``index``: each point's row, None:
    dense), decompressed on the host (gpu/native/compress_host.cpp, every point on the curve
    by its square root), with points="full" each in the subgroup (bellperson.first_bad)."""
    from . import bellperson as bp
    sec = m.sections[name]
    with open_regular(m.path) as f:
        for b, j0, j1, data in read_blocks(m, name, f, 0, len(sec.blocks)):
            comp = np.frombuffer(data, np.uint8).reshape(j1 - j0, sec.width)
            check_flags(m, sec, comp, j0)
            raw, word = host_mirror(comp, sec.kind)
            if word >= 0:
                j = j0 + (word >> 3)
                raise MirrorError(f"{m.path}: section {name}, point {j} at byte offset "
                                  f"{sec.offset + j * sec.width}: does not decompress: "
                                  f"{WHY.get(word & 7, 'refused')}")
            if points == "full":
                bad, why = bp.first_bad(raw, sec.kind, "full")
                if bad >= 0:
                    j = j0 + bad
                    raise MirrorError(f"{m.path}: section {name}, point {j} at byte offset "
                                      f"{sec.offset + j * sec.width}: {why}")
            if index is None:
                out[j0:j1] = raw
            else:
                out[index[j0:j1]] = raw
    return out


# --- a key read through its mirror ----------------------------------------------------------

def _fell_back(q, e: Exception) -> None:
    """Say once that ``q``'s mirror was refused and the .params is read instead; the mirror's
    ``on_bad`` hears of it (the key cache drops the mirror so it is written again)."""
    if q.mirror.refused is not None:   # a section before it was refused: quietly the .params
        q.fell_back, q.mirror = q.mirror.refused, None
        return
    log.warning("%s; reading section %s from %s instead", str(e).splitlines()[0], q.section,
                q.lay.path)
    q.fell_back = str(e).splitlines()[0]
    m, q.mirror = q.mirror, None
    first = m.refused is None
    m.refused = m.refused or q.fell_back
    if first and q.on_bad is not None:
        try:
            q.on_bad(m, q.fell_back)
        except Exception:   # never fails the load
            log.exception("dropping the mirror %s", m.path)


def attach(pk, m: Mirror, on_bad=None):
    """``pk`` (bellperson.read_params, its queries FileQuery objects) read through ``m``: each
    query whose section ``m`` holds becomes a MirrorQuery of the same section, which falls back
    to the .params on any mismatch."""
    from .bellperson import OURS
    for name in m.sections:   # a partial mirror: the other sections stay FileQuery (.params)
        q = getattr(pk, OURS[name])
        setattr(pk, OURS[name], MirrorQuery.of(q, m, on_bad))
    pk.mirror = m
    return pk


def _mirror_query_class():
    from .bellperson import FileQuery

    class MirrorQuery(FileQuery):
        """A FileQuery whose points come from the section's mirror (``raw``: decompressed on the
        host; gpu/cuda/params.py ``fill``: on the device) until the mirror is refused, then from
        the .params (``fell_back`` says why)."""

        __slots__ = ("mirror", "on_bad", "fell_back")

        @classmethod
        def of(cls, q, m, on_bad=None):
            self = cls(q.lay, q.section, q.n, q.index_source(), q.points)
            self.chunk, self.host_convert = q.chunk, q.host_convert
            self.mirror, self.on_bad, self.fell_back = m, on_bad, None
            return self

        @property
        def raw(self):
            if self.mirror is not None and self.mirror.refused is not None:
                _fell_back(self, MirrorError(self.mirror.refused))
            if self._raw is None and self.mirror is not None:
                sec = self.lay.sections[self.section]
                out = np.zeros((self.n, sec.width), dtype=np.uint8)
                try:
                    self._raw = read_section_host(self.mirror, self.section, out=out,
                                                  index=self.index, points=self.points)
                except (KeyFormatError, OSError) as e:
                    _fell_back(self, e if isinstance(e, KeyFormatError) else
                               MirrorError(f"{self.mirror.path}: {e}"))
            return FileQuery.raw.fget(self)

    return MirrorQuery


MirrorQuery = _mirror_query_class()
