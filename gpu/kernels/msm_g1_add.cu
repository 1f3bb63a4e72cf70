// G1 level-1 bucket accumulation adding into the buckets (the chunked dense MSM: every chunk
// of one MSM into one set of buckets; msm_points.cuh).
#include "msm_points.cuh"
MSM_ACCUMULATE_BASES(g1_accumulate_bases_add, fq_t, true, true, )
