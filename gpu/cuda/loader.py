"""Compile the ``.cu`` modules of ``gpu/kernels`` once, cache the cubins, load them per context.

API (used by the NTT, MSM and prover drivers)::

    init_context(ordinal=0) -> context        # make the device's primary context current
    load_module("ntt") -> Module              # gpu/kernels/ntt.cu, compiled for this device
    get_function(module, "ntt_dif_pass") -> pycuda Function
    compile_cubin(path, arch) -> bytes        # no GPU needed: nvcc only (tests use this)

Why nvcc on the real file rather than ``pycuda.compiler.SourceModule``: SourceModule copies the
source into a temporary ``kernel.cu``, so compiler messages name the copy; compiling the file in
place (with ``gpu/kernels`` on the include path) makes every message name the real file and
line, and lets CPU-only machines (CI) build and check the kernels. The cubin is then loaded
through PyCUDA (``module_from_buffer``), once per CUDA context.

Cache key, in two parts: a digest of the module and the files it includes (transitively), the
target arch and the flags; then one of the compiler's version, so a cubin from another nvcc is
built again. Without nvcc any build of the same source loads (a warm cache copied to a worker
that has no toolkit). Cubins live in ``$ZKHIVE_CACHE_DIR/cubin`` (default
``~/.cache/zkhive/cubin``), written by rename so concurrent workers never read a partial file.
``NVCC`` overrides the compiler; ``ZKHIVE_NVCC_FLAGS`` adds flags (they enter the key).
"""
from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from arith.native import INCLUDE as FIELD_INCLUDE
from gpu.errors import GpuCompileError, GpuError, GpuLaunchError, GpuOutOfMemory, GpuUnavailable

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
#: where includes are looked for: the kernels' own folder, then the shared field headers
INCLUDE_DIRS = (KERNELS, FIELD_INCLUDE)
#: Flags every module is compiled with (the arch is added per device).
#: -split-compile=0: nvcc splits its optimizer over as many threads as it finds (the msm
#: module's cold build took 186 s on the 16-CPU device machine split; single-threaded, about 50
#: minutes on the 2-core dev machine). With 0 dev and the device built the same bytes (four
#: modules compared, 2026-12-04), but a thread count is not neutral: msm_g2_acc built with 2 and
#: with 16 differs in 4,174 bytes. Without the split (-split-compile=1) the cold build took 66.8 s
#: on the device against 46.1, and G2 2^21 accumulated in 70.7 ms against 71.2 (H200).
BASE_FLAGS = ("-O3", "-std=c++17", "--extra-device-vectorization", "-split-compile=0")

_modules: dict[tuple[int, str], "Module"] = {}
_lock = threading.Lock()
# nvcc's "file(line): error: text" and "file(line): catastrophic error: text"
_ERROR_RE = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?:catastrophic )?error\b[^:]*: "
                       r"(?P<msg>.*)$", re.M)


def cache_dir() -> Path:
    from arith.native import cache_dir as root
    return root("cubin")


def _flags(arch: str) -> list[str]:
    return [*BASE_FLAGS, f"-arch={arch}", *os.environ.get("ZKHIVE_NVCC_FLAGS", "").split()]


_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(path: Path) -> list[Path]:
    """``path`` and every file it includes with quotes, transitively (found beside the
    including file, in gpu/kernels or in arith/include): what the cubin depends on."""
    seen: dict[Path, None] = {}
    todo = [Path(path).resolve()]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen[f] = None
        for inc in _INCLUDE_RE.findall(f.read_text()):
            for base in (f.parent, *INCLUDE_DIRS):
                cand = (base / inc).resolve()
                if cand.is_file():
                    todo.append(cand)
                    break
    return sorted(seen)


def _nvcc() -> str | None:
    return os.environ.get("NVCC") or shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


_versions: dict[str, str] = {}


def nvcc_version() -> str:
    """The compiler's own version line ("Build cuda_13.0.r13.0/compiler.36424714_0"), "" without
    nvcc; part of the cache key, since two releases build different code from one source."""
    nvcc = _nvcc()
    if not nvcc:
        return ""
    if nvcc not in _versions:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            raise GpuUnavailable(f"{nvcc} --version failed ({e}): check the CUDA toolkit "
                                 "or set NVCC") from e
        _versions[nvcc] = (out.strip().splitlines() or [""])[-1]
    return _versions[nvcc]


def _key(path: Path, arch: str) -> str:
    h = hashlib.sha256()
    for src in sources(path):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    h.update(path.name.encode() + b"\0" + " ".join(_flags(arch)).encode())
    return h.hexdigest()[:20]


def _build_key() -> str:
    return hashlib.sha256(nvcc_version().encode()).hexdigest()[:8]


def module_path(name: str) -> Path:
    """gpu/kernels/<name>.cu; only names of files that exist there are accepted."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise GpuError(f"bad kernel module name {name!r}")
    path = KERNELS / f"{name}.cu"
    if not path.is_file():
        raise GpuError(f"no kernel module {path}")
    return path


def compile_cubin(path: Path, arch: str) -> bytes:
    """The cubin of ``path`` for ``arch`` (e.g. ``sm_90``), from the disk cache or from nvcc.

    Raises GpuCompileError naming the first error's file and line, GpuUnavailable without nvcc.
    """
    path = Path(path).resolve()
    stem = f"{path.stem}-{arch}-{_key(path, arch)}"
    nvcc = _nvcc()
    if not nvcc:
        built = sorted(cache_dir().glob(f"{stem}-*.cubin"), key=lambda p: p.stat().st_mtime)
        if built:
            return built[-1].read_bytes()
        raise GpuUnavailable(f"nvcc not found: cannot compile {path} (install the CUDA toolkit "
                             "or set NVCC)")
    out = cache_dir() / f"{stem}-{_build_key()}.cubin"
    if out.exists():
        return out.read_bytes()
    fd, tmp = tempfile.mkstemp(suffix=".cubin", dir=out.parent)
    os.close(fd)
    cmd = [nvcc, "-cubin", *_flags(arch), *(f"-I{d}" for d in INCLUDE_DIRS), "-o", tmp, str(path)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        os.unlink(tmp)
        log = res.stderr + res.stdout
        m = _ERROR_RE.search(log)
        if m:
            where = f"{m['file']}:{m['line']}"
            raise GpuCompileError(f"{where}: {m['msg'].strip()}", file=m["file"],
                                  line=int(m["line"]), log=log, kernel=path.name)
        raise GpuCompileError(f"{path}: nvcc failed:\n{log.strip()}", file=str(path), log=log,
                              kernel=path.name)
    os.replace(tmp, out)
    return out.read_bytes()


# --- the driver side (PyCUDA) -----------------------------------------------------------------

def driver():
    """pycuda.driver, initialised; GpuUnavailable when PyCUDA or the driver is missing."""
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise GpuUnavailable(f"PyCUDA is not installed ({e}): pip install 'zkhive[gpu]'") from e
    try:
        cuda.init()
    except Exception as e:  # pycuda.driver.Error, or a missing libcuda (RuntimeError/OSError)
        raise GpuUnavailable(f"CUDA driver failed to initialise: {e}") from e
    return cuda


def init_context(ordinal: int = 0):
    """Make device ``ordinal``'s primary context current on this thread and return it.

    Idempotent: a thread that already has a current context gets it back. The primary context
    is the one other CUDA libraries in the process (cupy, torch) share.
    """
    cuda = driver()
    try:
        ctx = cuda.Context.get_current()
        if ctx is not None:
            return ctx
        if not 0 <= ordinal < cuda.Device.count():
            raise GpuUnavailable(f"no CUDA device {ordinal} ({cuda.Device.count()} present)")
        ctx = cuda.Device(ordinal).retain_primary_context()
        ctx.push()
        atexit.register(_pop, ctx)
        return ctx
    except cuda.Error as e:
        raise GpuUnavailable(f"cannot open a context on device {ordinal}: {e}") from e


def _pop(ctx) -> None:
    try:
        ctx.pop()
    except Exception:  # already popped, or the driver is shutting down: nothing to release
        pass


def device_arch() -> str:
    """sm_XY of the current context's device."""
    cuda = driver()
    major, minor = cuda.Context.get_device().compute_capability()
    return f"sm_{major}{minor}"


def device_name() -> str:
    cuda = driver()
    return cuda.Context.get_device().name()


@dataclass
class Module:
    """A loaded kernel module: the PyCUDA module plus where it came from."""
    name: str
    path: Path
    arch: str
    raw: object  # pycuda.driver.Module
    context: int


def _context_handle() -> int:
    cuda = driver()
    ctx = cuda.Context.get_current()
    if ctx is None:
        raise GpuUnavailable("no current CUDA context: call gpu.cuda.loader.init_context() first")
    return ctx.handle


def load_module(name: str) -> Module:
    """gpu/kernels/<name>.cu, compiled for the current device, loaded once per context."""
    handle = _context_handle()
    with _lock:
        mod = _modules.get((handle, name))
        if mod is None:
            path = module_path(name)
            arch = device_arch()
            cubin = compile_cubin(path, arch)
            cuda = driver()
            try:
                raw = cuda.module_from_buffer(cubin)
            except cuda.Error as e:
                raise GpuLaunchError(f"loading {path.name} ({arch}) failed: {e}",
                                     kernel=path.name, device=device_name()) from e
            mod = _modules[(handle, name)] = Module(name, path, arch, raw, handle)
    return mod


def get_function(module: Module, name: str):
    """A kernel entry point (an ``extern "C" __global__`` name) of a loaded module."""
    cuda = driver()
    try:
        return module.raw.get_function(name)
    except cuda.Error as e:
        raise GpuError(f"{module.path.name} has no kernel {name!r}", kernel=name) from e


def translate(exc: Exception, *, kernel: str | None = None, shape: object = None) -> GpuError:
    """Map a pycuda.driver error to our hierarchy (the caller raises it ``from exc``)."""
    cuda = driver()
    dev = None
    try:
        dev = device_name()
    except Exception:  # the context itself may be gone after a fatal error
        pass
    if isinstance(exc, cuda.MemoryError) or "out of memory" in str(exc).lower():
        return GpuOutOfMemory(str(exc), device=dev, kernel=kernel, shape=shape)
    return GpuLaunchError(str(exc), device=dev, kernel=kernel, shape=shape)


class guard:
    """``with guard(kernel="ntt", shape=n): ...`` turns driver errors into GpuError subclasses."""

    def __init__(self, *, kernel: str | None = None, shape: object = None):
        self.kernel, self.shape = kernel, shape

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if ev is None or isinstance(ev, GpuError):
            return False
        try:
            import pycuda.driver as cuda
        except ImportError:
            return False
        if isinstance(ev, cuda.Error):
            raise translate(ev, kernel=self.kernel, shape=self.shape) from ev
        return False
