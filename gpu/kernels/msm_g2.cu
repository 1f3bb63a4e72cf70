// G2 point kernels of the MSM other than the accumulations (msm_points.cuh).
#include "msm_points.cuh"
MSM_LOAD_BASES(g2, fq2_t)
MSM_REDUCE(g2, fq2_t)
