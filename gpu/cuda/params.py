"""Parameter files (gpu/groth16/bellperson.py) and the device: a file's query streamed into a
resident base buffer, and a resident key's bases read back for writing (kernels:
gpu/kernels/params.cu, subgroup.cu; gpu/kernels/msm.cu ``load_bases``)."""
from __future__ import annotations

import logging
import os
import queue
import threading
import time

import numpy as np

from gpu import phases
from gpu.groth16.bellperson import _REASONS, ZERO_FILLED, _fail, open_regular, read_section

log = logging.getLogger(__name__)
#: seconds and bytes of the last ``fill`` of each section: {"h": {"read_s", "upload_s",
#: "device_s", "bytes", "s"}} (the prover's log; bench/params_up.py)
last_fill: dict = {}


#: page-locked read buffers of the pipelined fill: the reader fills the others while the
#: copy engine drains one
PIPE_BUFFERS = 3


def _bounds(idx: np.ndarray, *v: int) -> np.ndarray:
    """np.searchsorted(idx, v) with the keys in idx's own dtype: keys of another dtype (a
    Python list: int64) make numpy convert the whole index first, 0.3 s for a's 130 M int32
    entries a chunk, which was 40 of the 85-101 s filecoin-32g's file took to load (H200,
    2026-12-04)."""
    return np.searchsorted(idx, np.asarray(v, dtype=idx.dtype))


def fill(q, buffer) -> None:
    """Stream the query into ``buffer`` (n points, Montgomery affine as the MSM kernels read
    them), ``q.chunk`` variables at a time: each chunk's points read from the file as they lie,
    uploaded, turned into our layout and scattered by the density on the device (params.cu
    ``load_file_points``), then ``load_bases`` (Montgomery form, every point checked below p
    and on the curve) into the chunk's rows of ``buffer``; with points="full" subgroup.cu
    ``check_points`` ([r] P = O) first.

    By default pipelined (``_fill_pipelined``): a reader thread reads the section in large
    sequential reads into page-locked buffers while the device copies and checks the chunk
    before, with no host round trip a chunk (every chunk's flags are read once at the end).
    ``ZKHIVE_PARAMS_PIPELINE=0``: one chunk after the other, flags read each chunk
    (``_fill_serial``), as does ``host_convert`` (numpy on the host: ~0.1 GB/s)."""
    if getattr(q, "mirror", None) is not None:   # gpu/groth16/mirror.py MirrorQuery
        from gpu.groth16.errors import KeyFormatError
        from gpu.groth16.mirror import MirrorError, _fell_back
        try:
            if q.mirror.refused is not None:
                raise MirrorError(q.mirror.refused)
            return _fill_mirror(q, buffer)
        except (KeyFormatError, OSError) as e:   # said once, then the section from the .params
            _fell_back(q, e if isinstance(e, KeyFormatError) else MirrorError(f"{q.mirror.path}: {e}"))
    if q.host_convert or os.environ.get("ZKHIVE_PARAMS_PIPELINE", "1") == "0":
        return _fill_serial(q, buffer)
    return _fill_pipelined(q, buffer)


def _log_fill(q, spent: dict) -> None:
    last_fill[q.section] = spent
    log.info("section %s streamed to the device: %d points, %.2f GB in %.2f s (%.2f GB/s; read "
             "%.2f s, upload %.2f s, device %.2f s)", q.section, q.n, spent["bytes"] / 1e9,
             spent["s"], spent["bytes"] / 1e9 / max(spent["s"], 1e-9), spent["read_s"],
             spent["upload_s"], spent["device_s"])


def _fill_pipelined(q, buffer) -> None:
    """``fill`` with the file read on a thread into PIPE_BUFFERS page-locked buffers (each read
    one chunk's points, contiguous in the file, plus its density indices), every copy,
    conversion and check queued on one stream, and the error flags of every chunk kept in a
    device array read once at the end: the first bad point in file order is refused with the
    serial fill's words. Timings: ``read_s`` the reader's seconds in reads, ``upload_s`` the
    seconds the device side waited for the reader, ``device_s`` the final drain."""
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import kernel as msm_kernel

    sec = q.lay.sections[q.section]
    g = "g1" if sec.kind == 1 else "g2"
    w = sec.width
    cuda = loader.driver()
    load = msm_kernel(f"{g}_load_bases")
    check = (loader.get_function(loader.load_module("subgroup"), f"{g}_check_points")
             if q.points == "full" else None)
    convert = loader.get_function(loader.load_module("params"), f"{g}_load_file_points")
    idx, chunk = q.index, q.chunk
    rows = min(chunk, max(q.n, 1))
    starts = list(range(0, q.n, chunk))
    spans = []  # (v0, v1, j0, j1) a chunk
    for v0 in starts:
        v1 = min(q.n, v0 + chunk)
        j0, j1 = (v0, v1) if idx is None else map(int, _bounds(idx, v0, v1))
        spans.append((v0, v1, j0, j1))
    NONE = 0xFFFFFFFFFFFFFFFF
    spent = {"read_s": 0.0, "upload_s": 0.0, "device_s": 0.0, "bytes": 0}
    t_all = time.perf_counter()
    bufs = [cuda.pagelocked_empty(rows * w, np.uint8) for _ in range(PIPE_BUFFERS)]
    dbufs = ([cuda.pagelocked_empty(max(rows, 2), np.int32) for _ in range(PIPE_BUFFERS)]
             if idx is not None else None)
    phases.add("page-locked buffers", time.perf_counter() - t_all)   # summed over the sections
    free: queue.Queue = queue.Queue()
    filled: queue.Queue = queue.Queue()
    for k in range(PIPE_BUFFERS):
        free.put(k)
    stop = threading.Event()

    def reader():
        try:
            with open_regular(q.lay.path) as f:
                try:
                    os.posix_fadvise(f.fileno(), sec.offset(0), sec.count * w,
                                     os.POSIX_FADV_SEQUENTIAL)
                except (AttributeError, OSError):
                    pass
                for c, (v0, v1, j0, j1) in enumerate(spans):
                    k = free.get()
                    if k is None or stop.is_set():
                        return
                    m = j1 - j0
                    t = time.perf_counter()
                    if m:
                        view = memoryview(bufs[k])[: m * w]
                        f.seek(sec.offset(j0))
                        got = 0
                        while got < m * w:
                            r = f.readinto(view[got:])
                            if not r:
                                break
                            got += r
                        if got != m * w:
                            filled.put(("truncated", j0))
                            return
                        # all zeros is the identity in our layout: the device would take it
                        words = np.frombuffer(bufs[k], np.uint64, m * w // 8).reshape(m, w // 8)
                        zero = np.flatnonzero(np.bitwise_or.reduce(words, axis=1) == 0)
                        if len(zero):
                            filled.put(("zero", j0 + int(zero[0])))
                            return
                        if idx is not None:
                            dbufs[k][:m] = idx[j0:j1]
                    spent["read_s"] += time.perf_counter() - t
                    filled.put((c, k))
        except BaseException as e:  # handed to the device side, raised there
            filled.put(("error", e))

    th = threading.Thread(target=reader, name=f"params-read-{q.section}", daemon=True)
    stream = cuda.Stream()
    nflags = 3 * max(len(spans), 1)
    try:
        with DeviceBuffer(rows * w, what=f"{q.section} file chunk") as filebuf, \
                DeviceBuffer(rows * w, what=f"{q.section} xy chunk") as xy, \
                DeviceBuffer(max(4 * rows, 8), what=f"{q.section} density chunk") as dens, \
                DeviceBuffer(8 * nflags, what="bad point indices") as flags:
            cuda.memset_d32(flags.ptr, 0xFFFFFFFF, 2 * nflags)
            th.start()
            pending: list = []
            for _ in spans:
                t = time.perf_counter()
                item = filled.get()
                spent["upload_s"] += time.perf_counter() - t
                if item[0] == "truncated":
                    _fail(q.lay, sec, item[1], "truncated")
                if item[0] == "zero":
                    _fail(q.lay, sec, item[1], ZERO_FILLED.format(g=g.upper()))
                if item[0] == "error":
                    raise item[1]
                c, k = item
                v0, v1, j0, j1 = spans[c]
                kk, m = v1 - v0, j1 - j0
                slot = flags.ptr + 8 * 3 * c
                if m:
                    cuda.memcpy_htod_async(filebuf.ptr, bufs[k][: m * w], stream)
                    spent["bytes"] += m * w
                if idx is not None:
                    cuda.memset_d32_async(xy.ptr, 0, kk * w // 4, stream)  # the identity
                    if m:
                        cuda.memcpy_htod_async(dens.ptr, dbufs[k][:m], stream)
                ev = cuda.Event()
                ev.record(stream)
                pending.append((ev, k))
                if m:
                    with loader.guard(kernel=f"{g}_load_file_points", shape=m):
                        convert(np.int64(m), np.uintp(filebuf.ptr),
                                np.uintp(dens.ptr if idx is not None else 0), np.int64(v0),
                                np.uintp(xy.ptr), np.uintp(slot), block=(128, 1, 1),
                                grid=(-(-m // 128), 1), stream=stream)
                if check is not None:
                    with loader.guard(kernel=f"{g}_check_points", shape=kk):
                        check(np.int64(kk), np.uintp(xy.ptr), np.int32(2), np.uintp(slot + 8),
                              block=(128, 1, 1), grid=(-(-kk // 128), 1), stream=stream)
                with loader.guard(kernel=f"{g}_load_bases", shape=kk):
                    load(np.int64(kk), np.uintp(xy.ptr), np.uintp(buffer.ptr + w * v0),
                         np.uintp(slot + 16), block=(128, 1, 1), grid=(-(-kk // 128), 1),
                         stream=stream)
                # a buffer goes back to the reader once its copy is done (the newest stays
                # queued; the reader has the others)
                while len(pending) > 1:
                    e, kb = pending.pop(0)
                    e.synchronize()
                    free.put(kb)
            t = time.perf_counter()
            stream.synchronize()
            spent["device_s"] = time.perf_counter() - t
            got = np.empty(nflags, np.uint64)
            cuda.memcpy_dtoh(got, flags.ptr)
    finally:
        stop.set()
        free.put(None)
        if th.is_alive():
            th.join(timeout=60)
        try:
            stream.synchronize()  # no copy may still read a page-locked buffer freed below
        except Exception:
            pass
        for b in bufs + (dbufs or []):
            b.base.free()
    for c, (v0, v1, j0, j1) in enumerate(spans):
        fmt, sub, curve = (int(x) for x in got[3 * c:3 * c + 3])
        if fmt != NONE:
            _fail(q.lay, sec, j0 + fmt, "a flag bit is set (the point at infinity, or a "
                  "compressed or sort flag) (found on the device)")
        if sub != NONE:
            v = v0 + (sub >> 2)
            j = v if idx is None else int(_bounds(idx, v)[0])
            _fail(q.lay, sec, j, _REASONS[sub & 3].format(g=g.upper()) + " (found on the device)")
        if curve != NONE:
            v = v0 + curve
            j = v if idx is None else int(_bounds(idx, v)[0])
            _fail(q.lay, sec, j, f"a coordinate not below p, or not on the {g.upper()} curve "
                                 "(found on the device)")
    spent["s"] = time.perf_counter() - t_all
    _log_fill(q, spent)


#: reader threads of the mirror fill: each reads and hashes whole blocks (SHA-256 ~1.1 GB/s a
#: thread here), so the disk, not the hash, sets the pace
MIRROR_READERS = int(os.environ.get("ZKHIVE_MIRROR_READERS", "4"))


def _fill_mirror(q, buffer) -> None:
    """``fill`` from the section's compressed mirror (gpu/groth16/mirror.py): MIRROR_READERS
    threads read whole blocks (the header's block_points, 2^18: 12 | 24 MiB, sequential in the file) into
    page-locked buffers, each block's SHA-256 compared as it is read; the device copies block c
    and decompresses it (mirror.cu: one square root a point, the point on the curve by
    construction; mirror_full.cu with points="full": in the subgroup too) straight into
    ``buffer``'s rows (Montgomery affine, the density's rows; the others zeroed first: the
    identity), while the readers fill the next ones. Every block's error word is read once at
    the end. Any mismatch raises MirrorError naming the mirror, section and byte offset (the
    caller falls back to the .params)."""
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    from gpu.groth16.mirror import WHY as _WHY, MirrorError

    m = q.mirror
    sec = m.sections[q.section]
    g = "g1" if sec.kind == 1 else "g2"
    cw, w = sec.width, 2 * sec.width          # compressed, resident bytes a point
    cuda = loader.driver()
    mod = loader.load_module("mirror_full" if q.points == "full" else "mirror")
    kern = loader.get_function(mod, f"{g}_mirror_points")
    idx = q.index
    nblocks = len(sec.blocks)
    rows = min(sec.block_points, max(sec.count, 1))
    nbuf = MIRROR_READERS + 2
    spent = {"read_s": 0.0, "upload_s": 0.0, "device_s": 0.0, "bytes": 0, "mirror": 1}
    t_all = time.perf_counter()
    src = open_regular(m.path)   # one file for every reader: the kernel's readahead sees
    fd = src.fileno()            # one sequential stream (preadv takes its own offsets)
    try:
        os.posix_fadvise(fd, sec.offset, sec.count * cw, os.POSIX_FADV_SEQUENTIAL)
    except (AttributeError, OSError):
        pass

    t = time.perf_counter()
    bufs = [cuda.pagelocked_empty(rows * cw, np.uint8) for _ in range(nbuf)]
    dbufs = ([cuda.pagelocked_empty(rows, np.int32) for _ in range(nbuf)]
             if idx is not None else None)
    phases.add("page-locked buffers", time.perf_counter() - t)   # summed over the sections
    free: queue.Queue = queue.Queue()
    for k in range(nbuf):
        free.put(k)
    ready: dict = {}
    cond = threading.Condition()
    state = {"next": 0, "stop": False}
    take = threading.Lock()

    def reader():
        try:
            while True:
                k = free.get()
                if k is None or state["stop"]:
                    return
                with take:
                    b = state["next"]
                    state["next"] += 1
                if b >= nblocks:
                    free.put(k)
                    return
                j0, j1 = sec.block_range(b)
                n = (j1 - j0) * cw
                t = time.perf_counter()
                view = memoryview(bufs[k])[:n]
                got = 0
                while got < n:
                    r = os.preadv(fd, [view[got:]], sec.offset + j0 * cw + got)
                    if not r:
                        break
                    got += r
                if got != n:
                    raise MirrorError(f"{m.path}: {sec.where(b)}: truncated")
                m.check_block(sec, b, view)
                if idx is not None:
                    dbufs[k][:j1 - j0] = idx[j0:j1]
                with cond:
                    spent["read_s"] += time.perf_counter() - t
                    ready[b] = k
                    cond.notify_all()
        except BaseException as e:  # handed to the device side, raised there
            with cond:
                ready.setdefault("error", e)
                cond.notify_all()

    threads = [threading.Thread(target=reader, name=f"mirror-read-{q.section}-{i}", daemon=True)
               for i in range(min(MIRROR_READERS, max(nblocks, 1)))]
    stream = cuda.Stream()
    got = np.empty(max(nblocks, 1), np.uint64)
    try:
        with DeviceBuffer(rows * cw, what=f"{q.section} mirror block") as comp, \
                DeviceBuffer(max(4 * rows, 8), what=f"{q.section} density block") as dens, \
                DeviceBuffer(8 * max(nblocks, 1), what="bad point indices") as flags:
            cuda.memset_d32_async(flags.ptr, 0xFFFFFFFF, 2 * max(nblocks, 1), stream)
            if idx is not None and q.n:   # the rows the density leaves out: the identity
                words, step = q.n * w // 4, 1 << 30   # b_g2 at 2^27: 6.3 G words, in pieces
                for lo in range(0, words, step):
                    cuda.memset_d32_async(buffer.ptr + 4 * lo, 0, min(step, words - lo), stream)
            for th in threads:
                th.start()
            pending: list = []
            for b in range(nblocks):
                t = time.perf_counter()
                with cond:
                    while b not in ready and "error" not in ready:
                        cond.wait()
                    if "error" in ready:
                        raise ready["error"]
                    k = ready.pop(b)
                spent["upload_s"] += time.perf_counter() - t
                j0, j1 = sec.block_range(b)
                k_pts = j1 - j0
                cuda.memcpy_htod_async(comp.ptr, bufs[k][: k_pts * cw], stream)
                if idx is not None:
                    cuda.memcpy_htod_async(dens.ptr, dbufs[k][:k_pts], stream)
                ev = cuda.Event()
                ev.record(stream)
                pending.append((ev, k))
                spent["bytes"] += k_pts * cw
                out = buffer.ptr if idx is not None else buffer.ptr + w * j0
                with loader.guard(kernel=f"{g}_mirror_points", shape=k_pts):
                    kern(np.int64(k_pts), np.uintp(comp.ptr),
                         np.uintp(dens.ptr if idx is not None else 0), np.uintp(out),
                         np.uintp(flags.ptr + 8 * b), block=(128, 1, 1),
                         grid=(-(-k_pts // 128), 1), stream=stream)
                # the device buffers are reused by the next block: its copy waits on the stream,
                # so a block's page-locked buffer goes back once its copy has run
                while len(pending) > 1:
                    e, kb = pending.pop(0)
                    e.synchronize()
                    free.put(kb)
            t = time.perf_counter()
            stream.synchronize()
            spent["device_s"] = time.perf_counter() - t
            for _, kb in pending:
                free.put(kb)
            if nblocks:
                cuda.memcpy_dtoh(got, flags.ptr)
    finally:
        state["stop"] = True
        for _ in threads:
            free.put(None)
        for th in threads:
            if th.is_alive():
                th.join(timeout=60)
        try:
            stream.synchronize()
        except Exception:
            pass
        for b in bufs + (dbufs or []):
            b.base.free()
        src.close()
    for b in range(nblocks):
        word = int(got[b])
        if word != 0xFFFFFFFFFFFFFFFF:
            j = sec.block_range(b)[0] + (word >> 3)
            raise MirrorError(f"{m.path}: section {q.section}, point {j} at byte offset "
                              f"{sec.offset + j * cw}: {_WHY.get(word & 7, 'refused')} (found on "
                              "the device)")
    spent["s"] = time.perf_counter() - t_all
    _log_fill(q, spent)


def _fill_serial(q, buffer) -> None:
    """``fill`` one chunk after the other (ZKHIVE_PARAMS_PIPELINE=0, or host_convert)."""
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import kernel as msm_kernel

    sec = q.lay.sections[q.section]
    g = "g1" if sec.kind == 1 else "g2"
    w = sec.width
    cuda = loader.driver()
    load = msm_kernel(f"{g}_load_bases")  # whichever MSM module holds it since the split
    check = (loader.get_function(loader.load_module("subgroup"), f"{g}_check_points")
             if q.points == "full" else None)
    convert = loader.get_function(loader.load_module("params"), f"{g}_load_file_points")
    idx, chunk = q.index, q.chunk
    rows = min(chunk, max(q.n, 1))
    host = np.empty((rows, w), dtype=np.uint8)
    word = np.zeros(1, dtype=np.uint64)
    NONE = 0xFFFFFFFFFFFFFFFF

    def flag(dev) -> int:
        cuda.memcpy_dtoh(word, dev.ptr)
        return int(word[0])

    spent = {"read_s": 0.0, "upload_s": 0.0, "device_s": 0.0, "bytes": 0}
    t_all = time.perf_counter()

    with open_regular(q.lay.path) as f, \
            DeviceBuffer(host.nbytes, what=f"{q.section} file chunk") as filebuf, \
            DeviceBuffer(host.nbytes, what=f"{q.section} xy chunk") as xy, \
            DeviceBuffer(max(4 * rows, 8), what=f"{q.section} density chunk") as dens, \
            DeviceBuffer(8, what="bad point index") as bad:
        for v0 in range(0, q.n, chunk):
            v1 = min(q.n, v0 + chunk)
            k = v1 - v0
            j0, j1 = (v0, v1) if idx is None else map(int, _bounds(idx, v0, v1))
            m = j1 - j0
            if q.host_convert:
                host[:k] = 0
                pts = read_section(f, q.lay, q.section, points="none", lo=j0, hi=j1,
                                   range_check=False)
                if idx is None:
                    host[:k] = pts
                else:
                    host[idx[j0:j1] - v0] = pts
                xy.upload(host[:k])
            else:
                t = time.perf_counter()
                f.seek(sec.offset(j0))
                view = memoryview(host[:m].reshape(-1))
                if f.readinto(view) != m * w:
                    _fail(q.lay, sec, j0, "truncated")
                zero = np.flatnonzero(~host[:m].any(axis=1))
                if len(zero):  # all zeros is the identity in our layout: the device would take it
                    _fail(q.lay, sec, j0 + int(zero[0]), ZERO_FILLED.format(g=g.upper()))
                t1 = time.perf_counter()
                if m:
                    filebuf.upload(host[:m])
                t2 = time.perf_counter()
                spent["read_s"] += t1 - t
                spent["upload_s"] += t2 - t1
                spent["bytes"] += m * w
                t_dev = t2
                cuda.memset_d32(bad.ptr, 0xFFFFFFFF, 2)
                if idx is not None:
                    cuda.memset_d32(xy.ptr, 0, k * w // 4)   # the identity where density has none
                    if m:
                        dens.upload(np.ascontiguousarray(idx[j0:j1]))
                if m:
                    with loader.guard(kernel=f"{g}_load_file_points", shape=m):
                        convert(np.int64(m), np.uintp(filebuf.ptr),
                                np.uintp(dens.ptr if idx is not None else 0), np.int64(v0),
                                np.uintp(xy.ptr), np.uintp(bad.ptr), block=(128, 1, 1),
                                grid=(-(-m // 128), 1))
                if flag(bad) != NONE:
                    _fail(q.lay, sec, j0 + int(word[0]), "a flag bit is set (the point at "
                          "infinity, or a compressed or sort flag) (found on the device)")
            if check is not None:  # gpu/kernels/subgroup.cu: [r] P == O, every point
                cuda.memset_d32(bad.ptr, 0xFFFFFFFF, 2)
                with loader.guard(kernel=f"{g}_check_points", shape=k):
                    check(np.int64(k), np.uintp(xy.ptr), np.int32(2), np.uintp(bad.ptr),
                          block=(128, 1, 1), grid=(-(-k // 128), 1))
                if flag(bad) != NONE:
                    v = v0 + (int(word[0]) >> 2)
                    j = v if idx is None else int(_bounds(idx, v)[0])
                    _fail(q.lay, sec, j, _REASONS[int(word[0]) & 3].format(g=g.upper())
                          + " (found on the device)")
            cuda.memset_d32(bad.ptr, 0xFFFFFFFF, 2)
            with loader.guard(kernel=f"{g}_load_bases", shape=k):
                load(np.int64(k), np.uintp(xy.ptr), np.uintp(buffer.ptr + w * v0),
                     np.uintp(bad.ptr), block=(128, 1, 1), grid=(-(-k // 128), 1))
            if flag(bad) != NONE:
                v = v0 + int(word[0])
                j = v if idx is None else int(_bounds(idx, v)[0])
                _fail(q.lay, sec, j, f"a coordinate not below p, or not on the {g.upper()} curve "
                                        "(found on the device)")
            if not q.host_convert:
                spent["device_s"] += time.perf_counter() - t_dev
    spent["s"] = time.perf_counter() - t_all
    _log_fill(q, spent)


def device_rows(bases, lo: int, hi: int, *, encoded: bool = False) -> np.ndarray:
    """Rows lo..hi of a resident base set (gpu.cuda.msm.DeviceBases: Montgomery affine) in our
    layout, through gpu/kernels/params.cu ``store_bases`` (``encoded``: in the file's encoding,
    ``store_file_points``): for writing a key made on the device."""
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer

    g = bases.group.name
    w = 96 if g == "g1" else 192
    k = hi - lo
    out = np.empty((k, w), dtype=np.uint8)
    fn = loader.get_function(loader.load_module("params"),
                             f"{g}_store_file_points" if encoded else f"{g}_store_bases")
    with DeviceBuffer(max(k * w, 8), what="stored bases") as buf:
        with loader.guard(kernel=f"{g}_store_bases", shape=k):
            fn(np.int64(k), np.uintp(bases._bases.ptr + w * lo), np.uintp(buf.ptr),
               block=(128, 1, 1), grid=(max(1, -(-k // 128)), 1))
        buf.download(out)
    return out
