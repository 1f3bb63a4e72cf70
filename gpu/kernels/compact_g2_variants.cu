// The device setup's G2 fixed-base with one inversion a point (ZKHIVE_SETUP_BATCH_AFFINE=0, the
// measured-slower path the setup benchmark compares): compiled on first use, or by
// `python -m gpu.cuda.precompile --all`.
#define COMPACT_G2_MONT
#include "compact.cu"
