// Device fast paths of ff.cuh: the same add, sub and Montgomery product written as PTX carry
// chains (add.cc / addc / mad.lo.cc / madc.hi.cc), branch-free. The portable C++ in ff.cuh
// builds each 32x32 step from 64-bit arithmetic (IMAD.WIDE plus a 64-bit add), about 3
// instructions per limb product; a carry chain is one. Same contracts as the portable code,
// and tests/gpu/test_ntt_field.py checks every op against the host build on raw limbs.
// Define FF_PORTABLE to compile the portable code for the device too (the benchmark's A/B).
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
namespace ff_ptx {

#define FF_DEV __device__ __forceinline__

// r = x if x < p, else x - p, where x = (top : x[0..N-1]) and x < 2p.
template <class P, int N>
FF_DEV void cond_sub(uint32_t* r, const uint32_t* x, uint32_t top) {
    uint32_t d[N], br;
    asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d[0]) : "r"(x[0]), "r"(P::mod(0)));
#pragma unroll
    for (int j = 1; j < N; j++)
        asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d[j]) : "r"(x[j]), "r"(P::mod(j)));
    asm volatile("subc.u32 %0, %1, 0;" : "=r"(br) : "r"(top));
    // br == 0xffffffff exactly when x < p (no top word and a borrow out of the limbs)
    bool keep = br == 0xffffffffu;
#pragma unroll
    for (int j = 0; j < N; j++) r[j] = keep ? x[j] : d[j];
}

// r = a + b mod p (a + b < 2p)
template <class P, int N>
FF_DEV void add(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    uint32_t s[N], top;
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(a[0]), "r"(b[0]));
#pragma unroll
    for (int j = 1; j < N; j++)
        asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(s[j]) : "r"(a[j]), "r"(b[j]));
    asm volatile("addc.u32 %0, 0, 0;" : "=r"(top));
    cond_sub<P, N>(r, s, top);
}

// r = a - b mod p (-p <= a - b < p): subtract, then add p & borrow-mask
template <class P, int N>
FF_DEV void sub(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    uint32_t d[N], mask;
    asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d[0]) : "r"(a[0]), "r"(b[0]));
#pragma unroll
    for (int j = 1; j < N; j++)
        asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d[j]) : "r"(a[j]), "r"(b[j]));
    asm volatile("subc.u32 %0, 0, 0;" : "=r"(mask));  // 0 or 0xffffffff
    asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(d[0]) : "r"(P::mod(0) & mask));
#pragma unroll
    for (int j = 1; j < N; j++)
        asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(d[j]) : "r"(P::mod(j) & mask));
#pragma unroll
    for (int j = 0; j < N; j++) r[j] = d[j];
}

// t[0..N+1] += x[0..N-1] * y: the low halves along one carry chain, the high halves (one limb
// up) along a second.
template <int N>
FF_DEV void mac_row(uint32_t* t, const uint32_t* x, uint32_t y) {
    asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(x[0]), "r"(y));
#pragma unroll
    for (int j = 1; j < N; j++)
        asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(x[j]), "r"(y));
    asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[N]));
    asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
    asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(x[0]), "r"(y));
#pragma unroll
    for (int j = 1; j < N; j++)
        asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(x[j]), "r"(y));
    asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
}

// r = a b R^-1 mod p: CIOS (the previous device product; FF_CIOS selects it), one row of a * b[i] then one row of m * p per limb, shifting a
// limb out each round (t stays below R + p, so N + 2 words hold every intermediate).
template <class P, int N>
FF_DEV void mont_mul_cios(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    uint32_t t[N + 2], p[N];
#pragma unroll
    for (int j = 0; j < N + 2; j++) t[j] = 0;
#pragma unroll
    for (int j = 0; j < N; j++) p[j] = P::mod(j);
#pragma unroll
    for (int i = 0; i < N; i++) {
        mac_row<N>(t, a, b[i]);
        uint32_t m = t[0] * P::INV;
        mac_row<N>(t, p, m);  // t[0] becomes 0
#pragma unroll
        for (int j = 0; j <= N; j++) t[j] = t[j + 1];
        t[N + 1] = 0;
    }
    cond_sub<P, N>(r, t, t[N]);
}

}  // namespace ff_ptx
#endif

// ---- the even/odd product (the default device product) ------------------------------------
// Emmart and Weems' alignment, as sppark's mont_t also uses it: the accumulator is two arrays,
// E (word k at weight k) taking the products a[2j] b_i and O (word k at weight k + 1) taking
// a[2j+1] b_i, so both halves of each 32x32 product go into two adjacent words of one array:
// a mad.lo.cc / madc.hi.cc pair on the same operands (one wide multiply-add for ptxas), where
// mac_row above runs the low halves on one carry chain and the high halves on another. After
// each round the shift by one word is a change of roles (O is at weight 0 next round), so
// only E[1] moves.
//
// Bounds (why no carry is dropped and no N+1-th word is needed): with T_i the value before
// round i, T_{i+1} = (T_i + a b_i + m_i p) / 2^32 < a + p by induction, so every partial sum
// stays below 2^32 (a + p) <= 2^32 R when a <= R - p: O's top word never carries out, and the
// result is the CIOS result bit for bit (same m_i, same value). Contract: a <= R - p (every
// reduced value: p < R/2 for Fr and Fq), b < R; result < a + p before the final subtraction.
//
// The primitives are PTX on the device; FF_PTX_EMULATE builds a host emulation of the carry
// flag, so tests/unit/test_ff_eo_host.py checks this exact instruction sequence on the CPU.
#if defined(__CUDA_ARCH__) || defined(FF_PTX_EMULATE)
namespace ff_eo {
#if defined(__CUDA_ARCH__)
#define FFX_FN __device__ __forceinline__
// One PTX instruction per asm statement: an output of a two-instruction statement could share
// a register with an input the second instruction still reads. The carry flag flows between
// volatile statements (ff_ptx above relies on the same).
// (hi:lo) = a b
FFX_FN void mul_wide(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) {
    asm("mul.lo.u32 %0, %1, %2;" : "=r"(lo) : "r"(a), "r"(b));
    asm("mul.hi.u32 %0, %1, %2;" : "=r"(hi) : "r"(a), "r"(b));
}
// (hi:lo) += a b, no carry in, carry out
FFX_FN void mad_wide_cc(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) {
    asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(lo) : "r"(a), "r"(b));
    asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(hi) : "r"(a), "r"(b));
}
// (hi:lo) += a b + carry, carry out
FFX_FN void madc_wide_cc(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) {
    asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(lo) : "r"(a), "r"(b));
    asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(hi) : "r"(a), "r"(b));
}
// (hi:lo) = a b + (chi:clo) + carry, carry out
FFX_FN void madc_wide_to_cc(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b, uint32_t clo,
                            uint32_t chi) {
    asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(b), "r"(clo));
    asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(hi) : "r"(a), "r"(b), "r"(chi));
}
// (hi:lo) = a b + carry, no carry out (a product's high half is at most 2^32 - 2)
FFX_FN void madc_wide_last(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) {
    asm volatile("madc.lo.cc.u32 %0, %1, %2, 0;" : "=r"(lo) : "r"(a), "r"(b));
    asm volatile("madc.hi.u32 %0, %1, %2, 0;" : "=r"(hi) : "r"(a), "r"(b));
}
// (hi:lo) += a b + carry, no carry out (the caller's bounds rule one out)
FFX_FN void madc_wide_acc_last(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) {
    asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(lo) : "r"(a), "r"(b));
    asm volatile("madc.hi.u32 %0, %1, %2, %0;" : "+r"(hi) : "r"(a), "r"(b));
}
FFX_FN void add_cc(uint32_t& d, uint32_t a) { asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(d) : "r"(a)); }
FFX_FN void addc_cc(uint32_t& d, uint32_t a) { asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(d) : "r"(a)); }
FFX_FN void addc(uint32_t& d, uint32_t a) { asm volatile("addc.u32 %0, %0, %1;" : "+r"(d) : "r"(a)); }
#else
#define FFX_FN inline
// the carry flag: one per thread, as on the device
inline uint32_t& cf() {
    static thread_local uint32_t f = 0;
    return f;
}
// set when a step the bounds say cannot carry out did (the host test asserts it stays 0)
inline uint32_t& lost() {
    static thread_local uint32_t f = 0;
    return f;
}
FFX_FN void wide(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b, uint32_t clo, uint32_t chi,
                 uint32_t cin, bool cout) {
    uint64_t p = (uint64_t)a * b;
    uint64_t s = (uint64_t)(uint32_t)p + clo + cin;
    lo = (uint32_t)s;
    s = (p >> 32) + chi + (s >> 32);
    hi = (uint32_t)s;
    if (cout) cf() = (uint32_t)(s >> 32);
    else if (s >> 32) lost() = 1;
}
FFX_FN void mul_wide(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) {
    uint64_t p = (uint64_t)a * b;
    lo = (uint32_t)p;
    hi = (uint32_t)(p >> 32);
}
FFX_FN void mad_wide_cc(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) { wide(lo, hi, a, b, lo, hi, 0, true); }
FFX_FN void madc_wide_cc(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) { wide(lo, hi, a, b, lo, hi, cf(), true); }
FFX_FN void madc_wide_to_cc(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b, uint32_t clo,
                            uint32_t chi) { wide(lo, hi, a, b, clo, chi, cf(), true); }
FFX_FN void madc_wide_last(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) { wide(lo, hi, a, b, 0, 0, cf(), false); }
FFX_FN void madc_wide_acc_last(uint32_t& lo, uint32_t& hi, uint32_t a, uint32_t b) { wide(lo, hi, a, b, lo, hi, cf(), false); }
FFX_FN void add_cc(uint32_t& d, uint32_t a) {
    uint64_t s = (uint64_t)d + a;
    d = (uint32_t)s;
    cf() = (uint32_t)(s >> 32);
}
FFX_FN void addc_cc(uint32_t& d, uint32_t a) {
    uint64_t s = (uint64_t)d + a + cf();
    d = (uint32_t)s;
    cf() = (uint32_t)(s >> 32);
}
FFX_FN void addc(uint32_t& d, uint32_t a) {
    uint64_t s = (uint64_t)d + a + cf();
    d = (uint32_t)s;
    if (s >> 32) lost() = 1;
}
#endif

// E += p_even m, O += p_odd m, m = E[0] (-p^-1) mod 2^32, so E[0] becomes 0. E's carry out of
// its top word (weight N) goes into O's top word (weight N); O's own carry out is zero.
template <class P, int N>
FFX_FN void reduce(uint32_t* E, uint32_t* O) {
    uint32_t m = E[0] * P::INV;
    mad_wide_cc(O[0], O[1], P::mod(1), m);
#pragma unroll
    for (int j = 2; j < N; j += 2) madc_wide_cc(O[j], O[j + 1], P::mod(j + 1), m);
    mad_wide_cc(E[0], E[1], P::mod(0), m);
#pragma unroll
    for (int j = 2; j < N; j += 2) madc_wide_cc(E[j], E[j + 1], P::mod(j), m);
    addc(O[N - 1], 0);
}

// A round after the first. X is the last round's O (weight 0 after the shift), Y its E
// (Y[0] = 0): Y[1] joins X[0]; Y moves down two words while taking a_odd b_i (Y is this
// round's O, X its E); X takes a_even b_i; then the reduction.
template <class P, int N>
FFX_FN void round(uint32_t* X, uint32_t* Y, const uint32_t* a, uint32_t bi) {
    add_cc(X[0], Y[1]);
#pragma unroll
    for (int j = 0; j < N - 2; j += 2) madc_wide_to_cc(Y[j], Y[j + 1], a[j + 1], bi, Y[j + 2], Y[j + 3]);
    madc_wide_last(Y[N - 2], Y[N - 1], a[N - 1], bi);
    mad_wide_cc(X[0], X[1], a[0], bi);
#pragma unroll
    for (int j = 2; j < N; j += 2) madc_wide_cc(X[j], X[j + 1], a[j], bi);
    addc(Y[N - 1], 0);
    reduce<P, N>(X, Y);
}

// r = x - p when x >= p, else x (x < 2^(32 N): the products' last step)
template <class P, int N>
FFX_FN void final_sub(uint32_t* r, const uint32_t* x) {
#if defined(__CUDA_ARCH__)
    ff_ptx::cond_sub<P, N>(r, x, 0);
#else
    bool ge = true;
    for (int i = N - 1; i >= 0; i--) {
        if (x[i] != P::mod(i)) { ge = x[i] > P::mod(i); break; }
    }
    uint64_t borrow = 0;
    for (int i = 0; i < N; i++) {
        uint64_t d = (uint64_t)x[i] - P::mod(i) - borrow;
        r[i] = ge ? (uint32_t)d : x[i];
        borrow = (d >> 32) & 1;
    }
#endif
}

// r = a b R^-1 mod p (a <= R - p, b < R, N even); fully reduced when a < p.
template <class P, int N>
FFX_FN void mont_mul(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    static_assert(N % 2 == 0, "the even/odd split needs an even limb count");
    uint32_t E[N], O[N];
#pragma unroll
    for (int j = 0; j < N; j += 2) {
        mul_wide(E[j], E[j + 1], a[j], b[0]);
        mul_wide(O[j], O[j + 1], a[j + 1], b[0]);
    }
    reduce<P, N>(E, O);
#pragma unroll
    for (int i = 1; i < N - 1; i += 2) {
        round<P, N>(O, E, a, b[i]);
        round<P, N>(E, O, a, b[i + 1]);
    }
    round<P, N>(O, E, a, b[N - 1]);
    // now O is at weight 0 with O[0] = 0 and E at weight 1: the value is E + (O >> 32)
    add_cc(E[0], O[1]);
#pragma unroll
    for (int k = 1; k < N - 1; k++) addc_cc(E[k], O[k + 1]);
    addc(E[N - 1], 0);
    final_sub<P, N>(r, E);
}

// r = a^2 R^-1 mod p (a <= R - p, N even): a's square written out, then reduced; the same value
// as mont_mul(a, a) for 3N^2 + N limb products (wide multiply-adds) against 4N^2 (Fq: 444
// against 576, Fr: 200 against 256), since each cross product a_i a_j (i < j) is made once and
// doubled.
//
//   cross   C = sum_{i<j} a_i a_j 2^(32 (i+j)) in 2N words. Row i's products land at words
//           (i+j, i+j+1); those of every other j do not overlap, so a row is two carry chains
//           (j = i+1, i+3, ... and j = i+2, i+4, ...). The chain ending at j = N-2 runs first:
//           its carry goes into word i+N, which holds at most the previous row's carry (1);
//           the other's (j = N-1) into word i+N+1, which no earlier row reached (0). (Under
//           the contract either order is safe, a's top limb being below 2^32 - 2; this one is
//           for any a.)
//   square  T = 2C + sum_i a_i^2 2^(64 i): C doubled along one chain (C < R^2 / 2: no bit
//           leaves), the diagonal squares along another over every word pair (T < R^2).
//   reduce  T's low N words in a window t of N + 2 words (t[N + 1] <= 1: the window stays
//           below 2^32 (R + p)); round i: m = t[0] (-1/p), t += m p (two chains: the even and
//           the odd limbs of p), t >>= 32, T's word N + i added at t[N - 1]. After N rounds
//           t = (T + M p) / R < a + p (< 1.5 p for a < 2p), then one conditional subtraction,
//           as mont_mul.
// tests/unit/test_ff_eo_host.py runs this sequence with the carry flag emulated.
template <class P, int N>
FFX_FN void mont_sqr(uint32_t* r, const uint32_t* a) {
    static_assert(N % 2 == 0, "the reduction's even/odd chains need an even limb count");
    uint32_t C[2 * N];
#pragma unroll
    for (int k = 0; k < 2 * N; k++) C[k] = 0;
#pragma unroll
    for (int i = 0; i < N - 1; i++) {
        // the chain whose last j is N - 2 (parity of N - i), then the one ending at N - 1
#pragma unroll
        for (int pass = 0; pass < 2; pass++) {
            const int j0 = ((N - 1 - (i + 1)) % 2 == pass) ? i + 2 : i + 1;
            if (j0 > N - 1) continue;
            mad_wide_cc(C[i + j0], C[i + j0 + 1], a[i], a[j0]);
            int j = j0 + 2;
#pragma unroll
            for (; j < N; j += 2) madc_wide_cc(C[i + j], C[i + j + 1], a[i], a[j]);
            addc(C[i + j], 0);  // the word after the chain's last pair (i + j = i + jlast + 2)
        }
    }
    add_cc(C[0], C[0]);
#pragma unroll
    for (int k = 1; k < 2 * N - 1; k++) addc_cc(C[k], C[k]);
    addc(C[2 * N - 1], C[2 * N - 1]);
    mad_wide_cc(C[0], C[1], a[0], a[0]);
#pragma unroll
    for (int k = 1; k < N - 1; k++) madc_wide_cc(C[2 * k], C[2 * k + 1], a[k], a[k]);
    madc_wide_acc_last(C[2 * N - 2], C[2 * N - 1], a[N - 1], a[N - 1]);

    uint32_t t[N + 2];
#pragma unroll
    for (int k = 0; k < N; k++) t[k] = C[k];
    t[N] = t[N + 1] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        uint32_t m = t[0] * P::INV;
        mad_wide_cc(t[0], t[1], P::mod(0), m);  // t[0] becomes 0
#pragma unroll
        for (int j = 2; j < N; j += 2) madc_wide_cc(t[j], t[j + 1], P::mod(j), m);
        addc_cc(t[N], 0);
        addc(t[N + 1], 0);
        mad_wide_cc(t[1], t[2], P::mod(1), m);
#pragma unroll
        for (int j = 3; j < N; j += 2) madc_wide_cc(t[j], t[j + 1], P::mod(j), m);
        addc(t[N + 1], 0);
#pragma unroll
        for (int k = 0; k <= N; k++) t[k] = t[k + 1];
        t[N + 1] = 0;
        add_cc(t[N - 1], C[N + i]);
        addc_cc(t[N], 0);
        addc(t[N + 1], 0);
    }
    final_sub<P, N>(r, t);
}
#undef FFX_FN
}  // namespace ff_eo
#endif
