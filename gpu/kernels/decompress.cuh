// Point decompression for key files (gpu/groth16/keys.py, format 2), host and device.
//
// The compressed encoding is arkworks' / ZCash's: x big-endian (G2: x.c1 then x.c0), the top
// three bits of the first byte are flags: 0x80 compressed, 0x40 the point at infinity (every
// other bit zero), 0x20 "y is the lexicographically larger of y, -y" (Fq2 compares c1 first,
// then c0). y = sqrt(x^3 + b): in Fq (p = 3 mod 4) y = a^((p+1)/4); in Fq2 algorithm 9 of
// Adj and Rodriguez-Henriquez, "Square root computation over even extension fields" (2012).
// A key file's sections are hash-checked before any of this runs, so the subgroup check is
// skipped (as the uncompressed reader skips it); a point off the curve still fails here.
#pragma once
#include "curve_io.cuh"

// e = (p + k) >> s for the Fq modulus p and a small k (-3, -1, 1), as 12 little-endian limbs.
CURVE_FN void fq_exponent(int k, int s, uint32_t* e) {
    int64_t carry = k;
    for (int i = 0; i < 12; i++) {
        int64_t t = (int64_t)fq_params::mod(i) + carry;
        e[i] = (uint32_t)(t & 0xffffffff);
        carry = t < 0 ? -1 : (t >> 32);
    }
    for (int j = 0; j < s; j++)
        for (int i = 0; i < 12; i++) e[i] = (e[i] >> 1) | (i < 11 ? (e[i + 1] << 31) : 0u);
}

// x > (p - 1) / 2 for a canonical x (limbs little-endian): the larger of x, -x.
CURVE_FN bool fq_is_larger_half(const uint32_t* x) {
    uint32_t h[12];
    fq_exponent(-1, 1, h);
    for (int i = 11; i >= 0; i--) {
        if (x[i] != h[i]) return x[i] > h[i];
    }
    return false;
}

CURVE_FN bool fq_sqrt(const fq_t& a, fq_t* out) {
    uint32_t e[12];
    fq_exponent(1, 2, e);
    fq_t r = a.pow(e, 12);
    *out = r;
    return r.sqr() == a;
}

CURVE_FN bool fq2_sqrt(const fq2_t& a, fq2_t* out) {
    if (a.is_zero()) { *out = a; return true; }
    uint32_t e[12];
    fq_exponent(-3, 2, e);
    fq2_t a1 = a.pow(e, 12);
    fq2_t alpha = a1.sqr() * a;
    fq2_t a0 = alpha.conj() * alpha;  // alpha^(p+1): alpha^p is the conjugate
    fq2_t minus_one = -fq2_t::one();
    if (a0 == minus_one) return false;
    fq2_t x0 = a1 * a, x;
    if (alpha == minus_one) {
        x = fq2_t::make(-x0.c1, x0.c0);  // u x0
    } else {
        fq_exponent(-1, 1, e);
        fq2_t b = (alpha + fq2_t::one()).pow(e, 12);
        x = b * x0;
    }
    *out = x;
    return x.sqr() == a;
}

// 48 big-endian bytes (flag bits cleared by the caller) -> 12 little-endian limbs.
CURVE_FN void be48_to_limbs(const uint8_t* b, uint32_t* limbs, bool clear_flags) {
    for (int i = 0; i < 12; i++) {
        const uint8_t* p = b + 48 - 4 * (i + 1);
        uint32_t w = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
        if (clear_flags && i == 11) w &= 0x1fffffffu;
        limbs[i] = w;
    }
}

// 0 ok; 1 bad flags (not compressed, or an infinity with other bits set); 2 x >= p; 3 no
// square root (x is not the x of a curve point). *p: the point, Montgomery affine (the identity
// (0, 0), as load_bases writes it; *inf set).
CURVE_FN int decompress_g1_affine(const uint8_t* in, affine_t<fq_t>* p, bool* inf) {
    uint8_t flags = in[0] >> 5;
    *p = affine_t<fq_t>::identity();
    *inf = false;
    if (!(flags & 4)) return 1;
    if (flags & 2) {
        if (flags & 1 || (in[0] & 0x1f)) return 1;
        for (int i = 1; i < 48; i++) if (in[i]) return 1;
        *inf = true;
        return 0;
    }
    uint32_t x[12];
    be48_to_limbs(in, x, true);
    if (fq_t::geq_mod(x)) return 2;
    fq_t xm = fq_t::from_limbs(x).to_mont(), y;
    if (!fq_sqrt(xm.sqr() * xm + curve_b((const fq_t*)0), &y)) return 3;
    fq_t yc = y.from_mont();
    if (fq_is_larger_half(yc.v) != (bool)(flags & 1)) y = -y;
    *p = affine_t<fq_t>{xm, y};
    return 0;
}

// The same, out: canonical xy limbs (identity all zero).
CURVE_FN int decompress_g1(const uint8_t* in, uint32_t* out) {
    affine_t<fq_t> p;
    bool inf;
    for (int i = 0; i < 24; i++) out[i] = 0;
    int r = decompress_g1_affine(in, &p, &inf);
    if (r || inf) return r;
    store_affine<fq_t>(p, out);
    return 0;
}

CURVE_FN bool fq2_is_larger_half(const fq2_t& y_canonical) {
    if (!y_canonical.c1.is_zero()) return fq_is_larger_half(y_canonical.c1.v);
    return fq_is_larger_half(y_canonical.c0.v);
}

CURVE_FN int decompress_g2_affine(const uint8_t* in, affine_t<fq2_t>* p, bool* inf) {
    uint8_t flags = in[0] >> 5;
    *p = affine_t<fq2_t>::identity();
    *inf = false;
    if (!(flags & 4)) return 1;
    if (flags & 2) {
        if (flags & 1 || (in[0] & 0x1f)) return 1;
        for (int i = 1; i < 96; i++) if (in[i]) return 1;
        *inf = true;
        return 0;
    }
    uint32_t x1[12], x0[12];
    be48_to_limbs(in, x1, true);
    be48_to_limbs(in + 48, x0, false);
    if (fq_t::geq_mod(x1) || fq_t::geq_mod(x0)) return 2;
    fq2_t xm = fq2_t::make(fq_t::from_limbs(x0), fq_t::from_limbs(x1)).to_mont(), y;
    if (!fq2_sqrt(xm.sqr() * xm + curve_b((const fq2_t*)0), &y)) return 3;
    if (fq2_is_larger_half(y.from_mont()) != (bool)(flags & 1)) y = -y;
    *p = affine_t<fq2_t>{xm, y};
    return 0;
}

CURVE_FN int decompress_g2(const uint8_t* in, uint32_t* out) {
    affine_t<fq2_t> p;
    bool inf;
    for (int i = 0; i < 48; i++) out[i] = 0;
    int r = decompress_g2_affine(in, &p, &inf);
    if (r || inf) return r;
    store_affine<fq2_t>(p, out);
    return 0;
}
