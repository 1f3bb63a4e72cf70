"""GPU tests: marked ``gpu``, skipped (not failed) where PyCUDA or a CUDA device is missing.

``cuda_ctx`` opens the device's primary context once per session, after pytest has started
(never at import). ``TEST_NPOW`` bounds the largest NTT size the tests draw (default 20, as
sppark's tests do); the one 2^24 check is in test_ntt.py, skipped when ``TEST_NPOW`` < 24 and
``ZKHIVE_TEST_BIG`` is not set.
"""
from __future__ import annotations

import pytest


def _gpu_reason() -> str | None:
    try:
        import pycuda.driver as cuda
    except ImportError:
        return "PyCUDA is not installed"
    try:
        cuda.init()
        if cuda.Device.count() == 0:
            return "no CUDA device"
    except Exception as e:  # driver missing or broken
        return f"CUDA driver unavailable: {e}"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if it.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for it in gpu_items:
            it.add_marker(skip)


@pytest.fixture(scope="session")
def cuda_ctx():
    from gpu.cuda import loader
    return loader.init_context(0)
