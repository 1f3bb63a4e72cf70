// Measured-slower variants of the level-1 accumulation, for bench/gpu_msm.py only (the
// precompile skips this module unless --all; the loader compiles it when a variant is asked for):
// G1 capped at 168 registers (3 blocks of 128 an SM; ZKHIVE_MSM_G1_LB=1) and G2 with the
// next-base prefetch (ZKHIVE_MSM_G2_PREFETCH=1).
#include "msm_points.cuh"
MSM_ACCUMULATE_BASES(g1_accumulate_bases_lb, fq_t, true, __launch_bounds__(128, 3))
MSM_ACCUMULATE_BASES(g2_accumulate_bases, fq2_t, true, )
