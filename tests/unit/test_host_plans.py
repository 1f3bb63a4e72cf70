"""The host-side decisions of the CUDA backend, on the CPU so CI runs them (the GPU tests that
also exercise them are skipped without a device): the split-MSM path choice
(gpu/cuda/split_msm.py ``mode``/``choose``), the chunk capacity and which queries get their own
workspace in the memory plan (gpu/budget.py), and the device setup's domain size against the
CPU prover's. (The NTT pass plan: tests/gpu/test_ntt_plan.py, not marked gpu, runs on the CPU.)"""
from __future__ import annotations

import pytest

from gpu.budget import ProofShape, chunk_capacity, tail_engine_bytes
from gpu.cuda import split_msm
from gpu.cuda.split_msm import DENSE_SHARE, choose, mode
from gpu.errors import GpuError

CAP = 1 << 10


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("ZKHIVE_SPLIT_MSM", raising=False)
    monkeypatch.delenv("ZKHIVE_SPLIT_CHUNK_LOG", raising=False)


def test_mode_reads_the_environment_and_refuses_other_values(monkeypatch):
    assert mode() == "auto"
    for m in ("auto", "on", "off", "dense"):
        monkeypatch.setenv("ZKHIVE_SPLIT_MSM", m)
        assert mode() == m
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "yes")
    with pytest.raises(GpuError,
                       match=r"^ZKHIVE_SPLIT_MSM='yes': expected auto, on, off or dense$"):
        mode()
    with pytest.raises(GpuError, match=r"^ZKHIVE_SPLIT_MSM='yes'"):
        choose(100, 0, 100, CAP)  # the chooser asks the mode first


def test_auto_keeps_dense_queries_that_fit_on_plain_pippenger():
    assert DENSE_SHARE == 0.05
    n = 1000
    boundary = int((1.0 - DENSE_SHARE) * n)  # 950: tail must be strictly more
    assert choose(n, 0, n, CAP) == "pippenger"               # no 0s or 1s at all
    assert choose(n, 0, boundary + 1, CAP) == "pippenger"    # 4.9% of 0s and 1s
    assert choose(n, 50, boundary, CAP) == "split"           # exactly 5%: worth splitting
    assert choose(n, 450, 100, CAP) == "split"               # a witness of mostly bits
    assert choose(n, 0, 0, CAP) == "split"                   # all zeros
    # dense but longer than one chunk: only the chunked (split) path serves it
    assert choose(CAP + 1, 0, CAP + 1, CAP) == "split"
    assert choose(CAP, 0, CAP, CAP) == "pippenger"


def test_on_always_splits_and_off_splits_only_what_does_not_fit(monkeypatch):
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "on")
    assert {choose(n, 0, n, CAP) for n in (1, CAP, CAP + 1)} == {"split"}
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "off")
    assert choose(CAP, CAP // 2, 0, CAP) == "pippenger"      # sparse, but told not to split
    assert choose(CAP + 1, 0, CAP + 1, CAP) == "split"       # too long for one workspace


def test_the_dense_engine_takes_dense_queries_longer_than_a_chunk(monkeypatch):
    """split_msm.dense_query: the choice SplitMsm.takes_dense makes for G1 (the prover then
    queues a dense witness's a, b_g1 and l behind H on the main stream)."""
    from gpu.cuda.split_msm import dense_query, max_dense_ones
    n = 10 * CAP
    boundary = int((1.0 - DENSE_SHARE) * n)
    assert dense_query(n, n, CAP)                     # every scalar full-size
    assert dense_query(n, boundary + 1, CAP)          # under 5% of 0s and 1s
    assert not dense_query(n, boundary, CAP)          # 5%: the split sums the bits
    assert not dense_query(CAP, CAP, CAP)             # fits one workspace: plain Pippenger
    # the 1s are one bucket's run, summed by one thread at the end: few of them, or the split
    m = 128 * CAP
    assert max_dense_ones(m) == 4096 and max_dense_ones(1 << 27) == 1 << 17
    assert dense_query(m, m - 4096, CAP, ones=4096)
    assert not dense_query(m, m - 4097, CAP, ones=4097)
    big = 1 << 27                                     # WindowPoSt's 32 GiB witness: 469,915 1s
    assert not dense_query(126_928_216, 125_236_954, 1 << 24, ones=469_915)
    assert dense_query(big, big - (1 << 17), 1 << 24, ones=1 << 17)
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "dense")   # the benchmark's forced path
    assert dense_query(n, 0, CAP, ones=n) and not dense_query(CAP, CAP, CAP)
    assert choose(n, 0, n, CAP) == "split"            # the base choice stays auto's
    for m in ("on", "off"):
        monkeypatch.setenv("ZKHIVE_SPLIT_MSM", m)
        assert not dense_query(n, n, CAP)


def test_the_chunk_capacity_decides_which_queries_get_a_workspace(monkeypatch):
    assert chunk_capacity("g1") == 1 << 24
    monkeypatch.setenv("ZKHIVE_SPLIT_CHUNK_LOG", "20")
    assert chunk_capacity("g1") == chunk_capacity("g2") == 1 << 20
    shape = ProofShape(num_vars=(1 << 20) + 5, num_aux=1 << 19, domain=1 << 21, matrix_bytes=1000)
    plan = shape.resident()
    # A, B queries (num_vars > capacity) and H (domain - 1 > capacity) go through chunks
    assert {k for k in plan if k.endswith("workspace")} == {"l_query workspace"}
    assert plan["g1 tail engine"] == tail_engine_bytes("g1", 1 << 20)  # min(longest, capacity)
    assert plan["g2 tail engine"] == tail_engine_bytes("g2", 1 << 20)
    assert plan["b_g2_query bases"] == ((1 << 20) + 5) * 192
    assert plan["h_query bases"] == ((1 << 21) - 1) * 96
    monkeypatch.setenv("ZKHIVE_SPLIT_CHUNK_LOG", "22")
    assert {k for k in shape.resident() if k.endswith("workspace")} == {
        "a_query workspace", "b_g1_query workspace", "b_g2_query workspace", "l_query workspace",
        "h_query workspace"}
    assert shape.resident()["g1 tail engine"] == tail_engine_bytes("g1", (1 << 21) - 1)


def test_tail_engines_grow_with_their_capacity_and_g2_costs_more():
    sizes = [tail_engine_bytes("g1", 1 << k) for k in (12, 16, 20, 24)]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4
    assert tail_engine_bytes("g2", 1 << 20) > tail_engine_bytes("g1", 1 << 20)


def test_device_setup_domain_equals_the_cpu_provers():
    from gpu.cuda.setup import domain_of
    from gpu.groth16.qap import domain_size

    class Sizes:  # what domain_size reads of an R1CS
        def __init__(self, m, p):
            self.num_constraints, self.num_public = m, p

    for m in (1, 2, 3, 7, 8, 1000, (1 << 20) - 6, (1 << 20) - 5, (1 << 20) - 4, 193_387):
        for p in (0, 1, 5, 273):
            assert domain_of(m, p) == domain_size(Sizes(m, p)), (m, p)
    assert domain_of((1 << 20) - 5, 4) == 1 << 20   # m + p + 1 = 2^20 exactly
    assert domain_of((1 << 20) - 4, 4) == 1 << 21


def test_split_msm_imports_without_a_device():
    """The chooser lives in a module that imports PyCUDA lazily: importable on any machine."""
    assert callable(split_msm.choose) and split_msm.BLOCK == 256
