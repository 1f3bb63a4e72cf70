"""The compact, replicated matrices resident on the device, and the kernels over them
(gpu/kernels/compact.cu over compact.cuh; host arrays from gpu/native/compact.py).

    mats = DeviceCompactR1CS(cr)        # cr: A, B, C as synthesis.compact Replicated/CompactMatrix
    mats.spmv("a", z_buf, out_buf)      # out = A z  (canonical, one thread a row)
    mats.spmv_t("a", L_buf, out_buf)    # out = A^T L (setup)
    expand_assignment(blob, n, z_buf)   # z from a compact assignment blob, on the device

sdr-32g: 130.7 M rows, 727.6 M nonzeros, held as ~0.3 GiB (header + one challenge block + the
column map) instead of 29.8 GiB of full CSR.
"""
from __future__ import annotations

import contextlib
import threading
import weakref

import numpy as np

from gpu.cuda import loader
from gpu.cuda.memory import DeviceBuffer
from gpu.errors import GpuError
from gpu.native import compact as host

BLOCK = 256
_ARRAYS = ("h_ptr", "h_col", "h_coef", "b_ptr", "b_col", "b_coef", "table")
_T_ARRAYS = ("piece_lo", "piece_ptr", "bt_row", "bt_coef", "gcol", "ht_ptr", "ht_row", "ht_coef")
_KERNELS = ("rep_spmv", "rep_spmv_long", "rep_spmv_planes", "rep_spmv_long_planes",
            "rep_spmv_t_pieces", "rep_spmv_t_gather", "rep_spmv_t_header", "fr_add_into")


def _grid(n: int, block: int = BLOCK) -> tuple:
    return (max(1, -(-int(n) // block)), 1)


def _u(b) -> np.uintp:
    return np.uintp(b.ptr)


def module():
    return loader.load_module("compact")


class DeviceCompactR1CS:
    """A, B, C of one circuit in compact form on the current device (``transposed``: also the
    CSC parts the setup's A^T L reads, freed by ``drop_transposed``)."""

    def __init__(self, cr, *, transposed: bool = False):
        self.num_vars = 1 + int(cr.num_public) + int(cr.num_aux)
        self.num_public = int(cr.num_public)
        self.parts = {k: host.parts(getattr(cr, k), f"matrix {k.upper()}") for k in "abc"}
        for k, p in self.parts.items():
            host.check_columns(p, self.num_vars, f"matrix {k.upper()}")
        rows = {p["rows"] for p in self.parts.values()}
        if len(rows) != 1:
            raise host.CompactFormError(f"matrices A, B, C have {sorted(rows)} rows")
        self.rows = rows.pop()
        self._mod = module()
        self._f = {k: loader.get_function(self._mod, k) for k in _KERNELS}
        self.buffers: list[DeviceBuffer] = []
        self.dev: dict[str, dict] = {}
        self.tdev: dict[str, dict] = {}
        try:
            shared = {}
            for k, p in self.parts.items():
                d = {name: self._up(p[name], f"matrix {k.upper()} {name}") for name in _ARRAYS}
                for name in ("base", "stride"):  # one column map for the three matrices
                    key = (name, p[name].ctypes.data, len(p[name]))
                    if key not in shared:
                        shared[key] = self._up(p[name], f"column map {name}")
                    d[name] = shared[key]
                # rows of more than REP_LONG terms: a warp each (rep_spmv_long)
                lh, lb = host.long_rows(p)
                d["long_h"] = self._up(lh, f"matrix {k.upper()} long header rows")
                d["long_b"] = self._up(lb, f"matrix {k.upper()} long block rows")
                d["nlong"] = (len(lh), len(lb))
                self.dev[k] = d
            if transposed:
                for k, p in self.parts.items():
                    t = host.transpose(p)
                    self.tdev[k] = {name: self._up(t[name], f"matrix {k.upper()}^T {name}", keep=False)
                                    for name in _T_ARRAYS}
                    self.tdev[k]["ncols"] = len(t["gcol"])
                    self.tdev[k]["npieces"] = t["npieces"]
        except Exception:
            self.free()
            raise

    def export(self, table) -> dict:
        """These matrices for another process (gpu/cuda/memory.py ExportTable): each device
        array's allocation by name; the host parts the kernels' sizes come from are rebuilt by
        ``attach`` from the importer's own circuit (cheap views), not sent."""
        if self.tdev:
            raise GpuError("the transposed parts are the setup's: drop them before exporting")
        dev = {}
        for k, d in self.dev.items():
            dev[k] = {name: table.ref(d[name]) for name in (*_ARRAYS, "base", "stride",
                                                             "long_h", "long_b")}
            dev[k]["nlong"] = [int(x) for x in d["nlong"]]
        return {"num_vars": self.num_vars, "num_public": self.num_public, "rows": int(self.rows),
                "dev": dev}

    @classmethod
    def attach(cls, cr, entry: dict, table) -> "DeviceCompactR1CS":
        """The matrices ``export`` described, over its opened table, for circuit ``cr`` (whose
        host parts give every size; each mapped allocation must hold its array: a manifest of
        other matrices is refused). free() leaves the memory to its owner."""
        self = cls.__new__(cls)
        self.num_vars = 1 + int(cr.num_public) + int(cr.num_aux)
        self.num_public = int(cr.num_public)
        self.parts = {k: host.parts(getattr(cr, k), f"matrix {k.upper()}") for k in "abc"}
        self.rows = self.parts["a"]["rows"]
        if (entry.get("num_vars"), entry.get("num_public"), entry.get("rows")) != \
                (self.num_vars, self.num_public, self.rows):
            raise GpuError(f"manifest: matrices of {entry.get('rows')} rows, "
                           f"{entry.get('num_vars')} variables; the circuit has {self.rows}, "
                           f"{self.num_vars}")
        self._mod = module()
        self._f = {k: loader.get_function(self._mod, k) for k in _KERNELS}
        self.buffers, self.dev, self.tdev = [], {}, {}
        for k, p in self.parts.items():
            e = entry["dev"][k]
            lh, lb = host.long_rows(p)
            sizes = {**{name: p[name].nbytes for name in (*_ARRAYS, "base", "stride")},
                     "long_h": lh.nbytes, "long_b": lb.nbytes}
            d = {name: table.get(e[name], max(n, 8), f"matrix {k.upper()} {name}")
                 for name, n in sizes.items()}
            d["nlong"] = (len(lh), len(lb))
            if list(d["nlong"]) != list(e.get("nlong", ())):
                raise GpuError(f"manifest: matrix {k.upper()} has {e.get('nlong')} long rows, "
                               f"the circuit {list(d['nlong'])}")
            self.dev[k] = d
        return self

    def _up(self, arr: np.ndarray, what: str, keep: bool = True) -> DeviceBuffer:
        arr = np.ascontiguousarray(arr)
        b = DeviceBuffer(max(arr.nbytes, 8), what=what)
        (self.buffers if keep else self.__dict__.setdefault("_tbuffers", [])).append(b)
        if arr.nbytes:
            b.upload(arr)
        return b

    @staticmethod
    def estimate_bytes(cr) -> int:
        """Device bytes of the resident (non-transposed) matrices."""
        ps = [host.parts(getattr(cr, k)) for k in "abc"]
        same_map = all(p["base"].ctypes.data == ps[0]["base"].ctypes.data for p in ps)
        return sum(host.nbytes(p, with_map=not same_map or i == 0) for i, p in enumerate(ps))

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)

    def spmv(self, name: str, z: DeviceBuffer, out: DeviceBuffer, stream=None, *,
             planes: "AssignmentPlanes | None" = None) -> None:
        """out = M z: one thread a row, rows of more than REP_LONG terms a warp each. planes:
        z read from the compact assignment's planes on the device (expand_assignment's, kept)
        instead of from the expanded z (compact.cuh z_planes_t); the same product."""
        p, d = self.parts[name], self.dev[name]
        nh, nb = d["nlong"]
        tasks = nh + p["copies"] * nb
        brows = np.int64(max(p["brows"], 1))
        mat = (*(_u(d[k]) for k in _ARRAYS), _u(d["base"]), _u(d["stride"]))
        zargs = (_u(z),) if planes is None else planes.args()
        kind = "" if planes is None else "_planes"
        with loader.guard(kernel=f"rep_spmv{kind}", shape=(p["rows"], p["nnz"])):
            self._f[f"rep_spmv{kind}"](np.int64(p["rows"]), np.int64(p["hrows"]), brows, *mat,
                                       *zargs, _u(out), np.int32(1 if tasks else 0),
                                       block=(BLOCK, 1, 1), grid=_grid(p["rows"]), stream=stream)
            if tasks:
                self._f[f"rep_spmv_long{kind}"](
                    np.int64(tasks), np.int64(nh), np.int64(max(nb, 1)), _u(d["long_h"]),
                    _u(d["long_b"]), np.int64(p["hrows"]), brows, *mat, *zargs, _u(out),
                    block=(BLOCK, 1, 1), grid=_grid(32 * tasks), stream=stream)

    def long_rows(self, name: str) -> tuple[int, int]:
        """(header rows, rows in all copies) that the warp-a-row kernel computes."""
        nh, nb = self.dev[name]["nlong"]
        return nh, self.parts[name]["copies"] * nb

    def spmv_t(self, name: str, L: DeviceBuffer, out: DeviceBuffer, *, inputs: DeviceBuffer | None = None) -> None:
        """out (num_vars elements) = M^T L over the matrix's rows; ``inputs``: the QAP's input
        rows' Lagrange values, added to the first num_public + 1 elements (A only)."""
        p, d, t = self.parts[name], self.dev[name], self.tdev[name]
        cuda = loader.driver()
        with loader.guard(kernel="rep_spmv_t", shape=(p["rows"], p["nnz"])):
            cuda.memset_d32(out.ptr, 0, 8 * self.num_vars)
            nloc, copies, npc = len(p["base"]), p["copies"], t["npieces"]
            if nloc * copies and npc:
                # pieces of at most host.PIECE entries, one thread each, into scratch; then one
                # thread a (copy, column) sums its pieces (shared columns: every copy's)
                with DeviceBuffer(32 * copies * npc, what=f"matrix {name.upper()}^T pieces") as scratch:
                    self._f["rep_spmv_t_pieces"](
                        np.int64(copies * npc), np.int64(npc), np.int64(p["hrows"]),
                        np.int64(max(p["brows"], 1)), _u(t["piece_lo"]), _u(t["bt_row"]),
                        _u(t["bt_coef"]), _u(d["table"]), _u(L), _u(scratch),
                        block=(BLOCK, 1, 1), grid=_grid(copies * npc))
                    self._f["rep_spmv_t_gather"](
                        np.int64(copies * nloc), np.int64(nloc), np.int64(copies), np.int64(npc),
                        _u(t["piece_ptr"]), _u(d["base"]), _u(d["stride"]), _u(scratch), _u(out),
                        block=(BLOCK, 1, 1), grid=_grid(copies * nloc))
                    cuda.Context.synchronize()  # scratch is freed next
            if t["ncols"]:
                self._f["rep_spmv_t_header"](
                    np.int64(t["ncols"]), _u(t["gcol"]), _u(t["ht_ptr"]), _u(t["ht_row"]),
                    _u(t["ht_coef"]), _u(d["table"]), _u(L), _u(out),
                    block=(BLOCK, 1, 1), grid=_grid(t["ncols"]))
            if inputs is not None:
                k = self.num_public + 1
                self._f["fr_add_into"](np.int64(k), _u(inputs), _u(out), block=(BLOCK, 1, 1),
                                       grid=_grid(k))

    def row_terms(self, name: str, i: int):
        return host.row_terms(self.parts[name], i)

    def drop_transposed(self) -> None:
        for b in self.__dict__.pop("_tbuffers", []):
            b.free()
        self.tdev = {}

    def free(self) -> None:
        self.drop_transposed()
        for b in self.buffers:
            b.free()
        self.buffers = []


class _Staging:
    """The page-locked host buffer a compact assignment passes through on its way up, kept for
    the process's life (allocating ~90 MB of page-locked memory costs more than the copy) and
    grown when a larger blob comes; one proof at a time uses it (the lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.buf = None

    def get(self, nbytes: int) -> np.ndarray:
        if self.buf is None or self.buf.nbytes < nbytes:
            self.buf = None
            self.buf = loader.driver().pagelocked_empty(max(int(nbytes), 8), np.uint8)
        return self.buf[:nbytes]


_staging = _Staging()


class _StagingPool:
    """Page-locked buffers for assignments staged ahead of their proofs (StagedAssignment):
    one a staged assignment until its upload returns it; at most ``MAX`` in all (a prover
    stages one or two ahead), past which stage_assignment declines and the proof stages as
    before. Kept for the process's life, as _Staging's."""

    MAX = 4

    def __init__(self):
        self.lock = threading.Lock()
        self.free: list[np.ndarray] = []
        self.count = 0

    def take(self, nbytes: int) -> np.ndarray | None:
        with self.lock:
            for i, b in enumerate(self.free):
                if b.nbytes >= nbytes:
                    return self.free.pop(i)
            if self.count >= self.MAX and self.free:  # too small: replaced by a larger one
                self.free.pop(0)
                self.count -= 1
            if self.count >= self.MAX:
                return None
            self.count += 1
        try:
            return loader.driver().pagelocked_empty(max(int(nbytes), 8), np.uint8)
        except Exception:
            with self.lock:
                self.count -= 1
            raise

    def give(self, buf: np.ndarray) -> None:
        with self.lock:
            self.free.append(buf)


_pool = _StagingPool()
_no_lock = contextlib.nullcontext()


class StagedAssignment:
    """A compact assignment blob whose planes are already laid out in a page-locked buffer
    (planes_into: the checks, the word offsets), made ahead of its proof on another thread, so
    that the proof's upload stage is one copy and the expansion. Why: in the cluster the host
    side of the upload ran 48 ms a 32 GiB partition (20 ms on an idle host: the synthesis
    processes share the cores) while the device waited (docs/performance.md). The buffer goes
    back to the pool after the upload, or when the object is dropped unused."""

    is_staged_assignment = True

    def __init__(self, blob: bytes, num_vars: int, buf: np.ndarray, words: int, off: int,
                 total: int):
        self.blob, self.num_vars = blob, int(num_vars)
        self.words, self.off, self.total = int(words), int(off), int(total)
        self.host = buf[:total]
        self._release = weakref.finalize(self, _pool.give, buf)

    def release(self) -> None:
        """The page-locked buffer back to the pool (once; the planes are no longer readable)."""
        self._release()
        self.host = None


def stage_assignment(blob: bytes, num_vars: int) -> StagedAssignment | None:
    """The blob's planes laid out ahead in a pooled page-locked buffer (the backend's context
    current on the calling thread), or None where the pool has none to give (the proof then
    stages as before). A bad blob raises what planes_into raises (AssignmentError, or FieldError
    naming a value >= r by its index), as the proof would."""
    words, off, total = host.planes_layout(blob, num_vars)
    buf = _pool.take(total)
    if buf is None:
        return None
    try:
        host.planes_into(blob, num_vars, buf[:total])
    except Exception:
        _pool.give(buf)
        raise
    return StagedAssignment(blob, num_vars, buf, words, off, total)


class AssignmentPlanes:
    """A compact assignment's planes on the device, as expand_assignment uploads them (other
    words, one words, per-word offsets, the field elements), for products that read z from them
    (DeviceCompactR1CS.spmv's planes)."""

    def __init__(self, base: int, words: int, off: int, other: int):
        self.base, self.words, self.off, self.other = int(base), int(words), int(off), int(other)

    def args(self) -> tuple:
        b, w = self.base, self.words
        return np.uintp(b), np.uintp(b + 4 * w), np.uintp(b + 8 * w), np.uintp(b + self.off)


def planes_bytes(blob: bytes, num_vars: int) -> int:
    """The device bytes of a blob's planes (a buffer for expand_assignment's ``keep``)."""
    return max(host.planes_layout(blob, num_vars)[2], 8)


def expand_assignment(blob, num_vars: int, z: DeviceBuffer, *,
                      keep: DeviceBuffer | None = None) -> dict:
    """Fill z (num_vars canonical elements) from a compact assignment blob: the bit planes and
    the other values go up (n/4 + 32 m bytes: ~87 MB for filecoin-32g instead of 4.2 GB) and one
    thread an element expands them. The host side (checks, word offsets; planes_into, on every
    core) writes into a page-locked buffer, so one copy takes everything up: the stage "upload"
    of a 2^27 partition on the H200 took 122 ms with numpy's checks and four pageable copies,
    25 ms so. keep: the caller's buffer of planes_bytes() for the planes, left there (the
    products may read z from them: "planes" in the result), instead of a temporary one.
    Returns the blob's count of field elements ("other") for the MSM split. blob: the bytes, or
    a StagedAssignment (its planes laid out ahead: only the copy and the expansion here; its
    buffer goes back to the pool at the end)."""
    f = loader.get_function(module(), "expand_assignment")
    staged = blob if isinstance(blob, StagedAssignment) else None
    if staged is not None:
        if staged.host is None or staged.num_vars != num_vars:
            raise GpuError(f"staged assignment of {staged.num_vars} variables "
                           f"({'released' if staged.host is None else 'held'}) for {num_vars}")
        words, off, total = staged.words, staged.off, staged.total
    else:
        words, off, total = host.planes_layout(blob, num_vars)
    if keep is not None and keep.nbytes < total:
        raise GpuError(f"the planes need {total} bytes, the buffer given holds {keep.nbytes}")
    with (_no_lock if staged is not None else _staging.lock):
        if staged is not None:
            stage = staged.host
        else:
            stage = _staging.get(total)
            host.planes_into(blob, num_vars, stage)
        m = (total - off) // 32
        d = keep if keep is not None else \
            DeviceBuffer(max(total, 8), what="assignment planes and field elements")
        try:
            d.upload(stage)
            base = d.ptr
            with loader.guard(kernel="expand_assignment", shape=num_vars):
                f(np.int64(num_vars), np.uintp(base), np.uintp(base + 4 * words),
                  np.uintp(base + 8 * words), np.uintp(base + off), _u(z), block=(BLOCK, 1, 1),
                  grid=_grid(num_vars))
                loader.driver().Context.synchronize()  # the staging buffers are reused next
        finally:
            if keep is None:
                d.free()
            if staged is not None:
                staged.release()
    out = {"other": int(m)}
    if keep is not None:
        out["planes"] = AssignmentPlanes(keep.ptr, words, off, m)
    return out
