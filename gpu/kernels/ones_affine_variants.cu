// The 1s' chains (ones_affine.cu) in the forms the benchmark compares with the default
// (ZKHIVE_MSM_ONES_KERNEL, gpu/affine_plan.py ones_kernel): the apply a coordinate at a time
// (lean), and its registers held to more blocks an SM. Compiled on first use, or by
// `python -m gpu.cuda.precompile --all`.
#define ONES_VARIANTS
#include "ones_affine.cu"

ONES_KERNEL(g1_ones_chains_lean, fq_t, true, 1)
ONES_KERNEL(g1_ones_chains_lean5, fq_t, true, 5)
