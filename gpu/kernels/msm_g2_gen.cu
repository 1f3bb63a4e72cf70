// G2: test and benchmark bases with known discrete logs (msm_points.cuh).
#include "msm_points.cuh"
MSM_KERNEL_GEN(g2, fq2_t)
