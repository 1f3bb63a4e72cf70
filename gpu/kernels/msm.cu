// Pippenger MSM on the device: thin extern "C" entry points over msm_core.cuh's per-thread
// steps (the host build runs the same bodies). Driver: gpu/cuda/msm.py, which documents the
// launch sequence and buffer sizes.
//
// Scalar-side kernels (digits, sort) do not depend on the group; the point kernels exist once
// per group, g1_* over Fq and g2_* over Fq2.
#include "curve_io.cuh"
#include "msm_core.cuh"

typedef int64_t i64;

// ---- scalars: digits, counting sort -------------------------------------------------------

// x < r for a canonical Fr scalar (8 limbs).
__device__ __forceinline__ bool fr_canonical(const uint32_t* s) {
#pragma unroll
    for (int i = 7; i >= 0; i--) {
        if (s[i] < fr_params::mod(i)) return true;
        if (s[i] > fr_params::mod(i)) return false;
    }
    return false;
}

__device__ __forceinline__ void load_scalar(const uint32_t* scalars, i64 i, uint32_t* s) {
    const uint4* p = reinterpret_cast<const uint4*>(scalars + 8 * i);
    uint4 a = p[0], b = p[1];
    s[0] = a.x; s[1] = a.y; s[2] = a.z; s[3] = a.w;
    s[4] = b.x; s[5] = b.y; s[6] = b.z; s[7] = b.w;
}

// Lanes of a warp that share a key count once (__match_any_sync): all-equal and 0/1-heavy
// scalars would otherwise serialise their atomics on a few counters.

// counts[w B + |d| - 1] += 1 for every nonzero digit; bad = smallest index of a scalar >= r.
extern "C" __global__ void msm_histogram(i64 n, const uint32_t* scalars, int c, uint32_t* counts,
                                         unsigned long long* bad) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    bool live = i < n;
    unsigned active = __ballot_sync(0xffffffffu, live);
    if (!live) return;
    uint32_t s[8];
    load_scalar(scalars, i, s);
    if (!fr_canonical(s)) atomicMin(bad, (unsigned long long)i);
    const int W = msm_windows(c);
    const uint32_t B = 1u << (c - 1);
    digit_iter it(s, c);
    for (int w = 0; w < W; w++) {
        bool neg;
        uint32_t d = it.next(&neg);
        // zero digits take no bucket; they still take part in the match so all lanes agree
        uint32_t key = d ? w * B + d - 1 : MSM_SENTINEL;
        unsigned peers = __match_any_sync(active, key);
        int lane = threadIdx.x & 31;
        if (d && lane == __ffs(peers) - 1) atomicAdd(counts + key, (uint32_t)__popc(peers));
    }
}

// keys/vals[cursor[key]++] = (key, i | sign): the scatter of the counting sort. The order inside
// a bucket is whatever the atomics give; the bucket sum does not depend on it.
extern "C" __global__ void msm_scatter(i64 n, const uint32_t* scalars, int c, uint32_t* cursor,
                                       uint32_t* keys, uint32_t* vals) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    bool live = i < n;
    unsigned active = __ballot_sync(0xffffffffu, live);
    if (!live) return;
    uint32_t s[8];
    load_scalar(scalars, i, s);
    const int W = msm_windows(c);
    const uint32_t B = 1u << (c - 1);
    digit_iter it(s, c);
    for (int w = 0; w < W; w++) {
        bool neg;
        uint32_t d = it.next(&neg);
        uint32_t key = d ? w * B + d - 1 : MSM_SENTINEL;
        unsigned peers = __match_any_sync(active, key);
        if (!d) continue;  // peers of a zero digit are all zero digits: none of them adds
        int lane = threadIdx.x & 31, leader = __ffs(peers) - 1;
        uint32_t base = 0;
        if (lane == leader) base = atomicAdd(cursor + key, (uint32_t)__popc(peers));
        base = __shfl_sync(peers, base, leader);
        uint32_t pos = base + __popc(peers & ((1u << lane) - 1));
        keys[pos] = key;
        vals[pos] = (uint32_t)i | (neg ? MSM_NEG_BIT : 0);
    }
}

// Exclusive scan of counts into offsets, in chunks of SCAN_CHUNK per block; chunk totals go to
// sums (scanned by msm_scan_sums, added back by msm_scan_add).
#define SCAN_THREADS 1024
#define SCAN_PER_THREAD 4
#define SCAN_CHUNK (SCAN_THREADS * SCAN_PER_THREAD)

// Exclusive scan of one value per thread across the block (whole warps); returns the total.
__device__ uint32_t block_exclusive_scan(uint32_t& v) {
    __shared__ uint32_t warp_excl[32];
    __shared__ uint32_t total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    uint32_t x = v;  // inclusive scan within the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_excl[warp] = x;
    __syncthreads();
    if (warp == 0) {
        uint32_t t = lane < nw ? warp_excl[lane] : 0, u = t;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            uint32_t y = __shfl_up_sync(0xffffffffu, u, o);
            if (lane >= o) u += y;
        }
        warp_excl[lane] = u - t;
        if (lane == 31) total = u;
    }
    __syncthreads();
    v = warp_excl[warp] + x - v;
    uint32_t r = total;
    __syncthreads();  // the next call may overwrite the shared words
    return r;
}

extern "C" __global__ void msm_scan_chunks(i64 K, const uint32_t* counts, uint32_t* offsets,
                                           uint32_t* sums) {
    i64 base = (i64)blockIdx.x * SCAN_CHUNK + (i64)threadIdx.x * SCAN_PER_THREAD;
    uint32_t v[SCAN_PER_THREAD], t = 0;
#pragma unroll
    for (int j = 0; j < SCAN_PER_THREAD; j++) {
        v[j] = base + j < K ? counts[base + j] : 0;
        t += v[j];
    }
    uint32_t total = block_exclusive_scan(t);
#pragma unroll
    for (int j = 0; j < SCAN_PER_THREAD; j++) {
        if (base + j < K) offsets[base + j] = t;
        t += v[j];
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// One block: exclusive scan of the nb chunk totals in place; the grand total (the number of
// nonzero digits, M) goes to *m.
extern "C" __global__ void msm_scan_sums(i64 nb, uint32_t* sums, unsigned long long* m) {
    i64 per = (nb + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per;
    uint32_t t = 0;
    for (i64 k = lo; k < lo + per && k < nb; k++) t += sums[k];
    uint32_t total = block_exclusive_scan(t);
    for (i64 k = lo; k < lo + per && k < nb; k++) {
        uint32_t x = sums[k];
        sums[k] = t;
        t += x;
    }
    if (threadIdx.x == 0) *m = total;
}

extern "C" __global__ void msm_scan_add(i64 K, uint32_t* offsets, const uint32_t* sums) {
    i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < K) offsets[k] += sums[k / SCAN_CHUNK];
}

// ---- points ---------------------------------------------------------------------------------

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

template <class F>
__device__ void accumulate_parts(i64 T, i64 L, i64 M, const uint32_t* keys,
                                 const xyzz_t<F>* parts, xyzz_t<F>* buckets, uint32_t* out_keys,
                                 xyzz_t<F>* out_parts) {
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    part_source<F> src{parts};
    accumulate_range<F>(t, L, M, keys, src, buckets, out_keys, out_parts);
}

template <class F>
__device__ void reduce_segments(int W, i64 B, i64 G, const xyzz_t<F>* buckets,
                                const uint32_t* counts, xyzz_t<F>* seg) {
    i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x, S = B / G;
    if (k >= W * S) return;
    seg[k] = reduce_segment<F>((int)(k / S), k % S, B, G, buckets, counts);
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

// The Fq multiplication rate (bench/gpu_msm.py: the arithmetic floor): 4 iters products per
// thread in two independent chains, on the thread's 4 elements (48 limbs), written back.
extern "C" __global__ void fq_mul_rate(int iters, uint32_t* data) {
    uint32_t* p = data + 48 * ((i64)blockIdx.x * blockDim.x + threadIdx.x);
    fq_t a = fq_t::from_limbs(p), b = fq_t::from_limbs(p + 12);
    fq_t c = fq_t::from_limbs(p + 24), d = fq_t::from_limbs(p + 36);
    for (int k = 0; k < iters; k++) {
        a = a * b;
        c = c * d;
        b = b * a;
        d = d * c;
    }
    store_limbs(a, p);
    store_limbs(b, p + 12);
    store_limbs(c, p + 24);
    store_limbs(d, p + 36);
}

#define MSM_ENTRY_POINTS(G, F)                                                                   \
    extern "C" __global__ void G##_load_bases(i64 n, const uint32_t* raw, affine_t<F>* out,      \
                                              unsigned long long* bad) {                         \
        load_bases<F>(n, raw, out, bad);                                                         \
    }                                                                                            \
    extern "C" __global__ void G##_accumulate_bases(                                             \
        i64 T, const unsigned long long* m, const uint32_t* keys, const uint32_t* vals,          \
        const affine_t<F>* bases, xyzz_t<F>* buckets, uint32_t* out_keys, xyzz_t<F>* out_parts) { \
        accumulate_bases<F, G##_PREFETCH>(T, m, keys, vals, bases, buckets, out_keys, out_parts); \
    }                                                                                            \
    extern "C" __global__ void G##_accumulate_parts(i64 T, i64 L, i64 M, const uint32_t* keys,   \
                                                    const xyzz_t<F>* parts, xyzz_t<F>* buckets,  \
                                                    uint32_t* out_keys, xyzz_t<F>* out_parts) {  \
        accumulate_parts<F>(T, L, M, keys, parts, buckets, out_keys, out_parts);                 \
    }                                                                                            \
    extern "C" __global__ void G##_reduce_segments(int W, i64 B, i64 G_, const xyzz_t<F>* bk,    \
                                                   const uint32_t* counts, xyzz_t<F>* seg) {     \
        reduce_segments<F>(W, B, G_, bk, counts, seg);                                           \
    }                                                                                            \
    extern "C" __global__ void G##_sum_groups(i64 rows, i64 len, i64 g, const xyzz_t<F>* in,     \
                                              xyzz_t<F>* out) {                                  \
        sum_groups<F>(rows, len, g, in, out);                                                    \
    }                                                                                            \
    extern "C" __global__ void G##_combine(int W, int c, const xyzz_t<F>* win, uint32_t* out) {  \
        combine<F>(W, c, win, out);                                                              \
    }                                                                                            \
    extern "C" __global__ void G##_gen_bases(i64 n, i64 m2, const affine_t<F>* A,                \
                                             const affine_t<F>* Bt, uint32_t* out) {             \
        gen_bases<F>(n, m2, A, Bt, out);                                                         \
    }

// Prefetching the next base pays on G1; on G2 its 48 registers go on top of a 96-register
// accumulator (g2_accumulate_bases_np: the variant without, bench/gpu_msm.py compares them).
#define g1_PREFETCH true
#define g2_PREFETCH true
#ifndef MSM_NO_G1
MSM_ENTRY_POINTS(g1, fq_t)
#endif
#ifndef MSM_NO_G1
// The same level-1 kernel capped at 168 registers (3 blocks of 128 an SM: 12 warps instead of
// the 9 that 212+ registers leave); bench/gpu_msm.py compares it (ZKHIVE_MSM_G1_LB=1).
extern "C" __global__ void __launch_bounds__(128, 3)
g1_accumulate_bases_lb(i64 T, const unsigned long long* m, const uint32_t* keys,
                       const uint32_t* vals, const affine_t<fq_t>* bases, xyzz_t<fq_t>* buckets,
                       uint32_t* out_keys, xyzz_t<fq_t>* out_parts) {
    accumulate_bases<fq_t, true>(T, m, keys, vals, bases, buckets, out_keys, out_parts);
}
#endif
#ifndef MSM_NO_G2
MSM_ENTRY_POINTS(g2, fq2_t)
extern "C" __global__ void g2_accumulate_bases_np(i64 T, const unsigned long long* m,
                                                  const uint32_t* keys, const uint32_t* vals,
                                                  const affine_t<fq2_t>* bases,
                                                  xyzz_t<fq2_t>* buckets, uint32_t* out_keys,
                                                  xyzz_t<fq2_t>* out_parts) {
    accumulate_bases<fq2_t, false>(T, m, keys, vals, bases, buckets, out_keys, out_parts);
}
#endif
