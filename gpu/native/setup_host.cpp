// Host build of the fixed-base multiplication (gpu/kernels/fixed_base.cuh), for the CPU tests of
// the code the GPU setup runs, and as an OpenMP CPU path for key generation.
#include <stdint.h>
#include "fixed_base.cuh"

typedef int64_t i64;

template <class F>
static void run(i64 n, const uint32_t* table, const uint32_t* scalars, uint32_t* out) {
    const int L = 2 * coord_limbs<F>::N;
#pragma omp parallel for schedule(static)
    for (i64 i = 0; i < n; i++) store_affine(fixed_base_mul<F>(table, scalars + 8 * i), out + i * L);
}

extern "C" {
void host_fixed_base_g1(i64 n, const uint32_t* t, const uint32_t* s, uint32_t* o) { run<fq_t>(n, t, s, o); }
void host_fixed_base_g2(i64 n, const uint32_t* t, const uint32_t* s, uint32_t* o) { run<fq2_t>(n, t, s, o); }
}
