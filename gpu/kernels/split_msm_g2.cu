// The split MSM's G2 kernels (split_msm.cu's bodies; its own module so it compiles beside G1's).
#define SPLIT_MSM_G2_ONLY
#include "split_msm.cu"
