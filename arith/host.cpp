// Host library: vectorised Fr arithmetic for the CPU backend and for witness generation.
//
// Built by arith/native.py with g++ from the same ff.cuh the CUDA kernels use. Every
// vector crosses this C ABI in canonical form (fully reduced, not Montgomery), 32 bytes per
// element, little-endian: uint32_t[8] per element on a little-endian host. Conversions into and
// out of Montgomery form happen here, once per call, not per operation.
#include <stdint.h>
#include <string.h>
#include <vector>
#include "include/fr.cuh"
#include "include/spmv.cuh"
#include "include/field_ops.cuh"
#include "include/fq2.cuh"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef int64_t i64;
// Parallelise only loops long enough to pay for the thread start.
#define PAR_MIN 4096

namespace {

inline fr_t load(const uint32_t* p) { return fr_t::from_limbs(p).to_mont(); }
inline void store(uint32_t* p, const fr_t& x) {
    fr_t c = x.from_mont();
    memcpy(p, c.v, sizeof c.v);
}

// Generator 7 in Montgomery form; the coset shift of the QAP domain (as arkworks).
fr_t generator() {
    uint32_t g[8] = {7, 0, 0, 0, 0, 0, 0, 0};
    return fr_t::from_limbs(g).to_mont();
}

void bit_reverse(fr_t* a, int log_n) {
    i64 n = (i64)1 << log_n;
    for (i64 i = 0, j = 0; i < n; i++) {
        if (i < j) { fr_t t = a[i]; a[i] = a[j]; a[j] = t; }
        i64 bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
    }
}

// In-place NTT, natural order in and out: bit-reversal then iterative Cooley-Tukey (DIT).
// omega is a primitive 2^log_n-th root of unity (Montgomery form).
void ntt(fr_t* a, int log_n, const fr_t& omega) {
    i64 n = (i64)1 << log_n;
    if (n == 1) return;
    bit_reverse(a, log_n);
    std::vector<fr_t> tw(n / 2);  // omega^k, k < n/2
    tw[0] = fr_t::one();
    for (i64 k = 1; k < n / 2; k++) tw[k] = tw[k - 1] * omega;
    for (int s = 1; s <= log_n; s++) {
        i64 half = (i64)1 << (s - 1), stride = n >> s;  // twiddle step in tw[]
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
        for (i64 blk = 0; blk < n / 2; blk++) {
            i64 group = blk / half, j = blk % half;
            i64 i0 = group * 2 * half + j, i1 = i0 + half;
            fr_t t = a[i1] * tw[j * stride];
            a[i1] = a[i0] - t;
            a[i0] = a[i0] + t;
        }
    }
}

fr_t root_of_unity(int log_n) {
    // TWO_ADIC_ROOT = 7^((r-1)/2^32), canonical limbs
    static const uint32_t root[8] = {0x439f0d2bu, 0x3829971fu, 0x8c2280b9u, 0xb6368350u,
                                     0x22c813b4u, 0xd09b6819u, 0xdfe81f20u, 0x16a2a19eu};
    fr_t w = fr_t::from_limbs(root).to_mont();
    for (int i = log_n; i < 32; i++) w = w.sqr();
    return w;
}

fr_t from_u64(uint64_t x) {
    uint32_t l[8] = {(uint32_t)x, (uint32_t)(x >> 32), 0, 0, 0, 0, 0, 0};
    return fr_t::from_limbs(l).to_mont();
}

// a[i] *= shift^i
void scale_powers(fr_t* a, i64 n, const fr_t& shift) {
    // chunked so each thread starts from shift^(chunk start)
    const i64 chunk = 1 << 12;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 c0 = 0; c0 < n; c0 += chunk) {
        uint32_t e[2] = {(uint32_t)c0, (uint32_t)((uint64_t)c0 >> 32)};
        fr_t p = shift.pow(e, 2);
        i64 end = c0 + chunk < n ? c0 + chunk : n;
        for (i64 i = c0; i < end; i++) { a[i] = a[i] * p; p = p * shift; }
    }
}

void load_vec(fr_t* dst, const uint32_t* src, i64 n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) dst[i] = load(src + 8 * i);
}
void store_vec(uint32_t* dst, const fr_t* src, i64 n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) store(dst + 8 * i, src[i]);
}

// forward (coset) or inverse (coset) transform on Montgomery data
void transform(fr_t* a, int log_n, bool inverse, bool coset) {
    i64 n = (i64)1 << log_n;
    fr_t w = root_of_unity(log_n);
    if (!inverse) {
        if (coset) scale_powers(a, n, generator());
        ntt(a, log_n, w);
    } else {
        ntt(a, log_n, w.inv());
        fr_t n_inv = from_u64((uint64_t)n).inv();
        if (coset) {
            // scale by n^-1 g^-i in one pass: first n^-1, then g^-i
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
            for (i64 i = 0; i < n; i++) a[i] = a[i] * n_inv;
            scale_powers(a, n, generator().inv());
        } else {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
            for (i64 i = 0; i < n; i++) a[i] = a[i] * n_inv;
        }
    }
}

}  // namespace

extern "C" {

int zk_num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// out = a + b, a - b, a * b (elementwise); out may alias a or b.
void fr_vec_add(i64 n, const uint32_t* a, const uint32_t* b, uint32_t* out) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) {
        fr_t r = fr_t::from_limbs(a + 8 * i) + fr_t::from_limbs(b + 8 * i);  // no Montgomery needed
        memcpy(out + 8 * i, r.v, 32);
    }
}
void fr_vec_sub(i64 n, const uint32_t* a, const uint32_t* b, uint32_t* out) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) {
        fr_t r = fr_t::from_limbs(a + 8 * i) - fr_t::from_limbs(b + 8 * i);
        memcpy(out + 8 * i, r.v, 32);
    }
}
void fr_vec_mul(i64 n, const uint32_t* a, const uint32_t* b, uint32_t* out) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) {
        // (a * b / R) * R^2 / R = a * b: two Montgomery products, no conversion of either input
        fr_t r = (fr_t::from_limbs(a + 8 * i) * fr_t::from_limbs(b + 8 * i)) * fr_t::r2();
        memcpy(out + 8 * i, r.v, 32);
    }
}
// out[i] = a[i]^e, e given as 4 little-endian 64-bit limbs (8 x 32).
void fr_vec_pow(i64 n, const uint32_t* a, const uint32_t* e, uint32_t* out) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) store(out + 8 * i, load(a + 8 * i).pow(e, 8));
}
// Batch inversion (Montgomery's trick). Returns -1, or the index of the first zero (then out is
// left unspecified).
i64 fr_vec_inv(i64 n, const uint32_t* a, uint32_t* out) {
    std::vector<fr_t> pre(n);
    fr_t acc = fr_t::one();
    for (i64 i = 0; i < n; i++) {
        fr_t x = load(a + 8 * i);
        if (x.is_zero()) return i;
        pre[i] = acc;
        acc = acc * x;
    }
    fr_t inv = acc.inv();
    for (i64 i = n - 1; i >= 0; i--) {
        fr_t x = load(a + 8 * i);
        store(out + 8 * i, inv * pre[i]);
        inv = inv * x;
    }
    return -1;
}

// out[row] = sum_k coeffs[k] * z[indices[k]] over each CSR row (spmv.cuh, shared with the GPU).
void fr_spmv(i64 rows, const i64* indptr, const i64* indices, const uint32_t* coeffs,
             const uint32_t* z, uint32_t* out) {
#pragma omp parallel for schedule(dynamic, 1024) if (rows >= PAR_MIN)
    for (i64 r = 0; r < rows; r++) {
        fr_t v = spmv_row(indptr[r], indptr[r + 1], indices, coeffs, z);
        memcpy(out + 8 * r, v.v, 32);
    }
}

// out[col] = sum over rows r of coeffs * x[r] (the transpose product; used by setup).
// Accumulates canonically: a unit coefficient adds x[r] as it is, any other adds the Montgomery
// product of the canonical coefficient and x[r] R, which is c x[r] itself: one product an entry
// at most, and most R1CS coefficients are 1. (A scatter over columns: one thread.)
void fr_spmv_t(i64 rows, i64 cols, const i64* indptr, const i64* indices, const uint32_t* coeffs,
               const uint32_t* x, uint32_t* out) {
    std::vector<fr_t> acc(cols, fr_t::zero());
    for (i64 r = 0; r < rows; r++) {
        fr_t xr = fr_t::from_limbs(x + 8 * r), xr_mont = xr.to_mont();
        for (i64 k = indptr[r]; k < indptr[r + 1]; k++) {
            const uint32_t* ck = coeffs + 8 * k;
            acc[indices[k]] += fr_limbs_are_one(ck) ? xr : fr_t::from_limbs(ck) * xr_mont;
        }
    }
    for (i64 c = 0; c < cols; c++) memcpy(out + 8 * c, acc[c].v, 32);
}

// In-place (coset) NTT / inverse NTT of 2^log_n canonical elements, natural order in and out.
// Returns 0, or -1 for an unsupported size.
int fr_ntt(int log_n, uint32_t* data, int inverse, int coset) {
    if (log_n < 0 || log_n > 32) return -1;
    i64 n = (i64)1 << log_n;
    std::vector<fr_t> a(n);
    load_vec(a.data(), data, n);
    transform(a.data(), log_n, inverse != 0, coset != 0);
    store_vec(data, a.data(), n);
    return 0;
}

// The QAP step of Groth16 (arkworks' witness_map): from the evaluations of A z, B z, C z over the
// domain H of size n to the coefficients of H(X) = (A(X) B(X) - C(X)) / Z(X), in 6 NTTs:
//   A and B: inverse NTT, coset NTT (their evaluations on the coset gH);
//   C: inverse NTT only (its coefficients);
//   H = iNTT_coset(A B / Z(g)) - C / Z(g).
// Why C needs no coset round trip: Z(X) = X^n - 1 is the constant Z(g) = g^n - 1 on gH, so
// H = iNTT_coset((A B - C) / Z(g)), the inverse coset NTT is linear, and C has degree < n, so
// iNTT_coset of C's coset evaluations is C's coefficients again: the 7th NTT (arkworks' and
// bellperson's coset NTT of C, then its share of the last inverse) cancels out. The result is
// the same vector to the bit, whether or not c satisfies the system. Writes n coefficients to h
// (the top one is zero when the witness satisfies the system). Returns 0 or -1 (bad size).
int fr_compute_h(int log_n, const uint32_t* a_in, const uint32_t* b_in, const uint32_t* c_in,
                 uint32_t* h) {
    if (log_n < 0 || log_n > 32) return -1;
    i64 n = (i64)1 << log_n;
    std::vector<fr_t> a(n), b(n), c(n);
    load_vec(a.data(), a_in, n);
    load_vec(b.data(), b_in, n);
    load_vec(c.data(), c_in, n);
    for (fr_t* v : {a.data(), b.data()}) {
        transform(v, log_n, true, false);
        transform(v, log_n, false, true);
    }
    transform(c.data(), log_n, true, false);
    uint32_t e[2] = {(uint32_t)n, (uint32_t)((uint64_t)n >> 32)};
    fr_t z_inv = (generator().pow(e, 2) - fr_t::one()).inv();
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) a[i] = a[i] * b[i] * z_inv;
    transform(a.data(), log_n, true, true);
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (i64 i = 0; i < n; i++) a[i] = a[i] - c[i] * z_inv;
    store_vec(h, a.data(), n);
    return 0;
}

// Evaluations of the Lagrange basis of H (size 2^log_n) at tau, canonical out (setup):
//   L_j(tau) = (tau^n - 1) / n * omega^j / (tau - omega^j).
// Returns -1 when tau is in H (then the basis is degenerate and setup must draw again).
int fr_lagrange_at(int log_n, const uint32_t* tau_in, uint32_t* out) {
    i64 n = (i64)1 << log_n;
    fr_t tau = load(tau_in), w = root_of_unity(log_n);
    std::vector<fr_t> den(n), wj(n);
    fr_t p = fr_t::one();
    for (i64 j = 0; j < n; j++) { wj[j] = p; den[j] = tau - p; if (den[j].is_zero()) return -1; p = p * w; }
    // batch inverse of den
    std::vector<fr_t> pre(n);
    fr_t acc = fr_t::one();
    for (i64 j = 0; j < n; j++) { pre[j] = acc; acc = acc * den[j]; }
    fr_t inv = acc.inv();
    for (i64 j = n - 1; j >= 0; j--) { fr_t t = inv * pre[j]; inv = inv * den[j]; den[j] = t; }
    uint32_t e[2] = {(uint32_t)n, (uint32_t)((uint64_t)n >> 32)};
    fr_t zt = (tau.pow(e, 2) - fr_t::one()) * from_u64((uint64_t)n).inv();
    for (i64 j = 0; j < n; j++) store(out + 8 * j, zt * wj[j] * den[j]);
    return 0;
}

// out[i] = base * ratio^i (canonical), e.g. the powers of tau for the h query.
void fr_powers(i64 n, const uint32_t* base, const uint32_t* ratio, uint32_t* out) {
    std::vector<fr_t> a(n, load(base));
    scale_powers(a.data(), n, load(ratio));
    store_vec(out, a.data(), n);
}

// Test hooks (field_ops.cuh): one operation on raw limbs, for the field unit tests.
void fr_op(int op, const uint32_t* a, const uint32_t* b, uint32_t* out) {
    fr_t r = field_op(op, fr_t::from_limbs(a), fr_t::from_limbs(b));
    memcpy(out, r.v, 32);
}
void fq_op(int op, const uint32_t* a, const uint32_t* b, uint32_t* out) {
    fq_t r = field_op(op, fq_t::from_limbs(a), fq_t::from_limbs(b));
    memcpy(out, r.v, 48);
}
// Fq2: c0 limbs then c1 limbs, canonical.
void fq2_op(int op, const uint32_t* a, const uint32_t* b, uint32_t* out) {
    fq2_field_op(op, fq2_t::from_limbs(a), fq2_t::from_limbs(b)).to_limbs(out);
}

}  // extern "C"
