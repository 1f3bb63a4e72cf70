// The circuit's matrices in the compact, replicated form (synthesis/compact.py `Replicated`), and
// the device setup's field steps. Shared by the device kernels (compact.cu) and the host build
// (gpu/native/compact_host.cpp), which the CPU tests run against the full-CSR reference.
//
// A matrix: `hrows` header rows (CSR over global columns), then `copies` copies of a block of
// `brows` rows whose template-local column x stands for global column base[x] + j * stride[x] in
// copy j. Coefficients are indices into one table of canonical Fr values (header entries index
// its front, block entries follow). A plain compact matrix is a header with copies = 0.
//
// All vectors are canonical Fr limbs (8 x u32 an element); constants passed in are Montgomery
// limbs (c R mod r), so mont_mul(x, cR) = x c stays canonical (the convention of ntt.cu).
#pragma once
#include "fr.cuh"

typedef int64_t i64;

struct rep_matrix_t {
    i64 hrows, brows, copies;
    const i64* h_ptr;        // hrows + 1
    const int32_t* h_col;    // global columns
    const uint32_t* h_coef;  // table indices
    const i64* b_ptr;        // brows + 1
    const int32_t* b_col;    // template-local columns
    const uint32_t* b_coef;
    const uint32_t* table;   // canonical Fr coefficients
    const i64* base;         // per local column
    const i64* stride;
};

FF_FN bool rep_is_one(const uint32_t* p) {
    uint32_t acc = p[0] ^ 1u;
#pragma unroll
    for (int i = 1; i < 8; i++) acc |= p[i];
    return acc == 0;
}

// One element (8 limbs, 32-byte aligned: every vector and table here is): on the device two
// 16-byte loads instead of eight 4-byte ones (the product's z gathers were eight transactions
// an element); the host build reads the limbs.
FF_FN fr_t rep_load(const uint32_t* p) {
#ifdef __CUDA_ARCH__
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = q[0], b = q[1];
    fr_t r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
#else
    return fr_t::from_limbs(p);
#endif
}

FF_FN bool rep_is_one(const fr_t& c) { return rep_is_one(c.v); }

#ifndef REP_BATCH
#define REP_BATCH 4
#endif
// Rows longer than this go to rep_spmv_long (a warp a row): sdr's A holds packing rows of
// hundreds of terms among rows of one to three, and one thread walking such a row kept its
// warp and the kernel's tail waiting (A z 209 ms against B z 9 ms at 2^27 on the H200).
#ifndef REP_LONG
#define REP_LONG 32
#endif
FF_FN uint32_t rep_popc(uint32_t x) {
#if defined(__CUDA_ARCH__)
    return (uint32_t)__popc(x);
#else
    return (uint32_t)__builtin_popcount(x);
#endif
}
// c z of one term into the row's sums: a unit coefficient adds z itself, another c z R^-1
// (rep_finish moves those back)
FF_FN void rep_add_term(const fr_t& zv, const fr_t& c, fr_t& plain, fr_t& mont,
                        bool& any_mont) {
    if (rep_is_one(c)) plain += zv;
    else { mont += c * zv; any_mont = true; }
}
// Where a product reads z. z_vec_t: the expanded vector (8 limbs an element). z_planes_t: the
// compact assignment itself (synthesis/assignment.py, the buffer gpu/cuda/compact.py
// expand_assignment uploads): bit i of `other` says "the next field element" (offs[w] = other
// bits before 32-bit word w, fes the elements), else bit i of `one` is the value. Why the
// planes: a 32 GiB PoRep witness is 98.7% 0s and 1s, and the product's time is its z gathers
// (32 random bytes a term: ~600 GB/s on the H200, 36 ms of the 42 ms matvec at 2^27), where
// the planes are 2 bits a variable (32 MB at 2^27, mostly in L2) and a 0 or a 1 takes no
// product at all: c * 1 is the canonical coefficient itself.
struct z_vec_t {
    const uint32_t* z;
    typedef fr_t fetch_t;
    FF_FN fetch_t fetch(i64 i) const { return rep_load(z + 8 * i); }
    FF_FN void add(const fetch_t& zv, i64, const fr_t& c, fr_t& plain, fr_t& mont,
                   bool& any_mont) const {
        rep_add_term(zv, c, plain, mont, any_mont);
    }
};
struct z_planes_t {
    const uint32_t* other;
    const uint32_t* one;
    const uint32_t* offs;
    const uint32_t* fes;
    struct fetch_t { uint32_t other, one; };
    FF_FN fetch_t fetch(i64 i) const {
        i64 w = i >> 5;
        fetch_t f = {other[w], one[w]};
        return f;
    }
    FF_FN void add(const fetch_t& f, i64 i, const fr_t& c, fr_t& plain, fr_t& mont,
                   bool& any_mont) const {
        uint32_t b = (uint32_t)(i & 31);
        if ((f.other >> b) & 1u) {
            i64 k = (i64)offs[i >> 5] + rep_popc(f.other & ((1u << b) - 1u));
            rep_add_term(rep_load(fes + 8 * k), c, plain, mont, any_mont);
        } else if ((f.one >> b) & 1u) {
            plain += c;
        }
    }
};
// Terms lo + first, lo + first + step, ... of a row, REP_BATCH at a time: the batch's column and
// coefficient indices are read, then all its z and coefficient loads issued, then the products,
// so a thread has up to REP_BATCH gathers in flight instead of one dependent chain a term.
// step = 1: a whole row (one thread a row); step = 32: a warp's lane of a long row.
template <class Z>
FF_FN void rep_terms(fr_t& plain, fr_t& mont, bool& any_mont, i64 lo, i64 hi, int first,
                     int step, const int32_t* cols, const uint32_t* coefs, const uint32_t* table,
                     const Z& z, const i64* base, const i64* stride, i64 j) {
    for (i64 k0 = lo + first; k0 < hi; k0 += (i64)step * REP_BATCH) {
        i64 zi[REP_BATCH];
        const uint32_t* cp[REP_BATCH];
#pragma unroll
        for (int u = 0; u < REP_BATCH; u++) {
            i64 k = k0 + (i64)u * step < hi ? k0 + (i64)u * step : lo;  // past the row: term lo
            i64 x = cols[k];
            zi[u] = base ? base[x] + j * stride[x] : x;
            cp[u] = table + 8 * (i64)coefs[k];
        }
        typename Z::fetch_t zv[REP_BATCH];
        fr_t cv[REP_BATCH];
#pragma unroll
        for (int u = 0; u < REP_BATCH; u++) {
            zv[u] = z.fetch(zi[u]);
            cv[u] = rep_load(cp[u]);
        }
#pragma unroll
        for (int u = 0; u < REP_BATCH; u++) {
            if (k0 + (i64)u * step >= hi) break;
            z.add(zv[u], zi[u], cv[u], plain, mont, any_mont);
        }
    }
}
// Number of terms of row r.
FF_FN i64 rep_row_len(const rep_matrix_t& m, i64 r) {
    if (r < m.hrows) return m.h_ptr[r + 1] - m.h_ptr[r];
    i64 rr = (r - m.hrows) % m.brows;
    return m.b_ptr[rr + 1] - m.b_ptr[rr];
}

// The terms first, first + step, ... of row r into (plain, mont, any_mont).
template <class Z>
FF_FN void rep_row_part(const rep_matrix_t& m, i64 r, const Z& z, int first, int step,
                        fr_t& plain, fr_t& mont, bool& any_mont) {
    if (r < m.hrows) {
        rep_terms(plain, mont, any_mont, m.h_ptr[r], m.h_ptr[r + 1], first, step, m.h_col,
                  m.h_coef, m.table, z, nullptr, nullptr, 0);
    } else {
        i64 q = r - m.hrows, j = q / m.brows, rr = q - j * m.brows;
        rep_terms(plain, mont, any_mont, m.b_ptr[rr], m.b_ptr[rr + 1], first, step, m.b_col,
                  m.b_coef, m.table, z, m.base, m.stride, j);
    }
}

// plain + mont R (mont holds c z R^-1 sums: one product with R^2 moves them back)
FF_FN fr_t rep_finish(fr_t plain, const fr_t& mont, bool any_mont) {
    if (any_mont) plain += mont * fr_t::r2();
    return plain;
}

// <row r, z>: the unit coefficients summed directly, the others as c z R^-1, moved back by one
// product with R^2 (arith/include/spmv.cuh does the same for full CSR).
template <class Z>
FF_FN fr_t rep_row(const rep_matrix_t& m, i64 r, const Z& z) {
    fr_t plain = fr_t::zero(), mont = fr_t::zero();
    bool any_mont = false;
    rep_row_part(m, r, z, 0, 1, plain, mont, any_mont);
    return rep_finish(plain, mont, any_mont);
}

// The same row as `lanes` strided parts summed (what rep_spmv_long's warp does; the host
// build checks it against rep_row).
template <class Z>
FF_FN fr_t rep_row_lanes(const rep_matrix_t& m, i64 r, const Z& z, int lanes) {
    fr_t plain = fr_t::zero(), mont = fr_t::zero();
    bool any_mont = false;
    for (int lane = 0; lane < lanes; lane++) {
        fr_t p = fr_t::zero(), q = fr_t::zero();
        bool a = false;
        rep_row_part(m, r, z, lane, lanes, p, q, a);
        plain += p;
        mont += q;
        any_mont |= a;
    }
    return rep_finish(plain, mont, any_mont);
}

// sum_k coef_k * x[rows_k] over one column of a transposed (CSC) block, canonical.
FF_FN fr_t rep_col_dot(i64 lo, i64 hi, const int32_t* rows, const uint32_t* coef,
                       const uint32_t* table, const uint32_t* x, i64 row0) {
    fr_t plain = fr_t::zero(), mont = fr_t::zero();
    bool any_mont = false;
    for (i64 k = lo; k < hi; k++) {
        fr_t xk = fr_t::from_limbs(x + 8 * (row0 + rows[k]));
        const uint32_t* ck = table + 8 * (i64)coef[k];
        if (rep_is_one(ck)) plain += xk;
        else { mont += fr_t::from_limbs(ck) * xk; any_mont = true; }
    }
    if (any_mont) plain += mont * fr_t::r2();
    return plain;
}

FF_FN void rep_store(uint32_t* p, const fr_t& v) {
#ifdef __CUDA_ARCH__
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(v.v[0], v.v[1], v.v[2], v.v[3]);
    q[1] = make_uint4(v.v[4], v.v[5], v.v[6], v.v[7]);
#else
#pragma unroll
    for (int i = 0; i < 8; i++) p[i] = v.v[i];
#endif
}

// The transposed block product, balanced: a block column's entries come in pieces of at most a
// few thousand (sdr's shared columns, e.g. the constant one in every boolean constraint, hold
// millions), so one thread never walks a whole heavy column. Task t = j * npieces + piece:
//   scratch[t] = sum over the piece's entries of coef * L[hrows + j * brows + row].
FF_FN void rep_t_piece(i64 t, i64 npieces, i64 hrows, i64 brows, const i64* piece_lo,
                       const int32_t* bt_row, const uint32_t* bt_coef, const uint32_t* table,
                       const uint32_t* L, uint32_t* scratch) {
    i64 j = t / npieces, pc = t - j * npieces;
    rep_store(scratch + 8 * t, rep_col_dot(piece_lo[pc], piece_lo[pc + 1], bt_row, bt_coef, table,
                                           L, hrows + j * brows));
}

// Then task t = j * nloc + x sums its column's pieces into out[base[x] + j * stride[x]]; a shared
// column (stride 0) sums every copy's pieces in the task of copy 0 (the others return), so no
// two tasks write one element (gpu/native/compact.py check_columns guarantees the layout).
FF_FN void rep_t_gather(i64 t, i64 nloc, i64 copies, i64 npieces, const i64* piece_ptr,
                        const i64* base, const i64* stride, const uint32_t* scratch, uint32_t* out) {
    i64 j = t / nloc, x = t - j * nloc;
    i64 lo = piece_ptr[x], hi = piece_ptr[x + 1];
    bool shared = stride[x] == 0;
    if (shared && j) return;
    fr_t u = fr_t::zero();
    for (i64 jj = shared ? 0 : j; jj < (shared ? copies : j + 1); jj++)
        for (i64 pc = lo; pc < hi; pc++) u += fr_t::from_limbs(scratch + 8 * (jj * npieces + pc));
    rep_store(out + 8 * (base[x] + j * stride[x]), u);
}

// The header's transposed product, added: out[gcol[t]] += sum over header column t of coef * L[row].
FF_FN void rep_t_header(i64 t, const i64* gcol, const i64* ht_ptr, const int32_t* ht_row,
                        const uint32_t* ht_coef, const uint32_t* table, const uint32_t* L,
                        uint32_t* out) {
    uint32_t* p = out + 8 * gcol[t];
    fr_t u = fr_t::from_limbs(p) + rep_col_dot(ht_ptr[t], ht_ptr[t + 1], ht_row, ht_coef, table, L, 0);
    rep_store(p, u);
}

FF_FN fr_t rep_pow_u64(const fr_t& b, uint64_t e) {
    uint32_t l[2] = {(uint32_t)e, (uint32_t)(e >> 32)};
    return b.pow(l, 2);
}

// Lagrange basis of the domain <w> of size n at tau, for i in [lo, hi):
//   L_i(tau) = c w^i / (tau - w^i),  c = (tau^n - 1) / n,
// by Montgomery's batch inversion over the range (one inversion a range). w, winv, tau, c in
// Montgomery form; out canonical. tau must not be in the domain (the host checks tau^n != 1).
FF_FN void lagrange_range(i64 lo, i64 hi, const fr_t& w, const fr_t& winv, const fr_t& tau,
                          const fr_t& c, uint32_t* out) {
    if (lo >= hi) return;
    fr_t wi = rep_pow_u64(w, (uint64_t)lo), acc = fr_t::one();
    for (i64 i = lo; i < hi; i++) {  // out[i] = prod_{lo <= k < i} (tau - w^k), Montgomery
        rep_store(out + 8 * i, acc);
        acc = acc * (tau - wi);
        if (i + 1 < hi) wi = wi * w;
    }
    fr_t inv = acc.inv();  // 1 / prod over the range
    for (i64 i = hi - 1; i >= lo; i--) {
        fr_t d = tau - wi;
        fr_t di = inv * fr_t::from_limbs(out + 8 * i);  // 1 / (tau - w^i)
        inv = inv * d;
        rep_store(out + 8 * i, (c * wi * di).from_mont());
        wi = wi * winv;
    }
}

// out[i] = c x^i (canonical) for i in [lo, hi); x, c Montgomery.
FF_FN void powers_range(i64 lo, i64 hi, const fr_t& x, const fr_t& c, uint32_t* out) {
    if (lo >= hi) return;
    fr_t v = c * rep_pow_u64(x, (uint64_t)lo);
    for (i64 i = lo; i < hi; i++) {
        rep_store(out + 8 * i, v.from_mont());
        v = v * x;
    }
}

// out[i] = (beta u_i + alpha v_i + w_i) k for canonical u, v, w and Montgomery beta, alpha, k.
FF_FN void lincomb_one(i64 i, const uint32_t* u, const uint32_t* v, const uint32_t* w,
                       const fr_t& beta, const fr_t& alpha, const fr_t& k, uint32_t* out) {
    fr_t s = fr_t::from_limbs(u + 8 * i) * beta + fr_t::from_limbs(v + 8 * i) * alpha +
             fr_t::from_limbs(w + 8 * i);
    rep_store(out + 8 * i, s * k);
}

// z[i] from the compact assignment (synthesis/assignment.py): bit i of `other` says "the next
// field element", else bit i of `one` is the value; offs[w] = other bits before 32-bit word w.
FF_FN void expand_one(i64 i, const uint32_t* other, const uint32_t* one, const uint32_t* offs,
                      const uint32_t* fes, uint32_t* z) {
    i64 w = i >> 5;
    uint32_t b = (uint32_t)(i & 31), ow = other[w];
    uint32_t* p = z + 8 * i;
    if ((ow >> b) & 1u) {
        uint32_t below = ow & ((1u << b) - 1u);
#if defined(__CUDA_ARCH__)
        uint32_t cnt = __popc(below);
#else
        uint32_t cnt = (uint32_t)__builtin_popcount(below);
#endif
        const uint32_t* f = fes + 8 * (i64)(offs[w] + cnt);
#pragma unroll
        for (int k = 0; k < 8; k++) p[k] = f[k];
    } else {
        p[0] = (one[w] >> b) & 1u;
#pragma unroll
        for (int k = 1; k < 8; k++) p[k] = 0;
    }
}
