// Point checks for parameter files (gpu/groth16/bellperson.py), host and device: canonical
// coordinates, on the curve, and (mode 2) in the prime-order subgroup: [r] P == O, double and add
// over r's 255 bits, MSB first (255 doublings, 128 mixed additions). Slower than the endomorphism
// tests (Bowe 2019; Scott 2021) but with no constant to get wrong; the device runs it in seconds.
#pragma once
#include "curve_io.cuh"

// the BLS12-381 group order r, 32-bit limbs little-endian
CURVE_FN uint32_t group_order_limb(int i) {
    const uint32_t r[8] = {0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                           0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
    return r[i];
}

template <class F>
CURVE_FN bool in_subgroup(const affine_t<F>& p) {
    xyzz_t<F> acc = xyzz_t<F>::identity();
    for (int i = 254; i >= 0; i--) {
        acc = acc.dbl();
        if ((group_order_limb(i >> 5) >> (i & 31)) & 1) acc.add_affine(p);
    }
    return acc.is_identity();
}

// 0 fine; 1 a coordinate >= p; 2 not on the curve; 3 not in the subgroup. The identity (all
// zero) passes: the caller decides whether a section may hold it.
template <class F>
CURVE_FN int check_point(const uint32_t* p, int mode) {
    if (!coords_reduced<F>(p)) return 1;
    affine_t<F> a = load_affine<F>(p);
    if (a.is_identity()) return 0;
    if (!a.on_curve(curve_b((const F*)0))) return 2;
    if (mode >= 2 && !in_subgroup(a)) return 3;
    return 0;
}
