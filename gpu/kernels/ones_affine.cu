// The split MSM's 1s by chains of affine additions (msm_affine.cuh, "a long sum by chains of
// affine additions"), the G1 kernel; G2's in ones_affine_g2.cu (this file with ONES_G2: the
// modules compile in parallel). Driver: gpu/cuda/split_msm.py (_sum_ones), which then sums the
// An accumulators with the split's XYZZ kernels (g?_sum_ones over no list).
#include "curve_io.cuh"
#include "msm_affine.cuh"

typedef int64_t i64;

// Threads a block (gpu/affine_plan.py ONES_THREADS): the tree's shared memory is sized for it.
#define ONES_BT 128

// M points bases[lists[k]], k < M, into accs[0 .. An), An = gridDim.x BT W, in S steps (step 0
// loads, each later step adds one point an accumulator; S = ceil(M / An)). pre: An values.
// Lean: each step's additions a coordinate at a time (ones_apply's Lean), else points whole.
template <class F, bool Lean>
__device__ void ones_chains(i64 M, i64 S, int W, const uint32_t* lists,
                            const affine_t<F>* bases, affine_t<F>* accs, F* pre) {
    __shared__ __align__(16) uint32_t words[2 * ONES_BT * sizeof(F) / 4];
    F* tree = reinterpret_cast<F*>(words);  // heap: node i's children 2i, 2i + 1; leaves BT + t
    const i64 blk = blockIdx.x, BT = blockDim.x, t = threadIdx.x;
    const i64 An = (i64)gridDim.x * BT * W;
    const table_points<F> pts{bases, lists};
    ones_init<F>(blk, t, BT, W, M, pts, accs);
    for (i64 s = 1; s < S; s++) {
        store16(tree + BT + t, ones_prefix<F>(blk, t, BT, W, An, s, M, pts, accs, pre));
        block_tree_invert<F>(t, BT, tree);
        ones_apply<F, Lean>(blk, t, BT, W, An, s, M, pts, load16(tree + BT + t), pre, accs);
        __syncthreads();  // the tree is the next step's
    }
}

// A kernel NAME of the group's field F: the apply's form (LEAN) and the blocks an SM its
// registers are held to (MINB; __launch_bounds__'s second argument).
#define ONES_KERNEL(NAME, F, LEAN, MINB)                                                         \
    extern "C" __global__ void __launch_bounds__(ONES_BT, MINB)                                  \
    NAME(i64 M, i64 S, int W, const uint32_t* lists, const affine_t<F>* bases, affine_t<F>* accs, \
         F* pre) {                                                                               \
        ones_chains<F, LEAN>(M, S, W, lists, bases, accs, pre);                                  \
    }

#ifndef ONES_VARIANTS
#ifdef ONES_G2
ONES_KERNEL(g2_ones_chains, fq2_t, false, 1)
#else
ONES_KERNEL(g1_ones_chains, fq_t, false, 1)
#endif
#endif
