"""Device and page-locked host buffers with deterministic lifetimes.

VRAM is never left to the garbage collector: every buffer is a context manager (or is freed
explicitly), and an allocation failure becomes :class:`gpu.errors.GpuOutOfMemory` naming the size.

    with DeviceBuffer(n * 32, what="ntt data") as d, pinned((n, 4), np.uint64) as host:
        ...
"""
from __future__ import annotations

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

    def free(self) -> None:
        if self._alloc is not None:
            self._alloc.free()
            self._alloc = None
            DeviceBuffer.live -= self.nbytes

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()


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
