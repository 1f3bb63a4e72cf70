// G1 point kernels of the MSM other than the accumulations (msm_points.cuh).
#include "msm_points.cuh"
MSM_LOAD_BASES(g1, fq_t)
MSM_REDUCE(g1, fq_t)

// The precomputed MSM's tables (gpu/cuda/precomputed.py): acc[i] = 2^c src[i] in XYZZ (c
// doublings); compact.cu's fixed_base_affine_g1 (one inversion a range of points) turns acc
// into the next table, so table w holds 2^(c w) P_i.
extern "C" __global__ void g1_shift_bases(i64 n, int c, const affine_t<fq_t>* src,
                                          xyzz_t<fq_t>* acc) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    xyzz_t<fq_t> p = xyzz_t<fq_t>::from_affine(src[i]);
    for (int k = 0; k < c; k++) p = p.dbl();
    acc[i] = p;
}
