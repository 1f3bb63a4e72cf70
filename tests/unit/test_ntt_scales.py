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
from gpu.cuda.ntt import scale_kind, z_inv
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
        z_r2 = z_inv(log_n) * pow(2, 512, r) % r
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


# --- the radix-4 pass's twiddle indices (gpu/kernels/ntt.cu pass4), in Python -----------------
# The pass loads one twiddle for two pairs where it can, and skips the stage of bit 0 under
# trim. Both rest on index arithmetic that is checked here for every pass plan() makes, with
# the kernel's own formulas (tile_index, insert_zero, the groups' order): a sharing that
# breaks for some pass shape (it did, for the one-bit pass of 2^10) fails on the CPU.

def _tile_index(t: int, L: int, log_n: int, lo: int, kb: int, cb: int) -> int:
    nhi = log_n - lo - kb
    hi, mid = t & ((1 << nhi) - 1), t >> nhi
    low, m = L & ((1 << cb) - 1), L >> cb
    return (hi << (lo + kb)) | (m << lo) | (mid << cb) | low


def _insert_zero(k: int, s: int) -> int:
    return ((k >> s) << (s + 1)) | (k & ((1 << s) - 1))


def _tw(g: int, b: int) -> int:
    """ntt.cu twiddle(): the entry of stage b's table for the butterfly whose lower element is g."""
    return (1 << b) - 1 + (g & ((1 << b) - 1))


def _groups(kb: int, cb: int, dit: bool):
    """(width, sl) of each group of pass4, in the order the stages run."""
    top, single, groups = cb + kb - 1, kb & 1, (kb + 1) >> 1
    for gi in range(groups):
        first, last = gi == 0, gi == groups - 1
        if not dit:
            width = 1 if single and last else 2
            yield width, top - 2 * gi - (width - 1)
        else:
            width = 1 if single and first else 2
            yield width, cb + (0 if gi == 0 else 2 * gi - single)


def _pass_groups(log_n: int):
    """Every (pass, direction, group, tile, thread) of a transform of 2^log_n, tiles sampled."""
    from gpu.cuda.ntt import plan
    for lo, kb, cb in plan(log_n):
        T = 1 << (kb + cb)
        if T < 4:
            continue  # radix-2 (2^1): pass4 is not used
        Q, tiles = T // 4, 1 << (log_n - kb - cb)
        for dit in (False, True):
            for width, sl in _groups(kb, cb, dit):
                for t in sorted({0, 1 % tiles, tiles // 3, tiles - 1}):
                    for k in range(Q):
                        if width == 2:
                            L0 = _insert_zero(_insert_zero(k, sl), sl + 1)
                            L = [L0, L0 + (1 << sl), L0 + (2 << sl), L0 + (3 << sl)]
                        else:
                            a, b = _insert_zero(k, sl), _insert_zero(k + Q, sl)
                            L = [a, a + (1 << sl), b, b + (1 << sl)]
                        g = [_tile_index(t, x, log_n, lo, kb, cb) for x in L]
                        yield kb, width, lo + sl - cb, g


@pytest.mark.parametrize("log_n", range(2, 28))
def test_pass4_shares_a_twiddle_only_where_the_two_pairs_have_the_same(log_n):
    for kb, width, b0, g in _pass_groups(log_n):
        if width == 2 or kb > 1:  # where pass4 loads one twiddle for (0,1) and (2,3)
            assert _tw(g[0], b0) == _tw(g[2], b0), (log_n, kb, width, b0)
        if width == 2:  # the second stage's pairs (0,2) and (1,3), one bit up
            assert g[1] == g[0] + (1 << b0) and g[2] == g[0] + (2 << b0)
        if b0 == 0:     # trim's stage: bit 0's twiddle is entry 0 (w_2^0 = 1) for every pair,
            assert _tw(g[0], 0) == _tw(g[2], 0) == 0
            if width == 2:  # and bit 1's pair (0, 2) has entry 1 (w_4^0 = 1)
                assert _tw(g[0], 1) == 1 and _tw(g[1], 1) == 2


def test_the_one_bit_pass_of_2_10_needs_two_twiddles():
    """The case the sharing must leave out: at 2^10 the pass of bit 9 alone (kb = 1) gives its
    thread two pairs whose twiddles differ."""
    differs = [_tw(g[0], b0) != _tw(g[2], b0)
               for kb, width, b0, g in _pass_groups(10) if kb == 1]
    assert differs and any(differs)
