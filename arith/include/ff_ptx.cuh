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

// r = a b R^-1 mod p: CIOS, one row of a * b[i] then one row of m * p per limb, shifting a
// limb out each round (t stays below R + p, so N + 2 words hold every intermediate).
template <class P, int N>
FF_DEV void mont_mul(uint32_t* r, const uint32_t* a, const uint32_t* b) {
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

#undef FF_DEV
}  // namespace ff_ptx
#endif
