// Host build of gpu/kernels/compact.cuh: the same row, column, Lagrange, powers and expansion
// code the device kernels (compact.cu) run, looped over every index, for the CPU tests.
#include <cstdint>
#include <climits>
#include <cstring>
#include <vector>
#include <omp.h>
#include "compact.cuh"

extern "C" {

void host_rep_spmv(i64 rows, i64 hrows, i64 brows, const i64* h_ptr, const int32_t* h_col,
                   const uint32_t* h_coef, const i64* b_ptr, const int32_t* b_col,
                   const uint32_t* b_coef, const uint32_t* table, const i64* base,
                   const i64* stride, const uint32_t* z, uint32_t* out) {
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
#pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; r++) rep_store(out + 8 * r, rep_row(m, r, z_vec_t{z}));
}

// The product reading z from the compact assignment's planes (compact.cuh z_planes_t: the
// device's rep_spmv_planes); lanes > 0: each row as that many strided parts (rep_spmv_long's).
void host_rep_spmv_planes(i64 rows, i64 hrows, i64 brows, const i64* h_ptr, const int32_t* h_col,
                          const uint32_t* h_coef, const i64* b_ptr, const int32_t* b_col,
                          const uint32_t* b_coef, const uint32_t* table, const i64* base,
                          const i64* stride, const uint32_t* other, const uint32_t* one,
                          const uint32_t* offs, const uint32_t* fes, uint32_t* out, int lanes) {
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
    z_planes_t z = {other, one, offs, fes};
#pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; r++)
        rep_store(out + 8 * r, lanes > 0 ? rep_row_lanes(m, r, z, lanes) : rep_row(m, r, z));
}

// Every row as `lanes` strided parts summed (rep_spmv_long's order of work; tests).
void host_rep_spmv_lanes(i64 rows, i64 hrows, i64 brows, const i64* h_ptr, const int32_t* h_col,
                         const uint32_t* h_coef, const i64* b_ptr, const int32_t* b_col,
                         const uint32_t* b_coef, const uint32_t* table, const i64* base,
                         const i64* stride, const uint32_t* z, uint32_t* out, int lanes) {
    rep_matrix_t m = {hrows, brows, 0, h_ptr, h_col, h_coef, b_ptr, b_col, b_coef, table, base, stride};
#pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; r++) rep_store(out + 8 * r, rep_row_lanes(m, r, z_vec_t{z}, lanes));
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

// The compact assignment's planes as the expansion kernel reads them, checked, on every core:
// the prover's host side of "upload" (the numpy form, planes() in gpu/native/compact.py, took
// ~45 ms a 2^27 partition on one core, in the device thread, before each proof). `planes`: the
// blob's two bit planes (other, then one, `plane` bytes each); `fes`: its m field elements
// (4 x u64 each, any alignment); `out`: other words, one words, offsets (`words` u32 each,
// zero-padded), then the m elements from the next 16-byte boundary: one buffer, so one copy
// reaches the device.
// Returns 0, or what is wrong with *at its index; planes() in Python names it in words.
enum { PLANES_OK = 0, PLANES_TRAILING = 1, PLANES_BOTH = 2, PLANES_COUNT = 3, PLANES_FE = 4,
       PLANES_ONE = 5 };

int host_planes(i64 count, i64 m, const uint8_t* planes, const uint8_t* fes, const uint64_t* mod,
                uint8_t* out, int64_t* at) {
    const i64 plane = (count + 7) / 8, words = (count + 31) / 32;
    uint8_t* o_other = out;
    uint8_t* o_one = out + 4 * words;
    uint32_t* offs = reinterpret_cast<uint32_t*>(out + 8 * words);
    uint8_t* o_fes = out + ((12 * words + 15) & ~(i64)15);  // 16-byte aligned elements
    std::memset(o_other + plane, 0, 4 * words - plane);
    std::memset(o_one + plane, 0, 4 * words - plane);
    if (count % 8 && ((planes[plane - 1] | planes[2 * plane - 1]) >> (count % 8))) {
        *at = count;
        return PLANES_TRAILING;
    }
    const int T = omp_get_max_threads();
    std::vector<i64> part(T + 1, 0), both(T, INT64_MAX), badfe(T, INT64_MAX);
    int used = 1;
#pragma omp parallel num_threads(T)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        // words [w0, w1) are this thread's: copy, check, count
        const i64 w0 = words * t / nt, w1 = words * (t + 1) / nt;
        const i64 b0 = 4 * w0, b1 = 4 * w1 < plane ? 4 * w1 : plane;
        if (b1 > b0) {
            std::memcpy(o_other + b0, planes + b0, b1 - b0);
            std::memcpy(o_one + b0, planes + plane + b0, b1 - b0);
        }
        const uint32_t* ow = reinterpret_cast<const uint32_t*>(o_other);
        const uint32_t* nw = reinterpret_cast<const uint32_t*>(o_one);
        i64 sum = 0;
        for (i64 w = w0; w < w1; w++) {
            uint32_t x = ow[w] & nw[w];
            if (x && both[t] == INT64_MAX) both[t] = 32 * w + __builtin_ctz(x);
            sum += __builtin_popcount(ow[w]);
        }
        part[t + 1] = sum;
#pragma omp barrier
#pragma omp single
        {
            used = nt;
            for (int k = 0; k < nt; k++) part[k + 1] += part[k];
        }
        i64 run = part[t];
        for (i64 w = w0; w < w1; w++) {
            offs[w] = (uint32_t)run;
            run += __builtin_popcount(ow[w]);
        }
        // elements [e0, e1): copied and checked below the modulus
        const i64 e0 = m * t / nt, e1 = m * (t + 1) / nt;
        if (e1 > e0) std::memcpy(o_fes + 32 * e0, fes + 32 * e0, 32 * (e1 - e0));
        const uint64_t* f = reinterpret_cast<const uint64_t*>(o_fes);
        for (i64 e = e0; e < e1; e++) {
            const uint64_t* x = f + 4 * e;
            bool below = false;
            for (int k = 3; k >= 0; k--) {
                if (x[k] != mod[k]) { below = x[k] < mod[k]; break; }
            }
            if (!below) { badfe[t] = e; break; }
        }
    }
    for (int t = 0; t < used; t++)
        if (both[t] != INT64_MAX) { *at = both[t]; return PLANES_BOTH; }
    if (part[used] != m) { *at = part[used]; return PLANES_COUNT; }
    for (int t = 0; t < used; t++)
        if (badfe[t] != INT64_MAX) { *at = badfe[t]; return PLANES_FE; }
    if (count && ((o_other[0] & 1) || !(o_one[0] & 1))) { *at = 0; return PLANES_ONE; }
    return PLANES_OK;
}

}  // extern "C"
