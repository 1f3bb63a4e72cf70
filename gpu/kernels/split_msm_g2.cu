// The split MSM's G2 ones-sum (split_msm.cu's bodies; its own module so it compiles beside G1's;
// split_msm_g2_parts.cu holds the rest of G2's).
#define SPLIT_MSM_G2_ONLY
#include "split_msm.cu"
