// The CPU backend's fixed-base multiplication: a proving key's queries [s_i * P] on every core.
//
// Why not the host build of the kernels' code (setup_host.cpp, fixed_base_batch_host.cpp): that
// field arithmetic is written for the GPU's 32-bit multipliers (twelve 32-bit limbs); a 64-bit
// CPU does the same Montgomery product on six 64-bit limbs with unsigned __int128 in a fraction
// of the time, and key generation on the CPU is the one place where that matters (filecoin-2k:
// 2.69 M variables, ~12 M G1 and ~2.7 M G2 points; arkworks point by point: 0.21 / 0.63 ms a
// point, hours). The kernels' host builds stay what the GPU code is tested against.
//
// The algorithm is the device's (gpu/kernels/fixed_base_batch.cuh): the table of k * 2^(8j) * P
// (32 byte-windows j, k < 256, gpu/groth16/fixed_base.py `table`), one mixed addition in XYZZ
// coordinates per nonzero byte of the scalar, then the affine conversion with one inversion per
// FB_CHUNK points (Montgomery's trick over ZZZ: 1/ZZ = ZZ^2 / ZZZ^2 since ZZ^3 = ZZZ^2).
// Points cross the C ABI as canonical little-endian x || y (G2: x.c0, x.c1, y.c0, y.c1), the
// identity all zeros: arkworks' to_xy_bytes_le, what PointArray holds.
#include <stdint.h>
#include <string.h>
#include <vector>

typedef uint64_t u64;
typedef unsigned __int128 u128;
typedef int64_t i64;

namespace {

// BLS12-381's base field modulus p, R = 2^384 mod p (Montgomery one), R^2 mod p, -1/p mod 2^64
const u64 P[6] = {0xb9feffffffffaaabULL, 0x1eabfffeb153ffffULL, 0x6730d2a0f6b0f624ULL,
                  0x64774b84f38512bfULL, 0x4b1ba7b6434bacd7ULL, 0x1a0111ea397fe69aULL};
const u64 R1[6] = {0x760900000002fffdULL, 0xebf4000bc40c0002ULL, 0x5f48985753c758baULL,
                   0x77ce585370525745ULL, 0x5c071a97a256ec6dULL, 0x15f65ec3fa80e493ULL};
const u64 R2[6] = {0xf4df1f341c341746ULL, 0x0a76e6a609d104f1ULL, 0x8de5476c4c95b6d5ULL,
                   0x67eb88a9939d83c0ULL, 0x9a793e85b519952dULL, 0x11988fe592cae3aaULL};
const u64 PINV = 0x89f3fffcfffcfffdULL;

struct Fq {
    u64 l[6];

    static Fq zero() { Fq r; memset(r.l, 0, sizeof r.l); return r; }
    static Fq one() { Fq r; memcpy(r.l, R1, sizeof r.l); return r; }
    bool is_zero() const { return !(l[0] | l[1] | l[2] | l[3] | l[4] | l[5]); }

    // t (with its carry word hi) reduced below p by one conditional subtraction: t < 2p
    static Fq reduce(const u64 t[6], u64 hi) {
        Fq s;
        u128 borrow = 0;
        for (int i = 0; i < 6; i++) {
            u128 d = (u128)t[i] - P[i] - (u64)borrow;
            s.l[i] = (u64)d;
            borrow = (d >> 64) & 1;
        }
        if (hi || !borrow) return s;
        Fq r;
        memcpy(r.l, t, sizeof r.l);
        return r;
    }

    Fq operator+(const Fq& o) const {
        u64 t[6];
        u128 c = 0;
        for (int i = 0; i < 6; i++) { c += (u128)l[i] + o.l[i]; t[i] = (u64)c; c >>= 64; }
        return reduce(t, (u64)c);
    }

    Fq operator-(const Fq& o) const {
        Fq r;
        u128 borrow = 0;
        for (int i = 0; i < 6; i++) {
            u128 d = (u128)l[i] - o.l[i] - (u64)borrow;
            r.l[i] = (u64)d;
            borrow = (d >> 64) & 1;
        }
        if (borrow) {  // a - b + p
            u128 c = 0;
            for (int i = 0; i < 6; i++) { c += (u128)r.l[i] + P[i]; r.l[i] = (u64)c; c >>= 64; }
        }
        return r;
    }

    // Montgomery product a b / R mod p, CIOS (Koc, Acar, Kaliski 1996)
    Fq operator*(const Fq& o) const {
        u64 t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < 6; i++) {
            u128 c = 0;
            for (int j = 0; j < 6; j++) {
                c += (u128)l[j] * o.l[i] + t[j];
                t[j] = (u64)c;
                c >>= 64;
            }
            c += t[6];
            t[6] = (u64)c;
            t[7] = (u64)(c >> 64);
            u64 m = t[0] * PINV;
            c = (u128)m * P[0] + t[0];
            c >>= 64;
            for (int j = 1; j < 6; j++) {
                c += (u128)m * P[j] + t[j];
                t[j - 1] = (u64)c;
                c >>= 64;
            }
            c += t[6];
            t[5] = (u64)c;
            t[6] = t[7] + (u64)(c >> 64);
        }
        return reduce(t, t[6]);
    }

    Fq sqr() const { return *this * *this; }
    Fq dbl() const { return *this + *this; }

    Fq inv() const {  // a^(p - 2); 0 stays 0 (never asked for here: identities are skipped)
        u64 e[6];
        memcpy(e, P, sizeof e);
        e[0] -= 2;  // p's low limb is odd and > 2: no borrow
        Fq r = one();
        for (int i = 5; i >= 0; i--)
            for (int b = 63; b >= 0; b--) {
                r = r.sqr();
                if ((e[i] >> b) & 1) r = r * *this;
            }
        return r;
    }

    static Fq from_canonical(const u64* raw) { Fq a; memcpy(a.l, raw, sizeof a.l); return a * Fq{{R2[0], R2[1], R2[2], R2[3], R2[4], R2[5]}}; }
    void to_canonical(u64* raw) const {
        Fq unit = zero();
        unit.l[0] = 1;
        Fq c = *this * unit;
        memcpy(raw, c.l, sizeof c.l);
    }
};

struct Fq2 {  // c0 + c1 u, u^2 = -1
    Fq c0, c1;

    static Fq2 zero() { return {Fq::zero(), Fq::zero()}; }
    static Fq2 one() { return {Fq::one(), Fq::zero()}; }
    bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    Fq2 operator+(const Fq2& o) const { return {c0 + o.c0, c1 + o.c1}; }
    Fq2 operator-(const Fq2& o) const { return {c0 - o.c0, c1 - o.c1}; }
    Fq2 operator*(const Fq2& o) const {  // Karatsuba: three base products
        Fq t0 = c0 * o.c0, t1 = c1 * o.c1;
        return {t0 - t1, (c0 + c1) * (o.c0 + o.c1) - t0 - t1};
    }
    Fq2 sqr() const { return {(c0 + c1) * (c0 - c1), (c0 * c1).dbl()}; }
    Fq2 dbl() const { return *this + *this; }
    Fq2 inv() const {  // (c0 - c1 u) / (c0^2 + c1^2)
        Fq n = (c0.sqr() + c1.sqr()).inv();
        return {c0 * n, Fq::zero() - c1 * n};
    }
    static Fq2 from_canonical(const u64* raw) { return {Fq::from_canonical(raw), Fq::from_canonical(raw + 6)}; }
    void to_canonical(u64* raw) const { c0.to_canonical(raw); c1.to_canonical(raw + 6); }
};

template <class F> struct Limbs;
template <> struct Limbs<Fq> { static const int N = 6; };
template <> struct Limbs<Fq2> { static const int N = 12; };

template <class F>
struct Affine {
    F x, y;
    bool inf;
};

// XYZZ coordinates (x = X / ZZ, y = Y / ZZZ), y^2 = x^3 + b with a = 0 on either group
template <class F>
struct Xyzz {
    F X, Y, ZZ, ZZZ;
    bool inf;

    static Xyzz identity() { return {F::zero(), F::zero(), F::zero(), F::zero(), true}; }

    void double_affine(const Affine<F>& q) {  // mdbl-2008-s-1
        F U = q.y.dbl(), V = U.sqr(), W = U * V, S = q.x * V;
        F xx = q.x.sqr(), M = xx.dbl() + xx;
        X = M.sqr() - S.dbl();
        Y = M * (S - X) - W * q.y;
        ZZ = V;
        ZZZ = W;
        inf = false;
    }

    void add_affine(const Affine<F>& q) {  // madd-2008-s, with the equal and opposite cases
        if (q.inf) return;
        if (inf) { X = q.x; Y = q.y; ZZ = F::one(); ZZZ = F::one(); inf = false; return; }
        F U2 = q.x * ZZ, S2 = q.y * ZZZ;
        F Pd = U2 - X, R = S2 - Y;
        if (Pd.is_zero()) {
            if (R.is_zero()) double_affine(q);  // this point equals q
            else *this = identity();            // this point is -q
            return;
        }
        F PP = Pd.sqr(), PPP = Pd * PP, Q = X * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - Y * PPP;
        X = X3;
        ZZ = ZZ * PP;
        ZZZ = ZZZ * PPP;
    }
};

const int WINDOWS = 32, ENTRIES = 256, FB_CHUNK = 256;

template <class F>
void run(i64 n, const u64* table_raw, const u64* scalars, u64* out) {
    const int L = Limbs<F>::N;  // limbs a coordinate
    std::vector<Affine<F>> table(WINDOWS * ENTRIES);
#pragma omp parallel for schedule(static)
    for (i64 e = 0; e < WINDOWS * ENTRIES; e++) {
        const u64* xy = table_raw + 2 * L * e;
        bool inf = true;
        for (int k = 0; k < 2 * L; k++) inf = inf && !xy[k];
        table[e] = {F::from_canonical(xy), F::from_canonical(xy + L), inf};
    }
    const i64 chunks = (n + FB_CHUNK - 1) / FB_CHUNK;
#pragma omp parallel for schedule(dynamic, 4)
    for (i64 c = 0; c < chunks; c++) {
        const i64 lo = c * FB_CHUNK, hi = lo + FB_CHUNK < n ? lo + FB_CHUNK : n;
        Xyzz<F> acc[FB_CHUNK];
        F prefix[FB_CHUNK];
        F run = F::one();
        for (i64 i = lo; i < hi; i++) {
            Xyzz<F> a = Xyzz<F>::identity();
            const uint8_t* s = (const uint8_t*)(scalars + 4 * i);
            for (int j = 0; j < WINDOWS; j++)
                if (s[j]) a.add_affine(table[j * ENTRIES + s[j]]);
            acc[i - lo] = a;
            prefix[i - lo] = run;  // product of the ZZZ before this one
            if (!a.inf) run = run * a.ZZZ;
        }
        F inv = run.inv();
        for (i64 i = hi - 1; i >= lo; i--) {
            const Xyzz<F>& a = acc[i - lo];
            u64* o = out + 2 * L * i;
            if (a.inf) {
                memset(o, 0, 2 * L * sizeof(u64));
                continue;
            }
            F izzz = inv * prefix[i - lo];
            inv = inv * a.ZZZ;
            F izz = a.ZZ.sqr() * izzz.sqr();
            (a.X * izz).to_canonical(o);
            (a.Y * izzz).to_canonical(o + L);
        }
    }
}

}  // namespace

extern "C" {
void cpu_fixed_base_g1(i64 n, const u64* t, const u64* s, u64* o) { run<Fq>(n, t, s, o); }
void cpu_fixed_base_g2(i64 n, const u64* t, const u64* s, u64* o) { run<Fq2>(n, t, s, o); }
}
