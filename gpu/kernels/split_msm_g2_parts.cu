// The split MSM's G2 folds and affine result (split_msm.cu's bodies; a module of its own).
#define SPLIT_MSM_G2_ONLY
#define SPLIT_MSM_G2_PARTS
#include "split_msm.cu"
