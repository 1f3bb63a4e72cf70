// Bucket accumulation by batched affine additions (msm_affine.cuh), the G1 kernels; driver:
// gpu/cuda/affine_acc.py. Counts of items come from the device (M, each round's scan total):
// grids are sized by the host's bounds and threads past the count return.
#include "curve_io.cuh"
#include "msm_affine.cuh"

typedef int64_t i64;
typedef affine_t<fq_t> g1a;

#define TID ((i64)blockIdx.x * blockDim.x + threadIdx.x)

extern "C" __global__ void msm_run_bounds(const unsigned long long* m, const uint32_t* keys,
                                          uint32_t* start, uint32_t* end) {
    i64 i = TID, M = (i64)*m;
    if (i < M) run_bounds(i, M, keys, start, end);
}

// cnt[b] = end[b] - start[b] in place (end's buffer becomes the counts)
extern "C" __global__ void msm_run_counts(i64 B, const uint32_t* start, uint32_t* cnt) {
    i64 b = TID;
    if (b < B) cnt[b] -= start[b];
}

extern "C" __global__ void msm_run_halve(i64 B, i64 lo, i64 hi, const uint32_t* cnt_in,
                                         uint32_t* cnt_out) {
    i64 b = TID;
    if (b < B) run_halve(b, lo, hi, cnt_in, cnt_out);
}

extern "C" __global__ void msm_pair_layout(const unsigned long long* m_in, i64 lo, i64 hi,
                                           const uint32_t* keys_in, const uint32_t* start_in,
                                           const uint32_t* cnt_in, const uint32_t* start_out,
                                           uint32_t* src, uint32_t* keys_out) {
    i64 i = TID;
    if (i < (i64)*m_in)
        pair_layout(i, lo, hi, keys_in, start_in, cnt_in, start_out, src, keys_out);
}

// one thread: the slice's stretch of the sorted items (msm_affine.cuh slice_items)
extern "C" __global__ void msm_slice_items(const unsigned long long* m, const uint32_t* keys,
                                           i64 lo, i64 hi, unsigned long long* range) {
    if (TID == 0) slice_items((i64)*m, keys, lo, hi, range);
}

// round 0's layout over the slice's stretch [range[0], range[1]) alone (grid: a bound on it)
extern "C" __global__ void msm_pair_layout_range(const unsigned long long* range, i64 lo, i64 hi,
                                                 const uint32_t* keys_in,
                                                 const uint32_t* start_in,
                                                 const uint32_t* cnt_in,
                                                 const uint32_t* start_out, uint32_t* src,
                                                 uint32_t* keys_out) {
    i64 i = (i64)range[0] + TID;
    if (i < (i64)range[1])
        pair_layout(i, lo, hi, keys_in, start_in, cnt_in, start_out, src, keys_out);
}

extern "C" __global__ void fq_batch_prefix(i64 n, i64 T, int K, const fq_t* v, fq_t* pre,
                                           fq_t* tot) {
    i64 t = TID;
    if (t < T) batch_prefix<fq_t>(t, n, T, K, v, pre, tot);
}

extern "C" __global__ void fq_batch_back(i64 n, i64 T, int K, fq_t* v, const fq_t* pre,
                                         const fq_t* itot) {
    i64 t = TID;
    if (t < T) batch_back<fq_t>(t, n, T, K, v, pre, itot);
}

extern "C" __global__ void fq_batch_top(i64 n, fq_t* v, fq_t* pre) {
    if (TID == 0) batch_top<fq_t>(n, v, pre);
}

// v[0 .. n) inverted in place by one block of BT = blockDim.x threads (a power of two),
// n <= BT W: chains of W, the product tree, the root's inversion, back down (msm_affine.cuh,
// "the inversion's top levels in one thread block"). pre: n scratch values; tree: 2 BT.
// __syncthreads makes each level's global writes visible to the block's next level.
extern "C" __global__ void fq_batch_block(i64 n, int W, fq_t* v, fq_t* pre, fq_t* tree) {
    const i64 t = threadIdx.x, BT = blockDim.x;
    batch_prefix<fq_t>(t, n, BT, W, v, pre, tree + BT);
    block_tree_invert<fq_t>(t, BT, tree);
    batch_back<fq_t>(t, n, BT, W, v, pre, tree + BT);
}

extern "C" __global__ void g1_pair_prefix_table(const unsigned long long* m, i64 T, int K,
                                                const uint32_t* src, const g1a* bases,
                                                const uint32_t* vals, fq_t* pre, fq_t* tot) {
    i64 t = TID;
    if (t < T) pair_prefix<fq_t>(t, (i64)*m, T, K, src, table_points<fq_t>{bases, vals}, pre, tot);
}

extern "C" __global__ void g1_pair_prefix(const unsigned long long* m, i64 T, int K,
                                          const uint32_t* src, const g1a* pts, fq_t* pre,
                                          fq_t* tot) {
    i64 t = TID;
    if (t < T) pair_prefix<fq_t>(t, (i64)*m, T, K, src, array_points<fq_t>{pts}, pre, tot);
}

extern "C" __global__ void g1_pair_apply_table(const unsigned long long* m, i64 T, int K,
                                               const uint32_t* src, const g1a* bases,
                                               const uint32_t* vals, const fq_t* pre,
                                               const fq_t* itot, g1a* out) {
    i64 t = TID;
    if (t < T)
        pair_apply<fq_t>(t, (i64)*m, T, K, src, table_points<fq_t>{bases, vals}, pre, itot, out);
}

extern "C" __global__ void g1_pair_apply(const unsigned long long* m, i64 T, int K,
                                         const uint32_t* src, const g1a* pts, const fq_t* pre,
                                         const fq_t* itot, g1a* out) {
    i64 t = TID;
    if (t < T) pair_apply<fq_t>(t, (i64)*m, T, K, src, array_points<fq_t>{pts}, pre, itot, out);
}

// buckets [lo, hi) of the slice
extern "C" __global__ void g1_bucket_final(i64 lo, i64 hi, const uint32_t* start,
                                           const uint32_t* cnt, const g1a* pts,
                                           xyzz_t<fq_t>* buckets) {
    i64 b = lo + TID;
    if (b < hi) bucket_final<fq_t>(b, start, cnt, pts, buckets);
}

// buckets [lo, hi) of the slice, added into the running buckets (the dense engine's chunks)
extern "C" __global__ void g1_bucket_final_into(i64 lo, i64 hi, const uint32_t* start,
                                                const uint32_t* cnt, const g1a* pts,
                                                xyzz_t<fq_t>* buckets) {
    i64 b = lo + TID;
    if (b < hi) bucket_final_into<fq_t>(b, start, cnt, pts, buckets);
}
