// Element-wise field kernels: the device side of the host test hooks (gpu/native host.cpp's
// fr_op / fq_op / fq2_op, same op numbers, same raw-limb semantics, so GPU == host on any
// input, non-canonical ones included), and the throughput probes of bench/gpu_ntt.py.
#include "field_ops.cuh"

extern "C" {

// out[i] = op(a[i], b[i]) on raw limbs; n elements of N limbs each.
__global__ void field_fr_op(int op, const fr_t* a, const fr_t* b, fr_t* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = field_op(op, a[i], b[i]);
}
__global__ void field_fq_op(int op, const fq_t* a, const fq_t* b, fq_t* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = field_op(op, a[i], b[i]);
}
// as fq2_op: 0..8 as above, 9 mul_by_xi, 10 conj, 11 dbl, 12 mul_lean, 13 sqr_lean
__global__ void field_fq2_op(int op, const fq2_t* a, const fq2_t* b, fq2_t* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fq2_field_op(op, a[i], b[i]);
}

// Fr multiplication throughput: each thread runs CHAINS independent chains of `iters`
// Montgomery products (x <- x * y), then folds them into out[i] so nothing is dead code.
__global__ void field_fr_mul_rate(const fr_t* a, fr_t* out, int iters) {
    const int CHAINS = 4;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    fr_t x[CHAINS], y = a[2 * i + 1];
    x[0] = a[2 * i];
#pragma unroll
    for (int c = 1; c < CHAINS; c++) x[c] = x[c - 1] + y;
    for (int k = 0; k < iters; k++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) x[c] = x[c] * y;
    fr_t r = x[0];
#pragma unroll
    for (int c = 1; c < CHAINS; c++) r = r + x[c];
    out[i] = r;
}

// The integer multiply-add rate the floors divide by: 8 independent mad.lo/mad.hi style
// 32x32 chains per thread (what a Montgomery product is made of).
__global__ void field_imad_rate(const unsigned* a, unsigned* out, int iters) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x[8], m = a[i] | 1u;
#pragma unroll
    for (int c = 0; c < 8; c++) x[c] = a[i] + c;
    for (int k = 0; k < iters; k++)
#pragma unroll
        for (int c = 0; c < 8; c++) x[c] = x[c] * m + (unsigned)c;
    unsigned r = 0;
#pragma unroll
    for (int c = 0; c < 8; c++) r ^= x[c];
    out[i] = r;
}

}  // extern "C"
