// G1 point kernels of the MSM other than the accumulations (msm_points.cuh).
#include "msm_points.cuh"
MSM_LOAD_BASES(g1, fq_t)
MSM_REDUCE(g1, fq_t)
