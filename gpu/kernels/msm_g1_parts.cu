// G1 partial-sum levels (msm_points.cuh).
#include "msm_points.cuh"
MSM_ACCUMULATE_PARTS(g1_accumulate_parts, fq_t)
