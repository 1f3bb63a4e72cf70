// G1 partial-sum levels (msm_points.cuh).
// The product's square here: ff_eo::mont_sqr's 2N words took this kernel, already at 255
// registers, from 66 / 44 bytes of spills a thread to 254 / 172 (ptxas, sm_90).
#define FF_SQR_MUL
#include "msm_points.cuh"
MSM_ACCUMULATE_PARTS(g1_accumulate_parts, fq_t)
