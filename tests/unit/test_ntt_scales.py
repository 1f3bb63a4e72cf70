"""The device compute_h's sequence of scales and products, modelled with Python integers.

gpu/kernels/ntt.cu keeps data canonical and multiplies by Montgomery constants, so every scale
kind's constant (gpu.cuda.ntt.scale_kind) must carry exactly the R factors the products around
it leave. The trimmed sequence (ZKHIVE_NTT_TRIM, the default) makes the pointwise step one
Montgomery product, a b R^-1, and moves Z(g)^-1 and that R onto the last inverse's scale
("inv_coset_h"); C's scale is a constant. Here the device's steps run as exact DFTs over Fr at
small sizes, with mont(x, y) = x y R^-1, and must give the host library's H, in both modes; a
step with the wrong constant must not. The device's own result is compared with the host's in
tests/gpu/test_ntt.py.
"""
from __future__ import annotations

import pytest

from arith import native
from gpu.cuda.ntt import scale_kind
from synthesis import field as fr

r = fr.MODULUS
R_INV = fr.inv((1 << 256) % r)


def dft(v: list[int], w: int) -> list[int]:
    n = len(v)
    return [sum(x * pow(w, i * j, r) for j, x in enumerate(v)) % r for i in range(n)]


def scaled(v: list[int], kind: str, log_n: int) -> list[int]:
    g, c = scale_kind(kind, log_n)
    return [x * c * pow(g, k, r) % r for k, x in enumerate(v)]


def device_h(a: list[int], b: list[int], c: list[int], log_n: int, trim: bool,
             last: str | None = None) -> list[int]:
    """compute_h_device's steps (gpu/cuda/ntt.py) in coefficient order: a's and b's inverse
    scaled by "h_pre", their forward transforms, the pointwise step, the inverse coset scaled
    by ``last`` (default: the mode's kind), minus C's coefficients scaled by "inv_z"."""
    n = 1 << log_n
    w = fr.root_of_unity(n)
    w_inv = fr.inv(w)
    ae, be = (dft(scaled(dft(v, w_inv), "h_pre", log_n), w) for v in (a, b))
    if trim:  # one Montgomery product: a b R^-1
        p = [x * y * R_INV % r for x, y in zip(ae, be)]
    else:     # mont(mont(a, b), Z^-1 R^2) = a b / Z
        z_r2 = scale_kind("inv_z", log_n)[1] * n % r * pow(2, 512, r) % r
        p = [x * y * R_INV % r * z_r2 * R_INV % r for x, y in zip(ae, be)]
    kind = last or ("inv_coset_h" if trim else "inv_coset")
    h = scaled(dft(p, w_inv), kind, log_n)
    cc = scaled(dft(c, w_inv), "inv_z", log_n)
    return [(x - y) % r for x, y in zip(h, cc)]


@pytest.mark.parametrize("trim", [True, False])
@pytest.mark.parametrize("log_n", [1, 3, 5])
def test_device_sequence_gives_the_host_h(log_n, trim):
    n = 1 << log_n
    a, b, c = (fr.vec_random(n) for _ in range(3))
    want = fr.vec_to_ints(native.compute_h(a, b, c))
    got = device_h(*(fr.vec_to_ints(v) for v in (a, b, c)), log_n, trim)
    assert got == want


@pytest.mark.parametrize("trim,wrong", [(True, "inv_coset"), (False, "inv_coset_h")])
def test_the_other_modes_last_scale_gives_another_h(trim, wrong):
    """The pointwise step and the last scale go together: either with the other's constant is
    wrong (the R and Z(g)^-1 that "inv_coset_h" carries are not optional)."""
    log_n = 3
    a, b, c = (fr.vec_random(1 << log_n) for _ in range(3))
    want = fr.vec_to_ints(native.compute_h(a, b, c))
    got = device_h(*(fr.vec_to_ints(v) for v in (a, b, c)), log_n, trim, last=wrong)
    assert got != want
