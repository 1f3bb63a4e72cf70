// Batched fixed-base scalar multiplication s_i * P for one base P: the queries of a proving key.
//
// The table holds, for each of the 32 byte-windows j of a scalar, the multiples k * 2^(8j) * P
// for k = 0..255 (affine, canonical xy limbs, k = 0 the identity), so s * P is the sum of 32 table
// points chosen by the scalar's bytes: 32 mixed additions and one inversion a point, no doublings.
// For G1 the table is 32 * 256 * 96 bytes = 768 KiB, for G2 1.5 MiB: both stay in L2.
#pragma once
#include "curve_io.cuh"

#define FIXED_BASE_WINDOWS 32
#define FIXED_BASE_ENTRIES 256

template <class F>
CURVE_FN affine_t<F> fixed_base_mul(const uint32_t* table, const uint32_t* scalar) {
    const int L = 2 * coord_limbs<F>::N;  // limbs of one affine point
    xyzz_t<F> acc = xyzz_t<F>::identity();
    for (int j = 0; j < FIXED_BASE_WINDOWS; j++) {
        uint32_t digit = (scalar[j / 4] >> (8 * (j % 4))) & 0xff;
        if (digit) acc.add_affine(load_affine<F>(table + (int64_t)(j * FIXED_BASE_ENTRIES + digit) * L));
    }
    return acc.to_affine();
}
