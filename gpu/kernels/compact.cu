// Device kernels over the compact, replicated matrices (compact.cuh) and the device setup:
// A z / B z / C z, the transposed products A^T L (setup), the Lagrange basis and powers of tau,
// the l-query scalars, fixed-base multiples written straight into the resident Montgomery affine
// bases the MSM kernels read, and the expansion of a compact assignment into z.
#include "compact.cuh"
#include "fixed_base_batch.cuh"

#define TID ((i64)blockIdx.x * blockDim.x + threadIdx.x)

// s_i * P into the Montgomery affine layout of gpu/cuda/msm.py's resident bases (load_bases' output).
template <class F>
__device__ __forceinline__ void fixed_base_mont(i64 n, const uint32_t* table, const uint32_t* scalars,
                                                affine_t<F>* out) {
    i64 i = TID;
    if (i >= n) return;
    out[i] = fixed_base_mul<F>(table, scalars + 8 * i);
}
// The batched variant (fixed_base_batch.cuh): XYZZ sums into scratch, then one thread a range of
// FB_BATCH points converts them with one shared inversion.
#define FB_BATCH_KERNELS(G, F)                                                                     \
    extern "C" __global__ void fixed_base_acc_##G(i64 n, const uint32_t* table,                  \
                                                  const uint32_t* scalars, xyzz_t<F>* acc) {       \
        i64 i = TID;                                                                               \
        if (i >= n) return;                                                                        \
        acc[i] = fixed_base_acc<F>(table, scalars + 8 * i);                                        \
    }                                                                                              \
    extern "C" __global__ void fixed_base_affine_##G(i64 n, const xyzz_t<F>* acc,                 \
                                                     affine_t<F>* out) {                           \
        i64 lo = TID * FB_BATCH;                                                                   \
        if (lo >= n) return;                                                                       \
        fixed_base_batch_affine<F>(lo, lo + FB_BATCH < n ? lo + FB_BATCH : n, acc, out);           \
    }
#if !defined(COMPACT_G2_ONLY) && !defined(COMPACT_G2_MONT)  // compact_g2*.cu: G2 fixed-base alone
// One thread a row; skip_long: rows of more than REP_LONG terms are left to rep_spmv_long.
template <class Z>
__device__ __forceinline__ void rep_spmv_body(i64 rows, i64 hrows, i64 brows, const i64* h_ptr,
                                              const int32_t* h_col, const uint32_t* h_coef,
                                              const i64* b_ptr, const int32_t* b_col,
                                              const uint32_t* b_coef, const uint32_t* table,
                                              const i64* base, const i64* stride, const Z& z,
                                              uint32_t* __restrict__ out, int skip_long) {
    i64 r = TID;
    if (r >= rows) return;
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
    if (skip_long && rep_row_len(m, r) > REP_LONG) return;
    rep_store(out + 8 * r, rep_row(m, r, z));
}

extern "C" __global__ void rep_spmv(i64 rows, i64 hrows, i64 brows, const i64* h_ptr,
                                    const int32_t* h_col, const uint32_t* h_coef, const i64* b_ptr,
                                    const int32_t* b_col, const uint32_t* b_coef,
                                    const uint32_t* table, const i64* base, const i64* stride,
                                    const uint32_t* __restrict__ z, uint32_t* __restrict__ out,
                                    int skip_long) {
    rep_spmv_body(rows, hrows, brows, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base,
                  stride, z_vec_t{z}, out, skip_long);
}

// The same product reading z from the compact assignment's planes (compact.cuh z_planes_t)
extern "C" __global__ void rep_spmv_planes(i64 rows, i64 hrows, i64 brows, const i64* h_ptr,
                                           const int32_t* h_col, const uint32_t* h_coef,
                                           const i64* b_ptr, const int32_t* b_col,
                                           const uint32_t* b_coef, const uint32_t* table,
                                           const i64* base, const i64* stride,
                                           const uint32_t* __restrict__ other,
                                           const uint32_t* __restrict__ one,
                                           const uint32_t* __restrict__ offs,
                                           const uint32_t* __restrict__ fes,
                                           uint32_t* __restrict__ out, int skip_long) {
    rep_spmv_body(rows, hrows, brows, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base,
                  stride, z_planes_t{other, one, offs, fes}, out, skip_long);
}

__device__ __forceinline__ fr_t warp_sum(fr_t x) {
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        fr_t y;
#pragma unroll
        for (int i = 0; i < 8; i++) y.v[i] = __shfl_xor_sync(0xffffffffu, x.v[i], o);
        x += y;
    }
    return x;
}

// The long rows, a warp each: task t < nh is header row long_h[t]; the others are block row
// long_b[u % nb] of copy u / nb (u = t - nh). Lane l takes terms l, l + 32, ... (rep_row_part),
// the lanes' sums are added across the warp (rep_row_lanes is the same on the host).
template <class Z>
__device__ __forceinline__ void rep_spmv_long_body(i64 tasks, i64 nh, i64 nb, const i64* long_h,
                                                   const i64* long_b, i64 hrows, i64 brows,
                                                   const i64* h_ptr, const int32_t* h_col,
                                                   const uint32_t* h_coef, const i64* b_ptr,
                                                   const int32_t* b_col, const uint32_t* b_coef,
                                                   const uint32_t* table, const i64* base,
                                                   const i64* stride, const Z& z,
                                                   uint32_t* __restrict__ out) {
    i64 t = TID >> 5;
    int lane = threadIdx.x & 31;
    if (t >= tasks) return;  // whole warps: tasks is per warp
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
    i64 r = t < nh ? long_h[t] : hrows + ((t - nh) / nb) * brows + long_b[(t - nh) % nb];
    fr_t plain = fr_t::zero(), mont = fr_t::zero();
    bool any_mont = false;
    rep_row_part(m, r, z, lane, 32, plain, mont, any_mont);
    plain = warp_sum(plain);
    mont = warp_sum(mont);
    any_mont = __any_sync(0xffffffffu, any_mont);
    if (lane == 0) rep_store(out + 8 * r, rep_finish(plain, mont, any_mont));
}

extern "C" __global__ void rep_spmv_long(i64 tasks, i64 nh, i64 nb, const i64* long_h,
                                         const i64* long_b, i64 hrows, i64 brows, const i64* h_ptr,
                                         const int32_t* h_col, const uint32_t* h_coef,
                                         const i64* b_ptr, const int32_t* b_col,
                                         const uint32_t* b_coef, const uint32_t* table,
                                         const i64* base, const i64* stride,
                                         const uint32_t* __restrict__ z, uint32_t* __restrict__ out) {
    rep_spmv_long_body(tasks, nh, nb, long_h, long_b, hrows, brows, h_ptr, h_col, h_coef, b_ptr,
                       b_col, b_coef, table, base, stride, z_vec_t{z}, out);
}

extern "C" __global__ void rep_spmv_long_planes(i64 tasks, i64 nh, i64 nb, const i64* long_h,
                                                const i64* long_b, i64 hrows, i64 brows,
                                                const i64* h_ptr, const int32_t* h_col,
                                                const uint32_t* h_coef, const i64* b_ptr,
                                                const int32_t* b_col, const uint32_t* b_coef,
                                                const uint32_t* table, const i64* base,
                                                const i64* stride,
                                                const uint32_t* __restrict__ other,
                                                const uint32_t* __restrict__ one,
                                                const uint32_t* __restrict__ offs,
                                                const uint32_t* __restrict__ fes,
                                                uint32_t* __restrict__ out) {
    rep_spmv_long_body(tasks, nh, nb, long_h, long_b, hrows, brows, h_ptr, h_col, h_coef, b_ptr,
                       b_col, b_coef, table, base, stride, z_planes_t{other, one, offs, fes}, out);
}

extern "C" __global__ void rep_spmv_t_pieces(i64 tasks, i64 npieces, i64 hrows, i64 brows,
                                             const i64* piece_lo, const int32_t* bt_row,
                                             const uint32_t* bt_coef, const uint32_t* table,
                                             const uint32_t* __restrict__ L, uint32_t* __restrict__ scratch) {
    i64 t = TID;
    if (t >= tasks) return;
    rep_t_piece(t, npieces, hrows, brows, piece_lo, bt_row, bt_coef, table, L, scratch);
}

extern "C" __global__ void rep_spmv_t_gather(i64 tasks, i64 nloc, i64 copies, i64 npieces,
                                             const i64* piece_ptr, const i64* base, const i64* stride,
                                             const uint32_t* __restrict__ scratch, uint32_t* __restrict__ out) {
    i64 t = TID;
    if (t >= tasks) return;
    rep_t_gather(t, nloc, copies, npieces, piece_ptr, base, stride, scratch, out);
}

extern "C" __global__ void rep_spmv_t_header(i64 ncols, const i64* gcol, const i64* ht_ptr,
                                             const int32_t* ht_row, const uint32_t* ht_coef,
                                             const uint32_t* table, const uint32_t* L, uint32_t* out) {
    i64 t = TID;
    if (t >= ncols) return;
    rep_t_header(t, gcol, ht_ptr, ht_row, ht_coef, table, L, out);
}

// out[i] += add[i] for i < count (the QAP's input rows into A^T L)
extern "C" __global__ void fr_add_into(i64 count, const uint32_t* add, uint32_t* out) {
    i64 i = TID;
    if (i >= count) return;
    rep_store(out + 8 * i, fr_t::from_limbs(out + 8 * i) + fr_t::from_limbs(add + 8 * i));
}

extern "C" __global__ void setup_lagrange(i64 n, i64 per, const uint32_t* w, const uint32_t* winv,
                                          const uint32_t* tau, const uint32_t* c, uint32_t* out) {
    i64 lo = TID * per;
    if (lo >= n) return;
    i64 hi = lo + per < n ? lo + per : n;
    lagrange_range(lo, hi, fr_t::from_limbs(w), fr_t::from_limbs(winv), fr_t::from_limbs(tau),
                   fr_t::from_limbs(c), out);
}

extern "C" __global__ void setup_powers(i64 n, i64 per, const uint32_t* x, const uint32_t* c,
                                        uint32_t* out) {
    i64 lo = TID * per;
    if (lo >= n) return;
    i64 hi = lo + per < n ? lo + per : n;
    powers_range(lo, hi, fr_t::from_limbs(x), fr_t::from_limbs(c), out);
}

extern "C" __global__ void setup_lincomb(i64 n, const uint32_t* u, const uint32_t* v,
                                         const uint32_t* w, const uint32_t* consts, uint32_t* out) {
    i64 i = TID;
    if (i >= n) return;
    lincomb_one(i, u, v, w, fr_t::from_limbs(consts), fr_t::from_limbs(consts + 8),
                fr_t::from_limbs(consts + 16), out);
}

extern "C" __global__ void fixed_base_mont_g1(i64 n, const uint32_t* table, const uint32_t* scalars,
                                              affine_t<fq_t>* out) {
    fixed_base_mont<fq_t>(n, table, scalars, out);
}

FB_BATCH_KERNELS(g1, fq_t)

extern "C" __global__ void expand_assignment(i64 n, const uint32_t* other, const uint32_t* one,
                                             const uint32_t* offs, const uint32_t* fes, uint32_t* z) {
    i64 i = TID;
    if (i >= n) return;
    expand_one(i, other, one, offs, fes, z);
}
#endif  // !COMPACT_G2_ONLY && !COMPACT_G2_MONT

#ifdef COMPACT_G2_ONLY
FB_BATCH_KERNELS(g2, fq2_t)
#endif
#ifdef COMPACT_G2_MONT
extern "C" __global__ void fixed_base_mont_g2(i64 n, const uint32_t* table, const uint32_t* scalars,
                                              affine_t<fq2_t>* out) {
    fixed_base_mont<fq2_t>(n, table, scalars, out);
}
#endif
