// G2's level-1 accumulation and the split MSM's G2 ones-sum with fewer live registers
// (the default; ZKHIVE_MSM_G2_LEAN=0 takes the others; gpu/cuda/msm.py, gpu/cuda/split_msm.py): the mixed addition in the
// order of xyzz_t::add_affine_lean, the first partial sum stored when its run ends, the next base
// prefetched into L1 rather than into registers (msm_core.cuh accumulate_range_lean). The
// others (msm_g2_acc.cu, split_msm_g2.cu) spill at 255 registers. On the H200 the 32 GiB
// partition takes 1,376.7 ms with these against 1,439.1 with those (docs/performance.md).
#include "msm_points.cuh"
MSM_ACCUMULATE_BASES_LEAN(g2_accumulate_bases_lean, fq2_t)

// split_msm.cu's sum_ones with the lean addition and an L1 prefetch of the next base.
template <class F>
__device__ void sum_ones_lean(i64 T, i64 M, const uint32_t* __restrict__ lists,
                              const affine_t<F>* __restrict__ bases, xyzz_t<F>* parts) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    i64 L = (M + T - 1) / T;
    i64 lo = t * L, hi = lo + L < M ? lo + L : M;
    xyzz_t<F> acc = xyzz_t<F>::identity();
    for (i64 k = lo; k < hi; k++) {
        if (k + 1 < hi) {
            const char* p = (const char*)(bases + (lists ? lists[k + 1] : k + 1));
            prefetch_l1(p);
            prefetch_l1(p + sizeof(affine_t<F>) - 1);
        }
        acc.add_affine_lean(bases[lists ? lists[k] : k], false);
    }
    parts[t] = acc;
}

extern "C" __global__ void g2_sum_ones_lean(i64 T, i64 M, const uint32_t* lists,
                                            const affine_t<fq2_t>* bases, xyzz_t<fq2_t>* parts) {
    sum_ones_lean<fq2_t>(T, M, lists, bases, parts);
}
