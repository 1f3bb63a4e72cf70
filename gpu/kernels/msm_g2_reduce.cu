// G2: the segmented window reduction (msm_points.cuh).
#include "msm_points.cuh"
MSM_KERNEL_REDUCE(g2, fq2_t)
