// G2's kernel of ones_affine.cu (its own module: Fq2 code is what takes ptxas longest, and the
// modules compile in parallel).
#define ONES_G2
#include "ones_affine.cu"
