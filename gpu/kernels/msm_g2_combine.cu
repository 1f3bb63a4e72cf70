// G2: the one-thread Horner combination (used without a host C++ compiler) (msm_points.cuh).
#include "msm_points.cuh"
MSM_KERNEL_COMBINE(g2, fq2_t)
