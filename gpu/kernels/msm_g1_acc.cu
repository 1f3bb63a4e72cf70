// G1 level-1 bucket accumulation, prefetching the next base (msm_points.cuh).
#include "msm_points.cuh"
MSM_ACCUMULATE_BASES(g1_accumulate_bases, fq_t, true, )
