// Device side of the CUDA prover backend, before the NTTs and MSMs: the evaluations of A z, B z,
// C z over the domain (sparse matrix-vector products against the resident matrices), the input
// rows of the QAP (qap.py), and the satisfiability check. All Fr values canonical.
#include "spmv.cuh"

// out[r] = <row r of the matrix, z>, one thread a row: R1CS rows are short (1-3 entries), so the
// per-row loop is balanced enough; the z gathers dominate and hit L2 for the shared variables.
extern "C" __global__ void qap_spmv(int64_t rows, const int64_t* __restrict__ indptr,
                                    const int64_t* __restrict__ indices,
                                    const uint32_t* __restrict__ coeffs,
                                    const uint32_t* __restrict__ z, uint32_t* __restrict__ out) {
    int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    fr_t v = spmv_row(indptr[r], indptr[r + 1], indices, coeffs, z);
#pragma unroll
    for (int i = 0; i < 8; i++) out[8 * r + i] = v.v[i];
}

// a[m + i] = z[i] for i < count: the rows "input_i * 0 = 0" that arkworks and bellperson append.
extern "C" __global__ void qap_place_inputs(int64_t m, int64_t count, const uint32_t* __restrict__ z,
                                            uint32_t* __restrict__ a) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
#pragma unroll
    for (int k = 0; k < 8; k++) a[8 * (m + i) + k] = z[8 * i + k];
}

// first[0] = min { i < m : a_i b_i != c_i }, left untouched when every constraint holds.
extern "C" __global__ void qap_first_unsatisfied(int64_t m, const uint32_t* __restrict__ a,
                                                 const uint32_t* __restrict__ b,
                                                 const uint32_t* __restrict__ c,
                                                 unsigned long long* first) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    // canonical a, b: (a * b) = a b R^-1, times R^2 again gives a b R^-1 R^2 R^-1 = a b
    fr_t ab = (fr_t::from_limbs(a + 8 * i) * fr_t::from_limbs(b + 8 * i)) * fr_t::r2();
    if (ab != fr_t::from_limbs(c + 8 * i)) atomicMin(first, (unsigned long long)i);
}
