"""Groth16 key generation on the device, straight into the resident bases (issue 16).

gpu/groth16/setup.py defines the key; this computes the same key (same trapdoor draw, so the
same seed gives the same verifying key, byte for byte, on either backend) without a host copy of
the proving key:

  L_i(tau), i < n                 setup_lagrange: c w^i / (tau - w^i), batch inversion per 64
  u = A^T L (+ input rows), v = B^T L, w = C^T L
                                  rep_spmv_t_*: over the compact, replicated matrices (one task a
                                  copy and block column; shared columns sum every copy)
  a, b_g1, b_g2 queries           fixed_base_acc_* + fixed_base_affine_*: u, v times G1 / G2
                                  (32 mixed additions a point, one inversion per 16 points:
                                  fixed_base_batch.cuh) into the Montgomery affine buffers the
                                  MSM kernels read (gpu/cuda/msm.py DeviceBases)
  l query                         setup_lincomb: (beta u + alpha v + w) / delta, then G1
  h query                         setup_powers: tau^i Z(tau) / delta into L's buffer, then G1
  gamma_abc (public, small)       on the host from the first num_public + 1 elements of u, v, w

The trapdoor (tau, alpha, beta, gamma, delta) exists only in this call's locals and, as Montgomery
constants, in kernel arguments; the device vectors derived from it are freed before returning.
With ``seed`` it is derived from the seed (gpu.groth16.setup.seeded_draw): a development
ceremony for tests and for several processes that must agree on one key; anyone who knows the
seed can forge proofs. Without a seed: fresh secure randomness.
"""
from __future__ import annotations

import os
import time

import numpy as np

from gpu.cuda import loader
from gpu.cuda.memory import DeviceBuffer, DeviceView
from gpu.native import compact as host

BLOCK = 256
FB_BLOCK = 128
FB_CHUNK = 1 << 23  # points a fixed-base launch (a few hundred ms each at most)
FB_BATCH = 16       # points sharing one inversion (gpu/kernels/fixed_base_batch.cuh)
#: the fixed-base with batched affine conversion (default) or one inversion a point (=0)
BATCH_AFFINE = os.environ.get("ZKHIVE_SETUP_BATCH_AFFINE", "1") != "0"


def _grid(n: int, block: int = BLOCK) -> tuple:
    return (max(1, -(-int(n) // block)), 1)


def domain_of(num_constraints: int, num_public: int) -> int:
    """gpu.groth16.qap.domain_size for the sizes alone."""
    need = num_constraints + num_public + 1
    return 1 << max(1, (need - 1).bit_length())


def temp_bytes(num_vars: int, n: int) -> int:
    """What the setup holds beside the resident key while it runs: L (reused for the h scalars),
    u, v, w, one matrix's partial sums of the transposed product (a piece per copy and column:
    about num_vars elements), the transposed block parts (~12 bytes a block nonzero) and tables."""
    return 32 * (n + 4 * num_vars) + (512 << 20) + FB_CHUNK * 384


def trapdoor(digest: bytes, n: int, seed: bytes | None):
    """(tau, alpha, beta, gamma, delta) in the order and with the rejection gpu.groth16.setup
    uses (tau redrawn while it lies in the domain: tau^n = 1)."""
    from synthesis import field
    from gpu.groth16.setup import _nonzero_random, seeded_draw
    draw = _nonzero_random if seed is None else seeded_draw(seed, digest)
    while True:
        tau = draw()
        if pow(tau, n, field.MODULUS) != 1:
            break
    return (tau, *(draw() for _ in range(4)))


def setup_on_device(backend, cr, *, seed: bytes | None = None, timer=None):
    """(ProvingKey with its queries on the device, VerifyingKey, Resident) for the compact
    circuit ``cr`` (``a``, ``b``, ``c`` compact, ``num_public``, ``num_aux``, ``digest()``).
    ``backend``: the CudaBackend whose context is current; the caller books the memory."""
    from py_arkworks_bls12381 import G1Point

    from arith import native
    from synthesis import field
    from gpu.cuda.compact import DeviceCompactR1CS
    from gpu.cuda.msm import DeviceBases
    from gpu.groth16 import curve
    from gpu.groth16.fixed_base import table
    from gpu.groth16.keys import ProvingKey, VerifyingKey

    r = field.MODULUS
    t0 = time.time()
    stages: dict[str, float] = {}

    def stage(name):
        loader.driver().Context.synchronize()
        stages[name] = time.time() - t0 - sum(stages.values())

    digest = cr.digest()
    npub, naux = int(cr.num_public), int(cr.num_aux)
    nv = 1 + npub + naux
    mats = DeviceCompactR1CS(cr, transposed=True)
    m = mats.rows
    n = domain_of(m, npub)
    stage("matrices")
    tau, alpha, beta, gamma, delta = trapdoor(digest, n, seed)
    mod, mod_g2 = loader.load_module("compact"), loader.load_module("compact_g2")
    f = {k: loader.get_function(mod_g2 if k.endswith("_g2") else mod, k) for k in (
        "setup_lagrange", "setup_powers", "setup_lincomb", "fixed_base_mont_g1",
        "fixed_base_acc_g1", "fixed_base_acc_g2", "fixed_base_affine_g1", "fixed_base_affine_g2")}
    if not BATCH_AFFINE:  # the slower G2 kernel lives in a module the precompile leaves out
        f["fixed_base_mont_g2"] = loader.get_function(loader.load_module("compact_g2_variants"),
                                                      "fixed_base_mont_g2")
    temps: list[DeviceBuffer] = []
    bases: dict[str, DeviceBases] = {}

    def buf(nbytes, what):
        b = DeviceBuffer(max(int(nbytes), 8), what=what)
        temps.append(b)
        return b

    def const(*vals):
        arr = np.concatenate([host.mont(v) for v in vals])
        b = buf(arr.nbytes, "setup constants")
        b.upload(arr)
        return b

    try:
        L = buf(32 * n, "setup Lagrange basis")
        w_, wi, tm, c = (const(x) for x in (field.root_of_unity(n), pow(field.root_of_unity(n), r - 2, r),
                                            tau, (pow(tau, n, r) - 1) * pow(n, r - 2, r) % r))
        with loader.guard(kernel="setup_lagrange", shape=n):
            f["setup_lagrange"](np.int64(n), np.int64(host.PER), np.uintp(w_.ptr), np.uintp(wi.ptr),
                                np.uintp(tm.ptr), np.uintp(c.ptr), np.uintp(L.ptr),
                                block=(BLOCK, 1, 1), grid=_grid(-(-n // host.PER)))
        stage("lagrange")
        u, v, w = (buf(32 * nv, f"setup {x}") for x in "uvw")
        mats.spmv_t("a", L, u, inputs=DeviceView(L, 32 * m, 32 * (npub + 1), "input rows"))
        mats.spmv_t("b", L, v)
        mats.spmv_t("c", L, w)
        mats.drop_transposed()
        stage("transposed products")
        pub = {}
        for name, b in (("u", u), ("v", v), ("w", w)):
            host_arr = np.zeros((npub + 1, 4), np.uint64)
            loader.driver().memcpy_dtoh(host_arr, b.ptr)  # the first elements of the vector
            pub[name] = host_arr
        # the h scalars tau^i Z(tau) / delta, i < n - 1, into L's buffer (L is no longer needed)
        dinv = pow(delta, r - 2, r)
        zt = (pow(tau, n, r) - 1) % r
        hx, hc = const(tau), const(zt * dinv % r)
        with loader.guard(kernel="setup_powers", shape=n - 1):
            f["setup_powers"](np.int64(n - 1), np.int64(host.PER), np.uintp(hx.ptr), np.uintp(hc.ptr),
                              np.uintp(L.ptr), block=(BLOCK, 1, 1), grid=_grid(-(-(n - 1) // host.PER)))
        g1, g2 = curve.g1(), curve.g2()
        tabs = {}
        for gname, gen in (("g1", g1), ("g2", g2)):
            t = table(gen)
            tabs[gname] = buf(t.nbytes, f"fixed-base table {gname}")
            tabs[gname].upload(t)
        stage("h scalars, tables")

        acc = buf(FB_CHUNK * 384, "fixed-base XYZZ sums") if BATCH_AFFINE else None

        def fixed_base(gname, scalars: DeviceBuffer, offset: int, count: int):
            width = 96 if gname == "g1" else 192
            fn = None if BATCH_AFFINE else f[f"fixed_base_mont_{gname}"]

            def fill(out: DeviceBuffer):
                for lo in range(0, count, FB_CHUNK):
                    k = min(FB_CHUNK, count - lo)
                    sp, op = np.uintp(scalars.ptr + 32 * (offset + lo)), np.uintp(out.ptr + width * lo)
                    with loader.guard(kernel=f"fixed_base_{gname}", shape=k):
                        if not BATCH_AFFINE:
                            fn(np.int64(k), np.uintp(tabs[gname].ptr), sp, op,
                               block=(FB_BLOCK, 1, 1), grid=_grid(k, FB_BLOCK))
                            continue
                        f[f"fixed_base_acc_{gname}"](np.int64(k), np.uintp(tabs[gname].ptr), sp,
                                                     np.uintp(acc.ptr), block=(FB_BLOCK, 1, 1),
                                                     grid=_grid(k, FB_BLOCK))
                        f[f"fixed_base_affine_{gname}"](np.int64(k), np.uintp(acc.ptr), op,
                                                        block=(FB_BLOCK, 1, 1),
                                                        grid=_grid(-(-k // FB_BATCH), FB_BLOCK))
            return fill

        bases["a_query"] = DeviceBases.filled_on_device(nv, "g1", fixed_base("g1", u, 0, nv))
        stage("a_query")
        bases["b_g1_query"] = DeviceBases.filled_on_device(nv, "g1", fixed_base("g1", v, 0, nv))
        stage("b_g1_query")
        bases["b_g2_query"] = DeviceBases.filled_on_device(nv, "g2", fixed_base("g2", v, 0, nv))
        stage("b_g2_query")
        consts = const(beta, alpha, dinv)
        with loader.guard(kernel="setup_lincomb", shape=nv):
            f["setup_lincomb"](np.int64(nv), np.uintp(u.ptr), np.uintp(v.ptr), np.uintp(w.ptr),
                               np.uintp(consts.ptr), np.uintp(w.ptr), block=(BLOCK, 1, 1), grid=_grid(nv))
        if naux:
            bases["l_query"] = DeviceBases.filled_on_device(naux, "g1", fixed_base("g1", w, npub + 1, naux))
        stage("l_query")
        bases["h_query"] = DeviceBases.filled_on_device(n - 1, "g1", fixed_base("g1", L, 0, n - 1))
        stage("h_query")
    except Exception:
        for b in bases.values():
            b.close()
        mats.free()
        raise
    finally:
        try:
            loader.driver().Context.synchronize()
        except Exception:
            pass
        for b in temps:
            b.free()

    # the verifying key and the host points of the proving key (small)
    k_pub = native.add(native.add(native.scale(pub["u"], beta), native.scale(pub["v"], alpha)), pub["w"])
    gamma_abc = native.scale(k_pub, pow(gamma, r - 2, r))
    vk = VerifyingKey(
        alpha_g1=g1 * curve.scalar(alpha), beta_g2=g2 * curve.scalar(beta),
        gamma_g2=g2 * curve.scalar(gamma), delta_g2=g2 * curve.scalar(delta),
        gamma_abc_g1=backend.fixed_base(g1, gamma_abc), circuit_digest=digest,
        num_aux=naux, num_constraints=m, domain_size=n)
    pk = ProvingKey(vk=vk, beta_g1=g1 * curve.scalar(beta), delta_g1=g1 * curve.scalar(delta),
                    a_query=None, b_g1_query=None, b_g2_query=None, h_query=None, l_query=None,
                    circuit_digest=digest, num_public=npub, num_aux=naux, num_constraints=m,
                    domain_size=n)
    pk.on_device = True
    del tau, alpha, beta, gamma, delta, dinv, zt  # the trapdoor goes with this frame
    stage("verifying key")
    assert isinstance(vk.alpha_g1, G1Point)
    return pk, vk, mats, bases, stages
