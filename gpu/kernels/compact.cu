// Device kernels over the compact, replicated matrices (compact.cuh) and the device setup:
// A z / B z / C z, the transposed products A^T L (setup), the Lagrange basis and powers of tau,
// the l-query scalars, fixed-base multiples written straight into the resident Montgomery affine
// bases the MSM kernels read, and the expansion of a compact assignment into z.
#include "compact.cuh"
#include "fixed_base_batch.cuh"

#define TID ((i64)blockIdx.x * blockDim.x + threadIdx.x)

extern "C" __global__ void rep_spmv(i64 rows, i64 hrows, i64 brows, const i64* h_ptr,
                                    const int32_t* h_col, const uint32_t* h_coef, const i64* b_ptr,
                                    const int32_t* b_col, const uint32_t* b_coef,
                                    const uint32_t* table, const i64* base, const i64* stride,
                                    const uint32_t* __restrict__ z, uint32_t* __restrict__ out) {
    i64 r = TID;
    if (r >= rows) return;
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
    rep_store(out + 8 * r, rep_row(m, r, z));
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

// s_i * P into the Montgomery affine layout of gpu/cuda/msm.py's resident bases (load_bases' output).
template <class F>
__device__ __forceinline__ void fixed_base_mont(i64 n, const uint32_t* table, const uint32_t* scalars,
                                                affine_t<F>* out) {
    i64 i = TID;
    if (i >= n) return;
    out[i] = fixed_base_mul<F>(table, scalars + 8 * i);
}
extern "C" __global__ void fixed_base_mont_g1(i64 n, const uint32_t* table, const uint32_t* scalars,
                                              affine_t<fq_t>* out) {
    fixed_base_mont<fq_t>(n, table, scalars, out);
}
extern "C" __global__ void fixed_base_mont_g2(i64 n, const uint32_t* table, const uint32_t* scalars,
                                              affine_t<fq2_t>* out) {
    fixed_base_mont<fq2_t>(n, table, scalars, out);
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
FB_BATCH_KERNELS(g1, fq_t)
FB_BATCH_KERNELS(g2, fq2_t)

extern "C" __global__ void expand_assignment(i64 n, const uint32_t* other, const uint32_t* one,
                                             const uint32_t* offs, const uint32_t* fes, uint32_t* z) {
    i64 i = TID;
    if (i >= n) return;
    expand_one(i, other, one, offs, fes, z);
}
