// Short Weierstrass point arithmetic (y^2 = x^3 + b, a = 0) for BLS12-381 G1 (over Fq) and G2
// (over Fq2), for host and device; one template over the coordinate field F.
//
// Bases are affine; accumulators are XYZZ (Cohen-Miyaji-Ono's extended Jacobian as in the EFD
// "xyzz" page): (X, Y, ZZ, ZZZ) stands for x = X/ZZ, y = Y/ZZZ with ZZ^3 = ZZZ^2. A mixed
// addition is 8M + 2S with no doubling of Z, which is why sppark and the ZPrize MSMs use it for
// buckets. The point at infinity is ZZ = 0 (all-zero memory, so a zeroed buffer is a buffer of
// identities); an affine identity is x = y = 0, the arkworks xy encoding (not on the curve: b != 0).
//
// F needs: +, -, *, sqr(), dbl(), is_zero(), zero(), one(), inv(), ==.
#pragma once
#include <stdint.h>

#ifndef CURVE_FN
#if defined(__CUDACC__)
#define CURVE_FN __host__ __device__ __forceinline__
#else
#define CURVE_FN inline
#endif
#endif
// Rare or once-per-MSM paths (doublings inside an addition, to_affine, small multiples) are
// not inlined on the device: inlining them into every addition site doubled the kernels'
// code and nvcc's compile time, for no gain on the hot path.
#ifndef CURVE_COLD
#if defined(__CUDACC__)
#define CURVE_COLD __host__ __device__ __noinline__
#else
#define CURVE_COLD inline
#endif
#endif

template <class F>
struct affine_t {
    F x, y;

    CURVE_FN static affine_t identity() { return {F::zero(), F::zero()}; }
    CURVE_FN bool is_identity() const { return x.is_zero() && y.is_zero(); }
    CURVE_FN affine_t operator-() const { return {x, -y}; }
    // y^2 == x^3 + b (identity counts as on the curve: it is how the encoding writes it)
    CURVE_FN bool on_curve(const F& b) const {
        return is_identity() || y.sqr() == x.sqr() * x + b;
    }
};

// Products of the lean mixed addition: Fq2's ordered Karatsuba (fq2.cuh mul_lean, sqr_lean),
// Fq's own product (one product has no temporaries to order).
template <class F>
CURVE_FN F mul_lean(const F& a, const F& b) {
    if constexpr (sizeof(F) > 48) return F::mul_lean(a, b);
    else return a * b;
}
template <class F>
CURVE_FN F sqr_lean(const F& a) {
    if constexpr (sizeof(F) > 48) return a.sqr_lean();
    else return a.sqr();
}

template <class F>
struct xyzz_t {
    F X, Y, ZZ, ZZZ;

    CURVE_FN static xyzz_t identity() { return {F::zero(), F::zero(), F::zero(), F::zero()}; }
    CURVE_FN bool is_identity() const { return ZZ.is_zero(); }
    CURVE_FN static xyzz_t from_affine(const affine_t<F>& p) {
        if (p.is_identity()) return identity();
        return {p.x, p.y, F::one(), F::one()};
    }
    CURVE_FN xyzz_t operator-() const { return {X, -Y, ZZ, ZZZ}; }

    // dbl-2008-s-1: U = 2Y, V = U^2, W = U V, S = X V, M = 3 X^2,
    // X3 = M^2 - 2S, Y3 = M (S - X3) - W Y, ZZ3 = V ZZ, ZZZ3 = W ZZZ.   (2S + 6M... 4M + 2S here)
    CURVE_COLD xyzz_t dbl() const {
        if (is_identity()) return *this;
        F U = Y.dbl(), V = U.sqr(), W = U * V, S = X * V;
        F x2 = X.sqr(), M = x2.dbl() + x2;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }

    // mdbl-2008-s-1: the doubling of an affine point (ZZ = ZZZ = 1), the same formulas with the
    // Z products dropped (4M + 3S); used when a mixed addition meets the same point.
    CURVE_COLD static xyzz_t dbl_affine(const affine_t<F>& p) {
        F U = p.y.dbl(), V = U.sqr(), W = U * V, S = p.x * V;
        F x2 = p.x.sqr(), M = x2.dbl() + x2;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * p.y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // madd-2008-s: this += (x2, y2) affine. U2 = x2 ZZ1, S2 = y2 ZZZ1, P = U2 - X1, R = S2 - Y1,
    // PP = P^2, PPP = P PP, Q = X1 PP, X3 = R^2 - PPP - 2Q, Y3 = R (Q - X3) - Y1 PPP,
    // ZZ3 = ZZ1 PP, ZZZ3 = ZZZ1 PPP.  8M + 2S. P = 0 means equal x: the same point (R = 0,
    // double) or its negation (R != 0, the sum is infinity).
    CURVE_FN void add_affine(const affine_t<F>& q) {
        if (q.is_identity()) return;
        if (is_identity()) { *this = from_affine(q); return; }
        F P = q.x * ZZ - X, R = q.y * ZZZ - Y;
        if (P.is_zero()) {
            *this = R.is_zero() ? dbl_affine(q) : identity();
            return;
        }
        F PP = P.sqr(), PPP = P * PP, Q = X * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - Y * PPP;
        X = X3;
        ZZ = ZZ * PP;
        ZZZ = ZZZ * PPP;
    }

    // add_affine's sum (of q, or of -q when neg) in an order that keeps fewer coordinates live
    // (the G2 level-1 kernel g2_accumulate_bases_lean: add_affine's order spills at 255
    // registers). q is read where it is used, y after x's products (q may be in global memory:
    // the device kernels prefetch it into L1), and each value dies as soon as it is used:
    // P after PPP, X and PP after Q, R is made only once P, PP and X are gone. At most 6 of
    // X Y ZZ ZZZ P PP PPP Q R are live at once (X Y ZZ ZZZ P PP while PPP is made) against
    // add_affine's 8; the products are mul_lean's. Equal x: R decides (double, or infinity);
    // the accumulator is then q itself, so it is the accumulator that is doubled.
    CURVE_FN void add_affine_lean(const affine_t<F>& q, bool neg) {
        if (q.x.is_zero() && q.y.is_zero()) return;  // the identity ((0, +-2) is on G1's curve)
        if (is_identity()) {
            *this = from_affine(q);
            if (neg) Y = -Y;
            return;
        }
        F P = mul_lean(q.x, ZZ) - X;
        if (P.is_zero()) {
            F R = mul_lean(neg ? -q.y : q.y, ZZZ) - Y;
            // a copy goes to the out-of-line dbl(), so the accumulator's own address never
            // escapes (an escaped accumulator would live in local memory)
            xyzz_t acc = *this;
            *this = R.is_zero() ? acc.dbl() : identity();
            return;
        }
        F PP = sqr_lean(P);
        F PPP = mul_lean(P, PP);
        ZZ = mul_lean(ZZ, PP);
        F Q = mul_lean(X, PP);                  // U1 PP
        F R = mul_lean(neg ? -q.y : q.y, ZZZ) - Y;
        ZZZ = mul_lean(ZZZ, PPP);
        Y = mul_lean(Y, PPP);                   // Y1 PPP
        X = sqr_lean(R) - PPP - Q.dbl();        // X3
        Y = mul_lean(R, Q - X) - Y;             // Y3 = R (Q - X3) - Y1 PPP
    }

    // add-2008-s: this += q (both XYZZ). U1 = X1 ZZ2, U2 = X2 ZZ1, S1 = Y1 ZZZ2, S2 = Y2 ZZZ1,
    // P = U2 - U1, R = S2 - S1, PP = P^2, PPP = P PP, Q = U1 PP, X3 = R^2 - PPP - 2Q,
    // Y3 = R (Q - X3) - S1 PPP, ZZ3 = ZZ1 ZZ2 PP, ZZZ3 = ZZZ1 ZZZ2 PPP.  12M + 2S.
    CURVE_FN void add(const xyzz_t& q) {
        if (q.is_identity()) return;
        if (is_identity()) { *this = q; return; }
        F U1 = X * q.ZZ, S1 = Y * q.ZZZ;
        F P = q.X * ZZ - U1, R = q.Y * ZZZ - S1;
        if (P.is_zero()) {
            *this = R.is_zero() ? dbl() : identity();
            return;
        }
        F PP = P.sqr(), PPP = P * PP, Q = U1 * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - S1 * PPP;
        X = X3;
        ZZ = ZZ * q.ZZ * PP;
        ZZZ = ZZZ * q.ZZZ * PPP;
    }

    // k * this for a small non-negative k (double and add, MSB first); the window reduction
    // uses it for the offsets of its bucket segments.
    CURVE_COLD xyzz_t mul_small(uint32_t k) const {
        xyzz_t r = identity();
        for (int b = 31; b >= 0; b--) {
            r = r.dbl();
            if ((k >> b) & 1) r.add(*this);
        }
        return r;
    }

    // x = X / ZZ, y = Y / ZZZ with one inversion: 1/ZZ = ZZ^2 (1/ZZZ)^2 since ZZ^3 = ZZZ^2.
    CURVE_COLD affine_t<F> to_affine() const {
        if (is_identity()) return affine_t<F>::identity();
        F izzz = ZZZ.inv();
        F izz = ZZ.sqr() * izzz.sqr();
        return {X * izz, Y * izzz};
    }
};
