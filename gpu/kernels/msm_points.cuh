// Pippenger MSM on the device, the point kernels: bodies templated over the coordinate field,
// instantiated as extern "C" kernels by the MSM_* macros below, one heavy kernel per .cu file
// (msm_g1.cu, msm_g1_acc.cu, ..., msm_g2_acc.cu) so that nvcc builds them in parallel (the one
// msm.cu of issue 13 took 215 s on 16 CPUs, one ptxas after the other). Driver: gpu/cuda/msm.py.
#pragma once
#include "curve_io.cuh"
#include "msm_core.cuh"

typedef int64_t i64;

// Canonical xy -> Montgomery affine; bad = smallest index of a point off the curve (or with a
// coordinate >= p).
template <class F>
__device__ void load_bases(i64 n, const uint32_t* raw, affine_t<F>* out, unsigned long long* bad) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int S = 2 * coord_limbs<F>::N;
    const uint32_t* p = raw + S * i;
    bool ok = coords_reduced<F>(p);
    affine_t<F> a = affine_t<F>::identity();
    if (ok) {
        a = load_affine<F>(p);
        ok = a.on_curve(curve_b((const F*)0));
    }
    if (!ok) {
        atomicMin(bad, (unsigned long long)i);
        a = affine_t<F>::identity();
    }
    out[i] = a;
}

// Level 1: T ranges over the M sorted digits (M read from the device: no host round trip).
template <class F, bool PREFETCH>
__device__ __forceinline__ void accumulate_bases(i64 T, const unsigned long long* m,
                                                 const uint32_t* keys, const uint32_t* vals,
                                                 const affine_t<F>* bases, xyzz_t<F>* buckets,
                                                 uint32_t* out_keys, xyzz_t<F>* out_parts) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    i64 M = (i64)*m, L = (M + T - 1) / T;
    if (L < 1) L = 1;
    base_source<F> src{bases, vals};
    accumulate_range<F, base_source<F>, PREFETCH>(t, L, M, keys, src, buckets, out_keys,
                                                  out_parts);
}

// Level 1 with fewer live registers (msm_core.cuh accumulate_range_lean; G2's lean variant).
template <class F>
__device__ __forceinline__ void accumulate_bases_lean(i64 T, const unsigned long long* m,
                                                      const uint32_t* keys, const uint32_t* vals,
                                                      const affine_t<F>* bases, xyzz_t<F>* buckets,
                                                      uint32_t* out_keys, xyzz_t<F>* out_parts) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    i64 M = (i64)*m, L = (M + T - 1) / T;
    if (L < 1) L = 1;
    base_source_lean<F> src{bases, vals};
    accumulate_range_lean<F>(t, L, M, keys, src, buckets, out_keys, out_parts);
}

template <class F>
__device__ void accumulate_parts(i64 T, i64 L, i64 M, const uint32_t* keys,
                                 const xyzz_t<F>* parts, xyzz_t<F>* buckets, uint32_t* out_keys,
                                 xyzz_t<F>* out_parts) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    part_source<F> src{parts};
    accumulate_range<F>(t, L, M, keys, src, buckets, out_keys, out_parts);
}

// Segment k = w S + j into seg[w row + off + j]; runs: the first level (first_run_out:
// the offsets left to the second level); null: the offsets added here, as the second level does.
template <class F>
__device__ void reduce_segments(int W, i64 B, i64 G, const xyzz_t<F>* buckets,
                                const uint32_t* counts, xyzz_t<F>* seg, xyzz_t<F>* runs,
                                i64 row, i64 off) {
    i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x, S = B / G;
    if (k >= W * S) return;
    i64 w = k / S, j = k % S;
    seg[w * row + off + j] = reduce_segment<F>((int)w, j, B, G, buckets, counts,
                                               runs ? first_run_out<F>(k, S, runs) : nullptr);
}

template <class F>
__device__ void sum_groups(i64 rows, i64 len, i64 g, const xyzz_t<F>* in, xyzz_t<F>* out) {
    i64 q = (len + g - 1) / g, k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= rows * q) return;
    out[k] = sum_group<F>(k / q, k % q, len, g, in);
}

// One thread: Horner over the window sums, then affine and canonical limbs.
template <class F>
__device__ void combine(int W, int c, const xyzz_t<F>* win, uint32_t* out) {
    if (blockIdx.x || threadIdx.x) return;
    store_affine<F>(combine_windows<F>(W, c, win).to_affine(), out);
}

// Test inputs with known discrete logs: P_i = A[i / m2] + B[i % m2] (affine, canonical out).
// m1 + m2 scalar multiplications on the host give m1 m2 distinct random-looking bases.
template <class F>
__device__ void gen_bases(i64 n, i64 m2, const affine_t<F>* A, const affine_t<F>* Bt,
                          uint32_t* out) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    xyzz_t<F> p = xyzz_t<F>::from_affine(A[i / m2]);
    p.add_affine(Bt[i % m2]);
    store_affine<F>(p.to_affine(), out + 2 * coord_limbs<F>::N * i);
}

// ---- entry points (G: g1 / g2, F: fq_t / fq2_t) ----------------------------------------------

// One macro a kernel (msm_g2*.cu: one module each, the G2 ones being the slow ones to build),
// and MSM_LOAD_BASES / MSM_REDUCE for a group's set in one module (msm_g1.cu).
#define MSM_KERNEL_LOAD(G, F)                                                                    \
    extern "C" __global__ void G##_load_bases(i64 n, const uint32_t* raw, affine_t<F>* out,      \
                                              unsigned long long* bad) {                         \
        load_bases<F>(n, raw, out, bad);                                                         \
    }
#define MSM_KERNEL_GEN(G, F)                                                                     \
    extern "C" __global__ void G##_gen_bases(i64 n, i64 m2, const affine_t<F>* A,                \
                                             const affine_t<F>* Bt, uint32_t* out) {             \
        gen_bases<F>(n, m2, A, Bt, out);                                                         \
    }
#define MSM_KERNEL_COMBINE(G, F)                                                                 \
    extern "C" __global__ void G##_combine(int W, int c, const xyzz_t<F>* win, uint32_t* out) {  \
        combine<F>(W, c, win, out);                                                              \
    }
#define MSM_LOAD_BASES(G, F) MSM_KERNEL_LOAD(G, F) MSM_KERNEL_GEN(G, F) MSM_KERNEL_COMBINE(G, F)

// Level 1 (NAME: the kernel's name; PREFETCH as in msm_core.cuh's accumulate_range).
#define MSM_ACCUMULATE_BASES(NAME, F, PREFETCH, BOUNDS)                                          \
    extern "C" __global__ void BOUNDS NAME(                                                      \
        i64 T, const unsigned long long* m, const uint32_t* keys, const uint32_t* vals,          \
        const affine_t<F>* bases, xyzz_t<F>* buckets, uint32_t* out_keys, xyzz_t<F>* out_parts) { \
        accumulate_bases<F, PREFETCH>(T, m, keys, vals, bases, buckets, out_keys, out_parts);    \
    }

#define MSM_ACCUMULATE_BASES_LEAN(NAME, F)                                                       \
    extern "C" __global__ void NAME(                                                             \
        i64 T, const unsigned long long* m, const uint32_t* keys, const uint32_t* vals,          \
        const affine_t<F>* bases, xyzz_t<F>* buckets, uint32_t* out_keys, xyzz_t<F>* out_parts) { \
        accumulate_bases_lean<F>(T, m, keys, vals, bases, buckets, out_keys, out_parts);         \
    }

#define MSM_ACCUMULATE_PARTS(NAME, F)                                                            \
    extern "C" __global__ void NAME(i64 T, i64 L, i64 M, const uint32_t* keys,                   \
                                    const xyzz_t<F>* parts, xyzz_t<F>* buckets,                  \
                                    uint32_t* out_keys, xyzz_t<F>* out_parts) {                  \
        accumulate_parts<F>(T, L, M, keys, parts, buckets, out_keys, out_parts);                 \
    }

#define MSM_KERNEL_REDUCE(G, F)                                                                  \
    extern "C" __global__ void G##_reduce_segments(int W, i64 B, i64 G_, const xyzz_t<F>* bk,    \
                                                   const uint32_t* counts, xyzz_t<F>* seg,       \
                                                   xyzz_t<F>* runs, i64 row, i64 off) {          \
        reduce_segments<F>(W, B, G_, bk, counts, seg, runs, row, off);                           \
    }
#define MSM_KERNEL_SUM(G, F)                                                                     \
    extern "C" __global__ void G##_sum_groups(i64 rows, i64 len, i64 g, const xyzz_t<F>* in,     \
                                              xyzz_t<F>* out) {                                  \
        sum_groups<F>(rows, len, g, in, out);                                                    \
    }
#define MSM_REDUCE(G, F) MSM_KERNEL_REDUCE(G, F) MSM_KERNEL_SUM(G, F)
