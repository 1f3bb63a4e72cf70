// Kernels of the batched fixed-base multiplication (fixed_base.cuh): one thread a scalar.
#include "fixed_base.cuh"

template <class F>
__device__ __forceinline__ void fixed_base_kernel(int64_t n, const uint32_t* __restrict__ table,
                                                  const uint32_t* __restrict__ scalars,
                                                  uint32_t* __restrict__ out) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int L = 2 * coord_limbs<F>::N;
    store_affine(fixed_base_mul<F>(table, scalars + 8 * i), out + i * L);
}

extern "C" __global__ void fixed_base_g1(int64_t n, const uint32_t* table, const uint32_t* scalars,
                                         uint32_t* out) {
    fixed_base_kernel<fq_t>(n, table, scalars, out);
}
extern "C" __global__ void fixed_base_g2(int64_t n, const uint32_t* table, const uint32_t* scalars,
                                         uint32_t* out) {
    fixed_base_kernel<fq2_t>(n, table, scalars, out);
}
