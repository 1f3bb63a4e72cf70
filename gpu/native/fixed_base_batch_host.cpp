// Host build of gpu/kernels/fixed_base_batch.cuh (the device setup's fixed-base with batched
// affine conversion), written as canonical xy limbs to compare with setup_host.cpp's per-point one.
#include <stdint.h>
#include <vector>
#include "fixed_base_batch.cuh"

typedef int64_t i64;

template <class F>
static void run(i64 n, const uint32_t* table, const uint32_t* scalars, uint32_t* out) {
    const int L = 2 * coord_limbs<F>::N;
    std::vector<xyzz_t<F>> acc(n);
    std::vector<affine_t<F>> aff(n);
    for (i64 i = 0; i < n; i++) acc[i] = fixed_base_acc<F>(table, scalars + 8 * i);
    for (i64 lo = 0; lo < n; lo += FB_BATCH)
        fixed_base_batch_affine<F>(lo, lo + FB_BATCH < n ? lo + FB_BATCH : n, acc.data(), aff.data());
    for (i64 i = 0; i < n; i++) store_affine(aff[i], out + i * L);
}

extern "C" {
void host_fb_batch_g1(i64 n, const uint32_t* t, const uint32_t* s, uint32_t* o) { run<fq_t>(n, t, s, o); }
void host_fb_batch_g2(i64 n, const uint32_t* t, const uint32_t* s, uint32_t* o) { run<fq2_t>(n, t, s, o); }
}
