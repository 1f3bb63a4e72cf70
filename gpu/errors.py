"""Errors raised by the GPU layer; no raw ``pycuda.driver.Error`` escapes ``gpu/``.

Hierarchy (the task layer maps each leaf to *retry elsewhere* or *fail*)::

    GpuError                      anything that went wrong on or about a device
     +-- GpuUnavailable           no PyCUDA, no driver, no device: retry on another worker
     +-- GpuCompileError          a .cu module did not compile (names file:line): fail, it is a bug
     +-- GpuOutOfMemory           a device or pinned allocation failed: retry elsewhere / smaller
     +-- GpuLaunchError           a launch or the work it started failed: retry elsewhere
     +-- GpuInputError            bad sizes, shapes or non-canonical values: fail, the input is wrong
                                  (also a ValueError, so callers that validate input catch it)
          +-- MsmInputError       an MSM base off the curve, a scalar >= r (``index`` names it)

Every error carries ``device``, ``kernel`` and ``shape`` (any may be None) so a log line says
where it happened.
"""
from __future__ import annotations


class GpuError(RuntimeError):
    """Base of all GPU-layer errors."""

    def __init__(self, message: str, *, device: str | None = None, kernel: str | None = None,
                 shape: object = None):
        self.device, self.kernel, self.shape = device, kernel, shape
        where = ", ".join(f"{k}={v}" for k, v in
                          (("device", device), ("kernel", kernel), ("shape", shape)) if v is not None)
        super().__init__(f"{message} ({where})" if where else message)


class GpuUnavailable(GpuError):
    """PyCUDA is not installed, the driver failed to initialise, or there is no such device."""


class GpuCompileError(GpuError):
    """nvcc rejected a kernel module; ``file`` and ``line`` point at the first error."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 log: str = "", **kw):
        self.file, self.line, self.log = file, line, log
        super().__init__(message, **kw)


class GpuOutOfMemory(GpuError):
    """A device (or page-locked host) allocation failed."""


class GpuLaunchError(GpuError):
    """A kernel launch, a copy, or the device work behind them failed."""


class GpuInputError(GpuError, ValueError):
    """An input has the wrong size or shape, or holds a value that is not a canonical element."""


class MsmInputError(GpuInputError):
    """An MSM input is wrong: a base that is not on the curve, a scalar that is not canonical,
    or lengths that differ. ``index`` is the first bad element (None for a size mismatch)."""

    def __init__(self, message: str, *, index: int | None = None, **kw):
        self.index = index
        super().__init__(message, **kw)
