// The affine rounds' apply (msm_affine.cu's g1_pair_apply_table / g1_pair_apply) in the forms
// the benchmark compares with the default (ZKHIVE_MSM_APPLY_KERNEL, gpu/affine_plan.py
// apply_kernel): the chord a coordinate at a time (lean: pair_apply's Lean), and held to 5 blocks
// an SM of 128 threads (lean5: 96 registers, with spills; the default takes 120, 4 blocks).
// Compiled on first use, or by `python -m gpu.cuda.precompile --all`.
#include "curve_io.cuh"
#include "msm_affine.cuh"

typedef int64_t i64;
typedef affine_t<fq_t> g1a;

#define TID ((i64)blockIdx.x * blockDim.x + threadIdx.x)

#define APPLY_KERNELS(SUFFIX, MINB)                                                              \
    extern "C" __global__ void __launch_bounds__(128, MINB)                                      \
    g1_pair_apply_table_##SUFFIX(const unsigned long long* m, i64 T, int K, const uint32_t* src, \
                                 const g1a* bases, const uint32_t* vals, const fq_t* pre,        \
                                 const fq_t* itot, g1a* out) {                                   \
        i64 t = TID;                                                                             \
        if (t < T)                                                                               \
            pair_apply<fq_t, true>(t, (i64)*m, T, K, src, table_points<fq_t>{bases, vals}, pre, \
                                   itot, out);                                                   \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(128, MINB)                                      \
    g1_pair_apply_##SUFFIX(const unsigned long long* m, i64 T, int K, const uint32_t* src,       \
                           const g1a* pts, const fq_t* pre, const fq_t* itot, g1a* out) {        \
        i64 t = TID;                                                                             \
        if (t < T)                                                                               \
            pair_apply<fq_t, true>(t, (i64)*m, T, K, src, array_points<fq_t>{pts}, pre, itot,   \
                                   out);                                                         \
    }

APPLY_KERNELS(lean, 1)
APPLY_KERNELS(lean5, 5)
