// G2: the per-window sums of the segments (msm_points.cuh).
#include "msm_points.cuh"
MSM_KERNEL_SUM(g2, fq2_t)
