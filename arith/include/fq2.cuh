// Fq2 = Fq[u] / (u^2 + 1), the field of BLS12-381's G2 coordinates, for host and device.
//
// An element is c0 + c1 u with c0, c1 in Montgomery form (fq_t), each fully reduced; every
// operation keeps that. Multiplication by the sextic non-residue xi = 1 + u is here because the
// twisted curve's b' = 4 (1 + u) and the G2 formulas use it. Same contracts as ff.cuh: inputs
// reduced, outputs reduced (docs/gpu.md lists what non-reduced inputs each op tolerates).
#pragma once
#include "fr.cuh"

struct fq2_t {
    fq_t c0, c1;

    FF_FN static fq2_t make(const fq_t& a, const fq_t& b) {
        fq2_t r;
        r.c0 = a;
        r.c1 = b;
        return r;
    }
    FF_FN static fq2_t zero() { return make(fq_t::zero(), fq_t::zero()); }
    // Montgomery form of 1 + 0u
    FF_FN static fq2_t one() { return make(fq_t::one(), fq_t::zero()); }
    // c0 limbs then c1 limbs (24 x 32 bits), as the ZCash serialisation orders them after
    // byte reversal: c1 is the more significant half there.
    FF_FN static fq2_t from_limbs(const uint32_t* limbs) {
        return make(fq_t::from_limbs(limbs), fq_t::from_limbs(limbs + fq_t::N));
    }
    FF_FN void to_limbs(uint32_t* limbs) const {
#pragma unroll
        for (int i = 0; i < fq_t::N; i++) {
            limbs[i] = c0.v[i];
            limbs[fq_t::N + i] = c1.v[i];
        }
    }

    FF_FN bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    FF_FN bool operator==(const fq2_t& o) const { return c0 == o.c0 && c1 == o.c1; }
    FF_FN bool operator!=(const fq2_t& o) const { return !(*this == o); }

    // (a0 + b0) + (a1 + b1) u
    FF_FN friend fq2_t operator+(const fq2_t& a, const fq2_t& b) {
        return make(a.c0 + b.c0, a.c1 + b.c1);
    }
    FF_FN friend fq2_t operator-(const fq2_t& a, const fq2_t& b) {
        return make(a.c0 - b.c0, a.c1 - b.c1);
    }
    FF_FN fq2_t operator-() const { return make(-c0, -c1); }
    FF_FN fq2_t dbl() const { return make(c0.dbl(), c1.dbl()); }
    // a0 - a1 u (the Frobenius map on Fq2)
    FF_FN fq2_t conj() const { return make(c0, -c1); }

    // Karatsuba, 3 Fq products:
    // (a0 + a1 u)(b0 + b1 u) = (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u
    FF_FN friend fq2_t operator*(const fq2_t& a, const fq2_t& b) {
        fq_t t0 = a.c0 * b.c0, t1 = a.c1 * b.c1;
        fq_t s = (a.c0 + a.c1) * (b.c0 + b.c1);
        return make(t0 - t1, s - t0 - t1);
    }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u, 2 Fq products
    FF_FN fq2_t sqr() const {
        fq_t t = c0 * c1;
        return make((c0 + c1) * (c0 - c1), t.dbl());
    }
    // Lazy reduction for the lean products' operands. For reduced x, y (< p, p < 2^381):
    // add_lazy = x + y and sub_lazy = x - y + p both lie in [0, 2p) (sub_lazy: (0, 2p)), below
    // 2^382, so no carry leaves the 12 limbs and no reduction is done. As the operands a, b of
    // a Montgomery product they are allowed (ff.cuh / ff_ptx.cuh: a <= R - p since 3p < R, b < R)
    // and the product still comes out reduced: before its one conditional subtraction it is
    // (a b + m p) / R < (2p)^2 / R + p = p (1 + 4p / R) < 1.5 p, as 4p / R < 2^383 / 2^384.
    FF_FN static fq_t add_lazy(const fq_t& x, const fq_t& y) {
        fq_t r;
#if defined(FF_USE_PTX)
        asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(x.v[0]), "r"(y.v[0]));
#pragma unroll
        for (int j = 1; j < fq_t::N - 1; j++)
            asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r.v[j]) : "r"(x.v[j]), "r"(y.v[j]));
        asm volatile("addc.u32 %0, %1, %2;" : "=r"(r.v[fq_t::N - 1]) : "r"(x.v[fq_t::N - 1]),
                     "r"(y.v[fq_t::N - 1]));
#else
        uint64_t c = 0;
        for (int j = 0; j < fq_t::N; j++) {
            c += (uint64_t)x.v[j] + y.v[j];
            r.v[j] = (uint32_t)c;
            c >>= 32;
        }
#endif
        return r;
    }
    FF_FN static fq_t sub_lazy(const fq_t& x, const fq_t& y) {
        fq_t r;  // (x - y) mod 2^384, then + p mod 2^384: exact, as x - y + p is in (0, 2p)
#if defined(FF_USE_PTX)
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(x.v[0]), "r"(y.v[0]));
#pragma unroll
        for (int j = 1; j < fq_t::N; j++)
            asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r.v[j]) : "r"(x.v[j]), "r"(y.v[j]));
        asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(r.v[0]) : "r"(fq_params::mod(0)));
#pragma unroll
        for (int j = 1; j < fq_t::N - 1; j++)
            asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(r.v[j]) : "r"(fq_params::mod(j)));
        asm volatile("addc.u32 %0, %0, %1;" : "+r"(r.v[fq_t::N - 1]) : "r"(fq_params::mod(fq_t::N - 1)));
#else
        uint64_t b = 0, c = 0;
        for (int j = 0; j < fq_t::N; j++) {
            uint64_t d = (uint64_t)x.v[j] - y.v[j] - b;
            b = (d >> 32) & 1;
            c += (uint64_t)(uint32_t)d + fq_params::mod(j);
            r.v[j] = (uint32_t)c;
            c >>= 32;
        }
#endif
        return r;
    }

    // The same two products with fewer values live (the G2 accumulation's lean kernel,
    // xyzz_t::add_affine_lean), their sums lazy (above): the cross term first, so beside the operands at most two Fq
    // values are held while a product runs (the Fq products are volatile asm, so nvcc keeps
    // this order): s = (a0 + a1)(b0 + b1), t0 = a0 b0, s -= t0, t1 = a1 b1,
    // result (t0 - t1) + (s - t1) u. operator* holds t0, t1 and both sums (four) at its peak.
    FF_FN static fq2_t mul_lean(const fq2_t& a, const fq2_t& b) {
        fq_t s = add_lazy(a.c0, a.c1) * add_lazy(b.c0, b.c1);
        fq_t t0 = a.c0 * b.c0;
        s = s - t0;
        fq_t t1 = a.c1 * b.c1;
        return make(t0 - t1, s - t1);
    }
    // sqr() with the sum-difference product first: (a0 + a1)(a0 - a1) + 2 a0 a1 u
    FF_FN fq2_t sqr_lean() const {
        fq_t r0 = add_lazy(c0, c1) * sub_lazy(c0, c1);
        fq_t t = c0 * c1;
        return make(r0, t.dbl());
    }
    // a * Fq scalar k (Montgomery form), 2 Fq products
    FF_FN fq2_t scale(const fq_t& k) const { return make(c0 * k, c1 * k); }
    // a * (1 + u) = (a0 - a1) + (a0 + a1) u
    FF_FN fq2_t mul_by_xi() const { return make(c0 - c1, c0 + c1); }
    // (a0 + a1 u)^-1 = (a0 - a1 u) / (a0^2 + a1^2); 0 maps to 0, callers check.
    FF_FN fq2_t inv() const {
        fq_t t = (c0.sqr() + c1.sqr()).inv();
        return make(c0 * t, -(c1 * t));
    }
    // x^e for e given as little-endian 32-bit limbs (square and multiply, MSB first)
    FF_FN fq2_t pow(const uint32_t* e, int limbs) const {
        fq2_t r = one();
        for (int i = limbs - 1; i >= 0; i--)
            for (int b = 31; b >= 0; b--) {
                r = r.sqr();
                if ((e[i] >> b) & 1) r = r * *this;
            }
        return r;
    }
    FF_FN fq2_t to_mont() const { return make(c0.to_mont(), c1.to_mont()); }
    FF_FN fq2_t from_mont() const { return make(c0.from_mont(), c1.from_mont()); }

    FF_FN fq2_t& operator+=(const fq2_t& o) { return *this = *this + o; }
    FF_FN fq2_t& operator-=(const fq2_t& o) { return *this = *this - o; }
    FF_FN fq2_t& operator*=(const fq2_t& o) { return *this = *this * o; }
};
