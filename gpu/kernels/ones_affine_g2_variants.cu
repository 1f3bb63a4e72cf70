// G2's forms of ones_affine_variants.cu (its own module: Fq2 code is what takes ptxas longest).
#define ONES_VARIANTS
#define ONES_G2
#include "ones_affine.cu"

ONES_KERNEL(g2_ones_chains_lean, fq2_t, true, 1)
ONES_KERNEL(g2_ones_chains_lean3, fq2_t, true, 3)
ONES_KERNEL(g2_ones_chains_whole3, fq2_t, false, 3)
