// The split MSM for 0/1-heavy witnesses (driver: gpu/cuda/split_msm.py).
//
// A StackedDRG witness is mostly bits: of the ~130 M scalars of a 32 GiB partition's L, A and
// B queries only 12 M, 12.5 M and 6 M are neither 0 nor 1. Pippenger over all n scalars still
// cuts every scalar into W digits, sorts n W keys and sizes its windows for n. Here:
//   1. split_classify: one pass over the scalars puts the indices of the 1s at the front of a
//      list and those of the other nonzero scalars ("the tail") at its back (warp-aggregated
//      atomics: one atomic per warp and class); zeros go nowhere.
//   2. g?_sum_ones: the bases of the 1s summed by T threads over equal ranges of that list
//      (one mixed addition each, the next gather issued before the current addition), then
//      g?_sum_parts folds the T partial sums 32 at a time and g?_store_point writes the affine
//      result; no digits, no sort, no buckets.
//   3. split_gather: the tail's scalars and (Montgomery affine) bases copied into compact
//      buffers, a chunk at a time, for the unchanged Pippenger kernels of msm.cu.
// The sums do not depend on the order the atomics give the lists.
#include "curve_io.cuh"

typedef int64_t i64;

#ifndef SPLIT_MSM_G2_ONLY
// lists[0 .. ones) = indices of scalars equal to 1; lists[n - 1 - j] for j < tail = indices of
// the other nonzero scalars; counts = (ones, tail); bad = smallest index of a scalar >= r (it is
// put in the tail, so Pippenger's histogram sees it too). Launch with whole warps.
extern "C" __global__ void split_classify(i64 n, const uint32_t* __restrict__ scalars,
                                          uint32_t* __restrict__ lists, unsigned int* counts,
                                          unsigned long long* bad) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    bool one = false, other = false;
    if (i < n) {
        const uint4* p = reinterpret_cast<const uint4*>(scalars + 8 * i);
        uint4 a = p[0], b = p[1];
        uint32_t s[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        uint32_t high = s[1] | s[2] | s[3] | s[4] | s[5] | s[6] | s[7];
        one = high == 0 && s[0] == 1;
        other = !one && (high | s[0]) != 0;
        if (!fr_canonical(s)) atomicMin(bad, (unsigned long long)i);
    }
    unsigned m1 = __ballot_sync(0xffffffffu, one), m2 = __ballot_sync(0xffffffffu, other);
    int lane = threadIdx.x & 31;
    unsigned below = (1u << lane) - 1;
    unsigned b1 = 0, b2 = 0;
    if (lane == 0) {
        if (m1) b1 = atomicAdd(counts, (unsigned)__popc(m1));
        if (m2) b2 = atomicAdd(counts + 1, (unsigned)__popc(m2));
    }
    b1 = __shfl_sync(0xffffffffu, b1, 0);
    b2 = __shfl_sync(0xffffffffu, b2, 0);
    if (one) lists[b1 + __popc(m1 & below)] = (uint32_t)i;
    if (other) lists[n - 1 - (b2 + __popc(m2 & below))] = (uint32_t)i;
}

// out_scalars[j], out_bases[j] = scalars[i], bases[i] for i = tail entry from + j, j < k.
// Group-agnostic: a base is words16 16-byte words (G1 affine 6, G2 12).
extern "C" __global__ void split_gather(i64 k, i64 from, i64 n, const uint32_t* __restrict__ lists,
                                        const uint4* __restrict__ scalars,
                                        const uint4* __restrict__ bases, int words16,
                                        uint4* __restrict__ out_scalars,
                                        uint4* __restrict__ out_bases) {
    i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    i64 i = lists[n - 1 - (from + j)];
    out_scalars[2 * j] = scalars[2 * i];
    out_scalars[2 * j + 1] = scalars[2 * i + 1];
    for (int w = 0; w < words16; w++) out_bases[j * words16 + w] = bases[i * words16 + w];
}

#endif  // SPLIT_MSM_G2_ONLY

// parts[t] = sum of bases[lists[k]] over range t of the M ones, T equal ranges; no lists: of
// bases[k] (the accumulators the 1s' affine chains leave, ones_affine.cu).
template <class F>
__device__ void sum_ones(i64 T, i64 M, const uint32_t* __restrict__ lists,
                         const affine_t<F>* __restrict__ bases, xyzz_t<F>* parts) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    i64 L = (M + T - 1) / T;
    i64 lo = t * L, hi = lo + L < M ? lo + L : M;
    xyzz_t<F> acc = xyzz_t<F>::identity();
    if (lo < hi) {
        affine_t<F> next = bases[lists ? lists[lo] : lo];
        for (i64 k = lo; k < hi; k++) {
            affine_t<F> cur = next;
            if (k + 1 < hi) next = bases[lists ? lists[k + 1] : k + 1];
            acc.add_affine(cur);
        }
    }
    parts[t] = acc;
}

// out[q] = sum of in[q g .. min((q + 1) g, len)).
template <class F>
__device__ void sum_parts(i64 len, i64 g, const xyzz_t<F>* in, xyzz_t<F>* out) {
    i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (q * g >= len) return;
    xyzz_t<F> acc = xyzz_t<F>::identity();
    i64 end = (q + 1) * g < len ? (q + 1) * g : len;
    for (i64 i = q * g; i < end; i++) acc.add(in[i]);
    out[q] = acc;
}

// One thread: in[0] as canonical xy limbs (identity all zero).
template <class F>
__device__ void store_point(const xyzz_t<F>* in, uint32_t* out) {
    if (blockIdx.x || threadIdx.x) return;
    store_affine<F>(in[0].to_affine(), out);
}

#define SPLIT_ENTRY_POINTS(G, F)                                                                 \
    /* 3 blocks of 128 an SM: the square's 2N words took it from 168 registers to 204 */      \
    extern "C" __global__ void __launch_bounds__(128, 3)                                         \
    G##_sum_ones(i64 T, i64 M, const uint32_t* lists, const affine_t<F>* bases,                  \
                 xyzz_t<F>* parts) {                                                             \
        sum_ones<F>(T, M, lists, bases, parts);                                                  \
    }                                                                                            \
    extern "C" __global__ void G##_sum_parts(i64 len, i64 g, const xyzz_t<F>* in,                \
                                             xyzz_t<F>* out) {                                   \
        sum_parts<F>(len, g, in, out);                                                           \
    }                                                                                            \
    extern "C" __global__ void G##_store_point(const xyzz_t<F>* in, uint32_t* out) {             \
        store_point<F>(in, out);                                                                 \
    }

// G1's entry points here, G2's in split_msm_g2.cu (g2_sum_ones) and split_msm_g2_parts.cu (the
// rest), which include this file with SPLIT_MSM_G2_ONLY (and SPLIT_MSM_G2_PARTS): modules that
// nvcc builds in parallel.
#if defined(SPLIT_MSM_G2_ONLY) && !defined(SPLIT_MSM_G2_PARTS)
extern "C" __global__ void g2_sum_ones(i64 T, i64 M, const uint32_t* lists,
                                       const affine_t<fq2_t>* bases, xyzz_t<fq2_t>* parts) {
    sum_ones<fq2_t>(T, M, lists, bases, parts);
}
#elif defined(SPLIT_MSM_G2_ONLY)  // split_msm_g2_parts.cu: the folds and the affine result
extern "C" __global__ void g2_sum_parts(i64 len, i64 g, const xyzz_t<fq2_t>* in,
                                        xyzz_t<fq2_t>* out) {
    sum_parts<fq2_t>(len, g, in, out);
}
extern "C" __global__ void g2_store_point(const xyzz_t<fq2_t>* in, uint32_t* out) {
    store_point<fq2_t>(in, out);
}
#else
SPLIT_ENTRY_POINTS(g1, fq_t)
#endif
