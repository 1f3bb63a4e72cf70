// The device setup's batched G2 fixed-base kernels (compact.cu's bodies): a module of their own,
// built beside compact.cu's (the G2 ones are the slow ones to compile). The one-inversion-a-point
// G2 kernel, ZKHIVE_SETUP_BATCH_AFFINE=0's, is in compact_g2_variants.cu: with it here this
// module was the precompile's critical path (66.3 s of ptxas on the H200's 16 CPUs).
#define COMPACT_G2_ONLY
#include "compact.cu"
