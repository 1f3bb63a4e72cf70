// Pippenger MSM on the device, the scalar side: digits and the counting sort, which do not
// depend on the group (thin extern "C" entry points over msm_core.cuh's per-thread steps; the
// host build runs the same bodies). Driver: gpu/cuda/msm.py, which documents the launch sequence
// and buffer sizes. The point kernels are in msm_points.cuh, compiled per group and per heavy
// kernel in msm_g1*.cu / msm_g2*.cu, so a cold build compiles them in parallel.
#include "curve_io.cuh"
#include "msm_core.cuh"

typedef int64_t i64;

// ---- scalars: digits, counting sort -------------------------------------------------------

__device__ __forceinline__ void load_scalar(const uint32_t* scalars, i64 i, uint32_t* s) {
    const uint4* p = reinterpret_cast<const uint4*>(scalars + 8 * i);
    uint4 a = p[0], b = p[1];
    s[0] = a.x; s[1] = a.y; s[2] = a.z; s[3] = a.w;
    s[4] = b.x; s[5] = b.y; s[6] = b.z; s[7] = b.w;
}

// Lanes of a warp that share a key count once (__match_any_sync): all-equal and 0/1-heavy
// scalars would otherwise serialise their atomics on a few counters. MATCH = false (the "dense"
// kernels, for uniformly random scalars such as the H query's, whose digits rarely meet within
// a warp): one plain atomic a digit, no match. `first` is the index of scalar 0 within the whole
// MSM (the chunked MSM sorts a chunk at a time), so `bad` names the scalar in the whole vector.

// counts[w B + |d| - 1] += 1 for every nonzero digit; bad = smallest index of a scalar >= r.
template <bool MATCH>
__device__ __forceinline__ void histogram(i64 n, const uint32_t* scalars, int c, uint32_t* counts,
                                          unsigned long long* bad, i64 first) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    bool live = i < n;
    unsigned active = __ballot_sync(0xffffffffu, live);
    if (!live) return;
    uint32_t s[8];
    load_scalar(scalars, i, s);
    if (!fr_canonical(s)) atomicMin(bad, (unsigned long long)(first + i));
    const int W = msm_windows(c);
    const uint32_t B = 1u << (c - 1);
    digit_iter it(s, c);
    for (int w = 0; w < W; w++) {
        bool neg;
        uint32_t d = it.next(&neg);
        // zero digits take no bucket; they still take part in the match so all lanes agree
        uint32_t key = d ? w * B + d - 1 : MSM_SENTINEL;
        if (MATCH) {
            unsigned peers = __match_any_sync(active, key);
            int lane = threadIdx.x & 31;
            if (d && lane == __ffs(peers) - 1) atomicAdd(counts + key, (uint32_t)__popc(peers));
        } else if (d) {
            atomicAdd(counts + key, 1u);
        }
    }
}

// keys/vals[cursor[key]++] = (key, i | sign): the scatter of the counting sort. The order inside
// a bucket is whatever the atomics give; the bucket sum does not depend on it.
template <bool MATCH>
__device__ __forceinline__ void scatter(i64 n, const uint32_t* scalars, int c, uint32_t* cursor,
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
        uint32_t pos;
        if (MATCH) {
            unsigned peers = __match_any_sync(active, key);
            if (!d) continue;  // peers of a zero digit are all zero digits: none of them adds
            int lane = threadIdx.x & 31, leader = __ffs(peers) - 1;
            uint32_t base = 0;
            if (lane == leader) base = atomicAdd(cursor + key, (uint32_t)__popc(peers));
            base = __shfl_sync(peers, base, leader);
            pos = base + __popc(peers & ((1u << lane) - 1));
        } else {
            if (!d) continue;
            pos = atomicAdd(cursor + key, 1u);
        }
        keys[pos] = key;
        vals[pos] = (uint32_t)i | (neg ? MSM_NEG_BIT : 0);
    }
}

extern "C" __global__ void msm_histogram(i64 n, const uint32_t* scalars, int c, uint32_t* counts,
                                         unsigned long long* bad) {
    histogram<true>(n, scalars, c, counts, bad, 0);
}
extern "C" __global__ void msm_scatter(i64 n, const uint32_t* scalars, int c, uint32_t* cursor,
                                       uint32_t* keys, uint32_t* vals) {
    scatter<true>(n, scalars, c, cursor, keys, vals);
}
extern "C" __global__ void msm_histogram_dense(i64 n, const uint32_t* scalars, int c,
                                               uint32_t* counts, unsigned long long* bad,
                                               i64 first) {
    histogram<false>(n, scalars, c, counts, bad, first);
}
extern "C" __global__ void msm_scatter_dense(i64 n, const uint32_t* scalars, int c,
                                             uint32_t* cursor, uint32_t* keys, uint32_t* vals) {
    scatter<false>(n, scalars, c, cursor, keys, vals);
}
// The chunked MSM's histogram with the match (for skewed scalars over many chunks).
extern "C" __global__ void msm_histogram_first(i64 n, const uint32_t* scalars, int c,
                                               uint32_t* counts, unsigned long long* bad,
                                               i64 first) {
    histogram<true>(n, scalars, c, counts, bad, first);
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

// The Fq multiplication rate (bench/gpu_msm.py: the arithmetic floor): 4 iters products per
// thread in two independent chains, on the thread's 4 elements (48 limbs), written back; Sqr:
// 4 iters squares in four chains (ff.cuh sqr: ff_eo::mont_sqr on the device).
template <bool Sqr>
__device__ void fq_rate(int iters, uint32_t* data) {
    uint32_t* p = data + 48 * ((i64)blockIdx.x * blockDim.x + threadIdx.x);
    fq_t a = fq_t::from_limbs(p), b = fq_t::from_limbs(p + 12);
    fq_t c = fq_t::from_limbs(p + 24), d = fq_t::from_limbs(p + 36);
    for (int k = 0; k < iters; k++) {
        a = Sqr ? a.sqr() : a * b;
        c = Sqr ? c.sqr() : c * d;
        b = Sqr ? b.sqr() : b * a;
        d = Sqr ? d.sqr() : d * c;
    }
    store_limbs(a, p);
    store_limbs(b, p + 12);
    store_limbs(c, p + 24);
    store_limbs(d, p + 36);
}

extern "C" __global__ void fq_mul_rate(int iters, uint32_t* data) { fq_rate<false>(iters, data); }
extern "C" __global__ void fq_sqr_rate(int iters, uint32_t* data) { fq_rate<true>(iters, data); }
