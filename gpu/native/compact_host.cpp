// Host build of gpu/kernels/compact.cuh: the same row, column, Lagrange, powers and expansion
// code the device kernels (compact.cu) run, looped over every index, for the CPU tests.
#include <cstdint>
#include "compact.cuh"

extern "C" {

void host_rep_spmv(i64 rows, i64 hrows, i64 brows, const i64* h_ptr, const int32_t* h_col,
                   const uint32_t* h_coef, const i64* b_ptr, const int32_t* b_col,
                   const uint32_t* b_coef, const uint32_t* table, const i64* base,
                   const i64* stride, const uint32_t* z, uint32_t* out) {
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
#pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; r++) rep_store(out + 8 * r, rep_row(m, r, z));
}

// Every row as `lanes` strided parts summed (rep_spmv_long's order of work; tests).
void host_rep_spmv_lanes(i64 rows, i64 hrows, i64 brows, const i64* h_ptr, const int32_t* h_col,
                         const uint32_t* h_coef, const i64* b_ptr, const int32_t* b_col,
                         const uint32_t* b_coef, const uint32_t* table, const i64* base,
                         const i64* stride, const uint32_t* z, uint32_t* out, int lanes) {
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
#pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; r++) rep_store(out + 8 * r, rep_row_lanes(m, r, z, lanes));
}

void host_rep_spmv_t(i64 nloc, i64 copies, i64 hrows, i64 brows, i64 npieces, const i64* piece_lo,
                     const i64* piece_ptr, const int32_t* bt_row, const uint32_t* bt_coef,
                     const uint32_t* table, const i64* base, const i64* stride, i64 hcols,
                     const i64* gcol, const i64* ht_ptr, const int32_t* ht_row,
                     const uint32_t* ht_coef, const uint32_t* L, uint32_t* scratch, uint32_t* out) {
    for (i64 t = 0; t < copies * npieces; t++)
        rep_t_piece(t, npieces, hrows, brows, piece_lo, bt_row, bt_coef, table, L, scratch);
    for (i64 t = 0; t < copies * nloc; t++)
        rep_t_gather(t, nloc, copies, npieces, piece_ptr, base, stride, scratch, out);
    for (i64 t = 0; t < hcols; t++) rep_t_header(t, gcol, ht_ptr, ht_row, ht_coef, table, L, out);
}

void host_lagrange(i64 n, i64 per, const uint32_t* w, const uint32_t* winv, const uint32_t* tau,
                   const uint32_t* c, uint32_t* out) {
    for (i64 lo = 0; lo < n; lo += per)
        lagrange_range(lo, lo + per < n ? lo + per : n, fr_t::from_limbs(w), fr_t::from_limbs(winv),
                       fr_t::from_limbs(tau), fr_t::from_limbs(c), out);
}

void host_powers(i64 n, i64 per, const uint32_t* x, const uint32_t* c, uint32_t* out) {
    for (i64 lo = 0; lo < n; lo += per)
        powers_range(lo, lo + per < n ? lo + per : n, fr_t::from_limbs(x), fr_t::from_limbs(c), out);
}

void host_lincomb(i64 n, const uint32_t* u, const uint32_t* v, const uint32_t* w,
                  const uint32_t* consts, uint32_t* out) {
    for (i64 i = 0; i < n; i++)
        lincomb_one(i, u, v, w, fr_t::from_limbs(consts), fr_t::from_limbs(consts + 8),
                    fr_t::from_limbs(consts + 16), out);
}

void host_expand(i64 n, const uint32_t* other, const uint32_t* one, const uint32_t* offs,
                 const uint32_t* fes, uint32_t* z) {
    for (i64 i = 0; i < n; i++) expand_one(i, other, one, offs, fes, z);
}

}  // extern "C"
