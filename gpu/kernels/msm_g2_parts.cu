// G2 partial-sum levels (msm_points.cuh).
#include "msm_points.cuh"
MSM_ACCUMULATE_PARTS(g2_accumulate_parts, fq2_t)
