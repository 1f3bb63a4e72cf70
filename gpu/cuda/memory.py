"""Device and page-locked host buffers with deterministic lifetimes.

VRAM is never left to the garbage collector: every buffer is a context manager (or is freed
explicitly), and an allocation failure becomes :class:`gpu.errors.GpuOutOfMemory` naming the size.

    with DeviceBuffer(n * 32, what="ntt data") as d, pinned((n, 4), np.uint64) as host:
        ...
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from gpu.cuda.loader import driver, translate
from gpu.errors import GpuError, GpuOutOfMemory


class DeviceBuffer:
    """``nbytes`` of device memory; ``.ptr`` is the device address (int) kernels take.
    ``DeviceBuffer.live`` / ``.peak``: bytes this process holds in DeviceBuffers now / at most
    since ``reset_peak()`` (benchmarks report the peak beside the ledger's plan)."""

    live = 0
    peak = 0
    #: the counters are updated from more than one thread (a load's tail engines are made on
    #: a thread beside its sections: gpu/backends/cuda.py ``_warm_beside``)
    _count = threading.Lock()

    @classmethod
    def reset_peak(cls) -> None:
        cls.peak = cls.live

    def __init__(self, nbytes: int, *, what: str = "buffer"):
        if nbytes <= 0:
            raise GpuError(f"{what}: cannot allocate {nbytes} bytes")
        cuda = driver()
        self.nbytes, self.what = int(nbytes), what
        try:
            self._alloc = cuda.mem_alloc(self.nbytes)
        except cuda.Error as e:
            free, total = cuda.mem_get_info()
            raise GpuOutOfMemory(f"{what}: allocating {self.nbytes} bytes failed "
                                 f"({free} of {total} free): {e}", shape=self.nbytes) from e
        with DeviceBuffer._count:
            DeviceBuffer.live += self.nbytes
            DeviceBuffer.peak = max(DeviceBuffer.peak, DeviceBuffer.live)

    @property
    def ptr(self) -> int:
        if self._alloc is None:
            raise GpuError(f"{self.what}: used after free")
        return int(self._alloc)

    def upload(self, host: np.ndarray, stream=None) -> None:
        """Copy a C-contiguous host array of at most nbytes (async when pinned and a stream)."""
        self._check(host)
        cuda = driver()
        try:
            if stream is None:
                cuda.memcpy_htod(self.ptr, host)
            else:
                cuda.memcpy_htod_async(self.ptr, host, stream)
        except cuda.Error as e:
            raise translate(e, kernel=f"upload {self.what}", shape=host.shape) from e

    def download(self, host: np.ndarray, stream=None) -> np.ndarray:
        self._check(host)
        cuda = driver()
        try:
            if stream is None:
                cuda.memcpy_dtoh(host, self.ptr)
            else:
                cuda.memcpy_dtoh_async(host, self.ptr, stream)
        except cuda.Error as e:
            raise translate(e, kernel=f"download {self.what}", shape=host.shape) from e
        return host

    def _check(self, host: np.ndarray) -> None:
        if not host.flags.c_contiguous or host.nbytes > self.nbytes:
            raise GpuError(f"{self.what}: host array of {host.nbytes} bytes does not fit "
                           f"{self.nbytes} (or is not contiguous)")

    @property
    def alive(self) -> bool:
        """Allocated by this object and not freed (a view or a freed buffer: False)."""
        return self._alloc is not None

    def free(self) -> None:
        if self._alloc is not None:
            self._alloc.free()
            self._alloc = None
            with DeviceBuffer._count:
                DeviceBuffer.live -= self.nbytes

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()


class BufferPool:
    """One proof's buffers kept for the next proof of the same key (``tag``): the same sizes,
    so each ``take`` finds its buffer and no proof waits on cuMemAlloc / cuMemFree (at 2^27 z,
    a, b, c and the index lists are ~17 GiB: ~33 ms to allocate and ~7 ms to free, with the
    device idle, on the H200). A buffer's contents are whatever the last proof left, as after
    cuMemAlloc: every reader writes before it reads. Not thread-safe: the owner (the CUDA
    backend) serialises it; the owner books what it keeps (gpu/budget.py, ``pooled``)."""

    def __init__(self):
        self.tag = None
        self._bufs: list[DeviceBuffer] = []

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._bufs)

    def __len__(self) -> int:
        return len(self._bufs)

    def take(self, nbytes: int, what: str) -> DeviceBuffer | None:
        """A kept buffer of exactly ``nbytes`` made for ``what``, out of the pool; None: none."""
        for i, b in enumerate(self._bufs):
            if b.nbytes == nbytes and b.what == what:
                return self._bufs.pop(i)
        return None

    def fill(self, tag, bufs) -> int:
        """Keep the live ones of ``bufs`` (the pool must be empty); returns their bytes."""
        if self._bufs:
            raise GpuError(f"buffer pool of {tag!r} filled while it holds {len(self._bufs)} buffers")
        self.tag, self._bufs = tag, [b for b in bufs if b.alive]
        return self.nbytes

    def drain(self) -> list[DeviceBuffer]:
        """Everything kept, out of the pool (the caller frees it)."""
        out, self._bufs, self.tag = self._bufs, [], None
        return out


@contextmanager
def pinned(shape, dtype=np.uint64):
    """A page-locked host array (fast, truly asynchronous copies), freed on exit."""
    cuda = driver()
    try:
        arr = cuda.pagelocked_empty(shape, dtype)
    except cuda.Error as e:
        raise GpuOutOfMemory(f"pinned host buffer {shape} {np.dtype(dtype)}: {e}",
                             shape=shape) from e
    try:
        yield arr
    finally:
        arr.base.free()


def is_pinned(arr: np.ndarray) -> bool:
    """True when ``arr`` (or the array it views) lives in PyCUDA page-locked memory."""
    cuda = driver()
    base = arr
    while base is not None:
        if isinstance(base, getattr(cuda, "HostAllocation", ())):
            return True
        base = getattr(base, "base", None)
    return False


class DeviceView(DeviceBuffer):
    """A window into another DeviceBuffer (no allocation of its own, never freed by itself)."""

    def __init__(self, parent: DeviceBuffer, offset: int, nbytes: int, what: str = "view"):
        self._parent, self._offset = parent, int(offset)
        self.nbytes, self.what, self._alloc = int(nbytes), what, None

    @property
    def ptr(self) -> int:
        return self._parent.ptr + self._offset

    def free(self) -> None:
        pass


# -- sharing a buffer with another process (CUDA IPC) ----------------------------------------------
#
# A handle names a whole cudaMalloc allocation, so only DeviceBuffers are exported (a DeviceView
# travels as its allocation and an offset: ``export_view``). The exporting process keeps the
# memory; an importer maps it (IpcBuffer) and unmaps it on free(). A process cannot open its own
# handles (CUDA refuses): the holder exports, provers import.

def ipc_handle(buf: DeviceBuffer) -> str:
    """The CUDA IPC handle of ``buf``'s allocation, hex (64 bytes: JSON-able)."""
    if isinstance(buf, DeviceView):
        raise GpuError(f"{buf.what}: a view has no IPC handle of its own (export its allocation)")
    cuda = driver()
    try:
        return bytes(cuda.mem_get_ipc_handle(buf.ptr)).hex()
    except cuda.Error as e:
        raise translate(e, kernel=f"ipc handle of {buf.what}", shape=buf.nbytes) from e


def export_buffer(buf: DeviceBuffer) -> dict:
    """{"handle", "nbytes", "what"}: what ``IpcBuffer.open`` needs."""
    return {"handle": ipc_handle(buf), "nbytes": int(buf.nbytes), "what": str(buf.what)}


class IpcBuffer(DeviceBuffer):
    """Another process's allocation mapped into this one (``open``): ``.ptr`` is the mapped
    address; ``free()`` unmaps it (the exporter keeps the memory). Not counted in
    ``DeviceBuffer.live``: this process did not allocate it."""

    HANDLE_BYTES = 64

    def __init__(self, handle: str, nbytes: int, what: str = "imported buffer"):
        self.nbytes, self.what, self._alloc = int(nbytes), str(what), None
        try:
            raw = bytes.fromhex(handle)
        except (TypeError, ValueError):
            raw = b""
        if len(raw) != self.HANDLE_BYTES or self.nbytes <= 0:
            raise GpuError(f"{what}: not a CUDA IPC handle of {self.HANDLE_BYTES} bytes and a "
                           f"positive size (handle of {len(raw)} bytes, {nbytes} bytes)")
        cuda = driver()
        try:
            self._alloc = cuda.IPCMemoryHandle(bytearray(raw))
        except cuda.Error as e:
            raise translate(e, kernel=f"open ipc handle of {what}", shape=self.nbytes) from e

    @classmethod
    def open(cls, entry: dict) -> "IpcBuffer":
        return cls(entry.get("handle", ""), entry.get("nbytes", 0), entry.get("what", "imported buffer"))

    def free(self) -> None:
        if self._alloc is not None:
            try:
                self._alloc.close()
            except driver().Error:
                pass  # the exporter died first: nothing left to unmap
            self._alloc = None


class ExportTable:
    """The allocations a manifest names, each once (matrices share their column map): ``ref``
    gives a buffer's index when exporting; ``opened`` / ``get`` map them when attaching."""

    def __init__(self):
        self.entries: list[dict] = []
        self._index: dict[int, int] = {}
        self.opened: list[IpcBuffer] = []

    def ref(self, buf: DeviceBuffer) -> int:
        i = self._index.get(id(buf))
        if i is None:
            i = self._index[id(buf)] = len(self.entries)
            self.entries.append(export_buffer(buf))
        return i

    @classmethod
    def open(cls, entries: list) -> "ExportTable":
        """Every allocation of a manifest mapped (all or none: a failure unmaps what opened)."""
        self = cls()
        if not isinstance(entries, list):
            raise GpuError("manifest: 'buffers' is not a list")
        try:
            for i, e in enumerate(entries):
                if not isinstance(e, dict):
                    raise GpuError(f"manifest: buffer {i} is not an object")
                self.opened.append(IpcBuffer.open(e))
        except Exception:
            self.close()
            raise
        return self

    def get(self, i, nbytes: int | None = None, what: str = "buffer") -> IpcBuffer:
        """Opened allocation ``i``, at least ``nbytes`` long (what the attaching side computed
        from its own host arrays: a manifest for other matrices is refused here)."""
        if not isinstance(i, int) or not 0 <= i < len(self.opened):
            raise GpuError(f"manifest: {what} names buffer {i!r}, there are {len(self.opened)}")
        b = self.opened[i]
        if nbytes is not None and b.nbytes < nbytes:
            raise GpuError(f"manifest: {what} (buffer {i}) has {b.nbytes} bytes, {nbytes} needed")
        return b

    def close(self) -> None:
        for b in self.opened:
            b.free()
        self.opened = []
