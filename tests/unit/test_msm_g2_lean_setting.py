"""ZKHIVE_MSM_G2_LEAN (gpu.cuda.msm.g2_lean): G2's lean kernels on 1 or unset (the default), the others on 0,
anything else rejected naming the variable; the kernels it selects are in the module the
loader looks them up in (the GPU comparison: tests/gpu/test_msm_g2_lean.py)."""
from __future__ import annotations

import re

import pytest

from gpu.cuda.loader import KERNELS
from gpu.cuda.msm import g2_lean, module_of
from gpu.errors import GpuError


def test_the_setting_accepts_0_1_and_unset(monkeypatch):
    monkeypatch.delenv("ZKHIVE_MSM_G2_LEAN", raising=False)
    assert g2_lean() is True
    monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "0")
    assert g2_lean() is False
    monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "1")
    assert g2_lean() is True


@pytest.mark.parametrize("bad", ["yes", "2", "true"])
def test_the_setting_rejects_other_values(monkeypatch, bad):
    monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", bad)
    with pytest.raises(GpuError, match=f"ZKHIVE_MSM_G2_LEAN='{bad}': expected 0 or 1"):
        g2_lean()


def test_the_lean_kernels_are_in_their_module_and_precompiled_by_default():
    for name in ("g2_accumulate_bases_lean", "g2_sum_ones_lean"):
        mod = module_of(name)
        src = (KERNELS / f"{mod}.cu").read_text()
        assert re.search(rf"\b{name}\b", src), (name, mod)
        # the default kernels: python -m gpu.cuda.precompile builds them without --all
        assert not mod.endswith("_variants")
