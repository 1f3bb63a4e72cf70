// Montgomery arithmetic over a prime field in 32-bit limbs, for host and device.
//
// One source, two builds: nvcc compiles it into the kernels, g++ into the host library that the
// CPU backend uses and that the unit tests check against Python integers. Elements are kept
// fully reduced (0 <= x < p) in Montgomery form x*R mod p, R = 2^(32N), limbs little-endian.
// Requires p < 2^(32N - 1), true for Fr (255 bits in 8 limbs) and Fq (381 bits in 12 limbs),
// so sums of two reduced values never overflow the limbs.
#pragma once
#include <stdint.h>
#include "ff_ptx.cuh"

// The device build takes the PTX carry-chain paths of ff_ptx.cuh unless FF_PORTABLE is defined.
#if defined(__CUDA_ARCH__) && !defined(FF_PORTABLE)
#define FF_USE_PTX 1
#endif

#ifndef FF_FN
#if defined(__CUDACC__)
#define FF_FN __host__ __device__ __forceinline__
#else
#define FF_FN inline
#endif
#endif

template <class P>
struct ff {
    static constexpr int N = P::N;
    uint32_t v[N];

    FF_FN static ff from_limbs(const uint32_t* limbs) {
        ff r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = limbs[i];
        return r;
    }
    FF_FN static ff zero() {
        ff r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    // Montgomery form of 1, i.e. R mod p.
    FF_FN static ff one() {
        ff r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    FF_FN static ff r2() {
        ff r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::r2(i);
        return r;
    }

    FF_FN bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    FF_FN bool operator==(const ff& o) const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }
    FF_FN bool operator!=(const ff& o) const { return !(*this == o); }

    // x >= p, comparing from the top limb.
    FF_FN static bool geq_mod(const uint32_t* x) {
#pragma unroll
        for (int i = N - 1; i >= 0; i--) {
            if (x[i] > P::mod(i)) return true;
            if (x[i] < P::mod(i)) return false;
        }
        return true;
    }
    // x -= p (limb-wise borrow chain).
    FF_FN static void sub_mod_inplace(uint32_t* x) {
        uint64_t borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t d = (uint64_t)x[i] - P::mod(i) - borrow;
            x[i] = (uint32_t)d;
            borrow = (d >> 32) & 1;
        }
    }

    // a + b mod p
    FF_FN friend ff operator+(const ff& a, const ff& b) {
        ff r;
#ifdef FF_USE_PTX
        ff_ptx::add<P, N>(r.v, a.v, b.v);
#else
        uint64_t carry = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t s = (uint64_t)a.v[i] + b.v[i] + carry;
            r.v[i] = (uint32_t)s;
            carry = s >> 32;
        }
        if (geq_mod(r.v)) sub_mod_inplace(r.v);
#endif
        return r;
    }
    // a - b mod p
    FF_FN friend ff operator-(const ff& a, const ff& b) {
        ff r;
#ifdef FF_USE_PTX
        ff_ptx::sub<P, N>(r.v, a.v, b.v);
#else
        uint64_t borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t d = (uint64_t)a.v[i] - b.v[i] - borrow;
            r.v[i] = (uint32_t)d;
            borrow = (d >> 32) & 1;
        }
        if (borrow) {  // went below zero: add p back
            uint64_t carry = 0;
#pragma unroll
            for (int i = 0; i < N; i++) {
                uint64_t s = (uint64_t)r.v[i] + P::mod(i) + carry;
                r.v[i] = (uint32_t)s;
                carry = s >> 32;
            }
        }
#endif
        return r;
    }
    FF_FN ff operator-() const { return zero() - *this; }
    FF_FN ff dbl() const { return *this + *this; }

    // a * b * R^-1 mod p: CIOS Montgomery multiplication (Koc, Acar, Kaliski 1996).
    FF_FN friend ff operator*(const ff& a, const ff& b) {
#ifdef FF_USE_PTX
        ff o;
#ifdef FF_CIOS
        ff_ptx::mont_mul_cios<P, N>(o.v, a.v, b.v);
#else
        ff_eo::mont_mul<P, N>(o.v, a.v, b.v);  // contract: a <= R - p (ff_ptx.cuh)
#endif
        return o;
#else
        uint32_t t[N + 2];
#pragma unroll
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t c = 0;
#pragma unroll
            for (int j = 0; j < N; j++) {
                uint64_t s = (uint64_t)a.v[j] * b.v[i] + t[j] + c;
                t[j] = (uint32_t)s;
                c = s >> 32;
            }
            uint64_t s = (uint64_t)t[N] + c;
            t[N] = (uint32_t)s;
            t[N + 1] = (uint32_t)(s >> 32);
            uint32_t m = t[0] * P::INV;
            s = (uint64_t)m * P::mod(0) + t[0];
            c = s >> 32;
#pragma unroll
            for (int j = 1; j < N; j++) {
                s = (uint64_t)m * P::mod(j) + t[j] + c;
                t[j - 1] = (uint32_t)s;
                c = s >> 32;
            }
            s = (uint64_t)t[N] + c;
            t[N - 1] = (uint32_t)s;
            t[N] = t[N + 1] + (uint32_t)(s >> 32);
        }
        ff r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = t[i];
        if (t[N] || geq_mod(r.v)) sub_mod_inplace(r.v);
        return r;
#endif
    }
    // a^2 R^-1: on the device the square written out and reduced (ff_eo::mont_sqr: 3N^2 + N
    // limb products against the product's 4N^2); elsewhere the product
    FF_FN ff sqr() const {
#if defined(FF_USE_PTX) && !defined(FF_CIOS) && !defined(FF_SQR_MUL)
        ff o;
        ff_eo::mont_sqr<P, N>(o.v, v);  // contract: as the product's a (ff_ptx.cuh)
        return o;
#else
        return *this * *this;
#endif
    }
    FF_FN ff& operator+=(const ff& o) { return *this = *this + o; }
    FF_FN ff& operator-=(const ff& o) { return *this = *this - o; }
    FF_FN ff& operator*=(const ff& o) { return *this = *this * o; }

    // x -> x*R (canonical to Montgomery)
    FF_FN ff to_mont() const { return *this * r2(); }
    // x*R -> x (Montgomery to canonical): multiply by plain 1
    FF_FN ff from_mont() const {
        ff one_plain = zero();
        one_plain.v[0] = 1;
        return *this * one_plain;
    }

    // x^e for e given as little-endian 32-bit limbs (square and multiply, MSB first).
    FF_FN ff pow(const uint32_t* e, int limbs) const {
        ff r = one();
        for (int i = limbs - 1; i >= 0; i--)
            for (int b = 31; b >= 0; b--) {
                r = r.sqr();
                if ((e[i] >> b) & 1) r = r * *this;
            }
        return r;
    }
    // x^-1 = x^(p-2) (Fermat); 0 maps to 0, callers check.
    FF_FN ff inv() const {
        uint32_t e[N];
        uint64_t borrow = 2;  // e = p - 2, with the borrow chain (Fr's low limb is 1)
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t d = (uint64_t)P::mod(i) - borrow;
            e[i] = (uint32_t)d;
            borrow = (d >> 32) & 1;
        }
        return pow(e, N);
    }
};
