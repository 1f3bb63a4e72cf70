// G2 level-1 bucket accumulation without the next-base prefetch: its 48 registers spill on
// top of the 96-register accumulator (msm_variants.cu holds the prefetching one; msm_points.cuh).
#include "msm_points.cuh"
MSM_ACCUMULATE_BASES(g2_accumulate_bases_np, fq2_t, false, )
