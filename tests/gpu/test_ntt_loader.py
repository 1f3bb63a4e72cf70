"""The kernel loader: compile errors point at the real file and line; cubins are cached."""
from __future__ import annotations

import shutil

import pytest

from gpu.cuda import loader
from gpu.errors import GpuCompileError, GpuError, GpuUnavailable

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@needs_nvcc
def test_compile_error_names_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "broken.cu"
    bad.write_text('#include "fr.cuh"\n\n__global__ void k(fr_t* a) {\n    a[0] = undefined_x;\n}\n')
    with pytest.raises(GpuCompileError) as e:
        loader.compile_cubin(bad, "sm_90")
    assert e.value.line == 4 and e.value.file.endswith("broken.cu")
    assert "undefined_x" in str(e.value) and "broken.cu:4" in str(e.value)


@needs_nvcc
def test_compile_is_cached_by_source_digest(tmp_path, monkeypatch):
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "ok.cu"
    src.write_text('#include "fr.cuh"\nextern "C" __global__ void k(fr_t* a) { a[0] = a[0] * a[1]; }\n')
    first = loader.compile_cubin(src, "sm_90")
    assert first[:4] == b"\x7fELF"
    cached = list((tmp_path / "cache" / "cubin").glob("ok-sm_90-*.cubin"))
    assert len(cached) == 1
    assert loader.compile_cubin(src, "sm_90") == first
    # an edit to the module misses the cache and gets its own entry
    src.write_text(src.read_text() + "// edited\n")
    loader.compile_cubin(src, "sm_90")
    assert len(list((tmp_path / "cache" / "cubin").glob("ok-*.cubin"))) == 2


@needs_nvcc
def test_another_nvcc_builds_again_and_no_nvcc_loads_any_build(tmp_path, monkeypatch):
    """A cubin is keyed by the compiler's version too (two releases build different code from
    one source); without nvcc a worker loads whichever build of the same source it has."""
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "ok.cu"
    src.write_text('#include "fr.cuh"\nextern "C" __global__ void k(fr_t* a) { a[0] = a[1]; }\n')
    first = loader.compile_cubin(src, "sm_90")
    assert first[:4] == b"\x7fELF"
    # the same toolkit under another version line: a wrapper that answers --version itself
    wrap = tmp_path / "nvcc-next"
    wrap.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "Build cuda_99.0"; exit 0; fi\n'
                    f'exec {shutil.which("nvcc")} "$@"\n')
    wrap.chmod(0o755)
    monkeypatch.setenv("NVCC", str(wrap))
    assert loader.nvcc_version() == "Build cuda_99.0"
    second = loader.compile_cubin(src, "sm_90")
    builds = sorted((tmp_path / "cache" / "cubin").glob("ok-sm_90-*.cubin"))
    assert len(builds) == 2 and len({b.name.rsplit("-", 1)[0] for b in builds}) == 1  # one source
    # no toolkit: a cached build serves, and an uncached module is refused by name
    monkeypatch.setattr(loader, "_nvcc", lambda: None)
    assert loader.compile_cubin(src, "sm_90") in (first, second)
    other = tmp_path / "new.cu"
    other.write_text(src.read_text())
    with pytest.raises(GpuUnavailable, match="nvcc not found: cannot compile .*new.cu"):
        loader.compile_cubin(other, "sm_90")


def test_key_covers_the_includes_only():
    deps = {p.name for p in loader.sources(loader.module_path("ntt"))}
    assert deps == {"ntt.cu", "fr.cuh", "ff.cuh", "ff_ptx.cuh", "params.cuh"}
    assert "fq2.cuh" in {p.name for p in loader.sources(loader.module_path("ntt_field"))}


def test_module_names_are_validated():
    with pytest.raises(GpuError, match="bad kernel module name"):
        loader.module_path("../etc/passwd")
    with pytest.raises(GpuError, match="no kernel module"):
        loader.module_path("does_not_exist")


@pytest.mark.gpu
def test_load_module_once_per_context(cuda_ctx):
    m1 = loader.load_module("ntt")
    m2 = loader.load_module("ntt")
    assert m1 is m2 and m1.arch.startswith("sm_")
    assert loader.get_function(m1, "ntt_dif_pass") is not None
    with pytest.raises(GpuError, match="no kernel"):
        loader.get_function(m1, "no_such_kernel")
