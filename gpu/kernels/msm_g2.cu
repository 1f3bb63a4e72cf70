// G2 base loading (msm_points.cuh); the other G2 point kernels have a module each
// (msm_g2_gen.cu, msm_g2_combine.cu, msm_g2_reduce.cu, msm_g2_sum.cu, msm_g2_acc.cu,
// msm_g2_parts.cu): together in one module they took 176 s of ptxas on 16 CPUs.
#include "msm_points.cuh"
MSM_KERNEL_LOAD(g2, fq2_t)
