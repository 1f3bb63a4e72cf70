"""Parameter files (gpu/groth16/bellperson.py) and the device: a file's query streamed into a
resident base buffer, and a resident key's bases read back for writing (kernels:
gpu/kernels/params.cu, subgroup.cu; gpu/kernels/msm.cu ``load_bases``)."""
from __future__ import annotations

import logging
import time

import numpy as np

from gpu.groth16.bellperson import _REASONS, _fail, read_section

log = logging.getLogger(__name__)
#: seconds and bytes of the last ``fill`` of each section: {"h": {"read_s", "upload_s",
#: "device_s", "bytes", "s"}} (the prover's log; bench/params_up.py)
last_fill: dict = {}


def fill(q, buffer) -> None:
    """Stream the query into ``buffer`` (n points, Montgomery affine as the MSM kernels read
    them), ``q.chunk`` variables at a time: the chunk's points read from the file as they
    are, uploaded, turned into our layout and scattered by the density on the device
    (params.cu ``load_file_points``; with ``host_convert`` on the host instead: numpy,
    ~0.1 GB/s here against the disk's GB/s), then ``load_bases`` (Montgomery form, every
    point checked below p and on the curve) into the chunk's rows of ``buffer``; with
    points="full" subgroup.cu ``check_points`` ([r] P = O) first. Host memory: one chunk."""
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

    with open(q.lay.path, "rb") as f, \
            DeviceBuffer(host.nbytes, what=f"{q.section} file chunk") as filebuf, \
            DeviceBuffer(host.nbytes, what=f"{q.section} xy chunk") as xy, \
            DeviceBuffer(max(4 * rows, 8), what=f"{q.section} density chunk") as dens, \
            DeviceBuffer(8, what="bad point index") as bad:
        for v0 in range(0, q.n, chunk):
            v1 = min(q.n, v0 + chunk)
            k = v1 - v0
            j0, j1 = (v0, v1) if idx is None else map(int, np.searchsorted(idx, [v0, v1]))
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
                    j = v if idx is None else int(np.searchsorted(idx, v))
                    _fail(q.lay, sec, j, _REASONS[int(word[0]) & 3].format(g=g.upper())
                          + " (found on the device)")
            cuda.memset_d32(bad.ptr, 0xFFFFFFFF, 2)
            with loader.guard(kernel=f"{g}_load_bases", shape=k):
                load(np.int64(k), np.uintp(xy.ptr), np.uintp(buffer.ptr + w * v0),
                     np.uintp(bad.ptr), block=(128, 1, 1), grid=(-(-k // 128), 1))
            if flag(bad) != NONE:
                v = v0 + int(word[0])
                j = v if idx is None else int(np.searchsorted(idx, v))
                _fail(q.lay, sec, j, f"a coordinate not below p, or not on the {g.upper()} curve "
                                        "(found on the device)")
            if not q.host_convert:
                spent["device_s"] += time.perf_counter() - t_dev
    spent["s"] = time.perf_counter() - t_all
    last_fill[q.section] = spent
    log.info("section %s streamed to the device: %d points, %.2f GB in %.2f s (%.2f GB/s; read "
             "%.2f s, upload %.2f s, device %.2f s)", q.section, q.n, spent["bytes"] / 1e9,
             spent["s"], spent["bytes"] / 1e9 / max(spent["s"], 1e-9), spent["read_s"],
             spent["upload_s"], spent["device_s"])


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
