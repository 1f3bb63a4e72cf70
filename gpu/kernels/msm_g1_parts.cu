// G1 partial-sum levels, replacing and adding into the buckets (msm_points.cuh).
#include "msm_points.cuh"
MSM_ACCUMULATE_PARTS(g1_accumulate_parts, fq_t, false)
MSM_ACCUMULATE_PARTS(g1_accumulate_parts_add, fq_t, true)
