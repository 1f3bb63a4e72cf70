// BLS12-381 G1/G2 types and the conversions between the xy encoding (arkworks'
// to_xy_bytes_le: canonical little-endian x || y, G2 coordinates c0 then c1, identity all zero)
// and the Montgomery-form points the arithmetic uses. Shared by the kernels and the host build.
#pragma once
#include "fq2.cuh"
#include "curve.cuh"

typedef affine_t<fq_t> g1_affine_t;
typedef xyzz_t<fq_t> g1_xyzz_t;
typedef affine_t<fq2_t> g2_affine_t;
typedef xyzz_t<fq2_t> g2_xyzz_t;

// x < r for a canonical Fr scalar (8 x 32-bit limbs, little-endian): the MSM kernels' check of
// their scalars (msm.cu, msm_sort.cu, split_msm.cu).
CURVE_FN bool fr_canonical(const uint32_t* s) {
#pragma unroll
    for (int i = 7; i >= 0; i--) {
        if (s[i] < fr_params::mod(i)) return true;
        if (s[i] > fr_params::mod(i)) return false;
    }
    return false;
}

// 32-bit limbs per coordinate
template <class F> struct coord_limbs;
template <> struct coord_limbs<fq_t> { static constexpr int N = 12; };
template <> struct coord_limbs<fq2_t> { static constexpr int N = 24; };

CURVE_FN void store_limbs(const fq_t& a, uint32_t* p) {
#pragma unroll
    for (int i = 0; i < 12; i++) p[i] = a.v[i];
}
CURVE_FN void store_limbs(const fq2_t& a, uint32_t* p) { a.to_limbs(p); }
CURVE_FN fq_t load_limbs(const uint32_t* p, const fq_t*) { return fq_t::from_limbs(p); }
CURVE_FN fq2_t load_limbs(const uint32_t* p, const fq2_t*) { return fq2_t::from_limbs(p); }

// The curve constant b: 4 on G1, 4 (1 + u) on the twist for G2 (Montgomery form).
CURVE_FN fq_t curve_b(const fq_t*) {
    fq_t two = fq_t::one().dbl();
    return two.dbl();
}
CURVE_FN fq2_t curve_b(const fq2_t*) {
    fq_t four = fq_t::one().dbl().dbl();
    return fq2_t::make(four, four);
}

// Canonical xy limbs -> Montgomery affine point.
template <class F>
CURVE_FN affine_t<F> load_affine(const uint32_t* p) {
    const int N = coord_limbs<F>::N;
    affine_t<F> r;
    r.x = load_limbs(p, (const F*)0).to_mont();
    r.y = load_limbs(p + N, (const F*)0).to_mont();
    return r;
}
template <class F>
CURVE_FN void store_affine(const affine_t<F>& a, uint32_t* p) {
    const int N = coord_limbs<F>::N;
    store_limbs(a.x.from_mont(), p);
    store_limbs(a.y.from_mont(), p + N);
}
// Both coordinates < p (the field code assumes reduced inputs).
template <class F>
CURVE_FN bool coords_reduced(const uint32_t* p) {
    const int N = coord_limbs<F>::N;
    for (int k = 0; k < 2 * N; k += 12)
        if (fq_t::geq_mod(p + k)) return false;
    return true;
}
