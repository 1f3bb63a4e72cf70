// Fixed-base multiplication with the affine conversion batched: s_i * P for one base P, as
// fixed_base.cuh computes it (32 mixed additions from the byte-window table), but the one
// inversion a point that to_affine costs (~570 Fq products, more than the additions) is shared by
// FB_BATCH consecutive points through Montgomery's trick: 1 inversion a range + 3 products a point.
//   pass 1 (fixed_base_acc): the XYZZ sum of each point, into a scratch buffer;
//   pass 2 (fixed_base_batch_affine): per range of FB_BATCH points, the prefix products of ZZZ
//   (kept in the output's x), one inversion, then back to front 1/ZZZ_i and x = X ZZ^2 / ZZZ^2,
//   y = Y / ZZZ (xyzz: x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2). Identity sums (ZZ = 0) count as 1 in
//   the products and come out as the identity (0, 0).
// Shared by the device kernels (compact.cu) and the host build (gpu/native/fixed_base_batch_host.cpp).
#pragma once
#include "fixed_base.cuh"

#define FB_BATCH 16

template <class F>
CURVE_FN xyzz_t<F> fixed_base_acc(const uint32_t* table, const uint32_t* scalar) {
    const int L = 2 * coord_limbs<F>::N;
    xyzz_t<F> acc = xyzz_t<F>::identity();
    for (int j = 0; j < FIXED_BASE_WINDOWS; j++) {
        uint32_t digit = (scalar[j / 4] >> (8 * (j % 4))) & 0xff;
        if (digit) acc.add_affine(load_affine<F>(table + (int64_t)(j * FIXED_BASE_ENTRIES + digit) * L));
    }
    return acc;
}

// out[i] (Montgomery affine, identity 0, 0) for i in [lo, hi) from acc[i].
template <class F>
CURVE_FN void fixed_base_batch_affine(int64_t lo, int64_t hi, const xyzz_t<F>* acc, affine_t<F>* out) {
    if (lo >= hi) return;
    F run = F::one();
    for (int64_t i = lo; i < hi; i++) {  // out[i].x = prod_{lo <= k < i} ZZZ_k
        out[i].x = run;
        if (!acc[i].is_identity()) run = run * acc[i].ZZZ;
    }
    F inv = run.inv();
    for (int64_t i = hi - 1; i >= lo; i--) {
        const xyzz_t<F> p = acc[i];
        if (p.is_identity()) {
            out[i] = affine_t<F>::identity();
            continue;
        }
        F izzz = inv * out[i].x;
        inv = inv * p.ZZZ;
        F izz = p.ZZ.sqr() * izzz.sqr();
        out[i].x = p.X * izz;
        out[i].y = p.Y * izzz;
    }
}
