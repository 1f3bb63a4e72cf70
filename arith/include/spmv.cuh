// One row of a CSR sparse matrix times a vector over Fr: the A z, B z, C z of the prover.
// Shared by the host library (gpu/native/host.cpp) and the device kernels (prover.cu).
//
// Inputs and output are canonical (not Montgomery). For c, z canonical, the Montgomery product
// c * z = c z R^-1, so the row sums the unit-coefficient terms directly (most R1CS coefficients
// are 1: no multiplication at all) and the others as c z R^-1, then moves that partial sum back
// with one more product by R^2: (sum c z R^-1) R^2 R^-1 = sum c z.
#pragma once
#include "fr.cuh"

FF_FN bool fr_limbs_are_one(const uint32_t* p) {
    uint32_t acc = p[0] ^ 1u;
#pragma unroll
    for (int i = 1; i < 8; i++) acc |= p[i];
    return acc == 0;
}

FF_FN fr_t spmv_row(int64_t lo, int64_t hi, const int64_t* indices, const uint32_t* coeffs,
                    const uint32_t* z) {
    fr_t plain = fr_t::zero(), mont = fr_t::zero();
    bool any_mont = false;
    for (int64_t k = lo; k < hi; k++) {
        fr_t zk = fr_t::from_limbs(z + 8 * indices[k]);
        const uint32_t* ck = coeffs + 8 * k;
        if (fr_limbs_are_one(ck)) {
            plain += zk;
        } else {
            mont += fr_t::from_limbs(ck) * zk;
            any_mont = true;
        }
    }
    if (any_mont) plain += mont * fr_t::r2();
    return plain;
}
