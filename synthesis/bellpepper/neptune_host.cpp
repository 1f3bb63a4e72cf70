// neptune's Poseidon, natively: the one host implementation of the hash (issue 36), for the
// circuit's witness trace (neptune_trace: every value neptune.py's poseidon_hash allocates) and
// for plain hashes (neptune_hash: trees, labels, columns; porep-lite's and Filecoin's sealing).
//
// Built by synthesis/bellpepper/neptune.py (_lib) through arith.native.load. Vectors cross the
// ABI canonical (not Montgomery), 8 x uint32 per element, little-endian.
#include <stdint.h>
#include <string.h>
#include <vector>

typedef int64_t i64;

namespace {
const int MAX_T = 16;
}  // namespace

// BLS12-381 Fr in 4 x 64-bit Montgomery form (R = 2^256), for neptune_trace.
namespace fr64 {
typedef unsigned __int128 u128;
typedef uint64_t u64;
struct F { u64 v[4]; };
const u64 N[4] = {0xffffffff00000001ull, 0x53bda402fffe5bfeull, 0x3339d80809a1d805ull,
                  0x73eda753299d7d48ull};
const u64 INV = 0xfffffffeffffffffull;  // -N^-1 mod 2^64
const F R2 = {{0xc999e990f3f29c6dull, 0x2b6cedcb87925c23ull, 0x05d314967254398full,
               0x0748d9d99f59ff11ull}};
inline bool geq_n(const u64* a) {
    for (int i = 3; i >= 0; i--) {
        if (a[i] != N[i]) return a[i] > N[i];
    }
    return true;
}
inline void sub_n(u64* a) {
    u64 borrow = 0;
    for (int i = 0; i < 4; i++) {
        u128 d = (u128)a[i] - N[i] - borrow;
        a[i] = (u64)d;
        borrow = (u64)(d >> 127) & 1;
    }
}
inline F add(const F& a, const F& b) {
    F r;
    u64 c = 0;
    for (int i = 0; i < 4; i++) {
        u128 s = (u128)a.v[i] + b.v[i] + c;
        r.v[i] = (u64)s;
        c = (u64)(s >> 64);
    }
    if (geq_n(r.v)) sub_n(r.v);  // a + b < 2N < 2^256: no carry out
    return r;
}
inline F mul(const F& a, const F& b) {
    u64 t[6] = {0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        u64 c = 0;
        for (int j = 0; j < 4; j++) {
            u128 p = (u128)a.v[j] * b.v[i] + t[j] + c;
            t[j] = (u64)p;
            c = (u64)(p >> 64);
        }
        u128 s = (u128)t[4] + c;
        t[4] = (u64)s;
        t[5] = (u64)(s >> 64);
        u64 mm = t[0] * INV;
        u128 p = (u128)mm * N[0] + t[0];
        c = (u64)(p >> 64);
        for (int j = 1; j < 4; j++) {
            p = (u128)mm * N[j] + t[j] + c;
            t[j - 1] = (u64)p;
            c = (u64)(p >> 64);
        }
        s = (u128)t[4] + c;
        t[3] = (u64)s;
        t[4] = t[5] + (u64)(s >> 64);
    }
    F r = {{t[0], t[1], t[2], t[3]}};
    if (t[4] || geq_n(r.v)) sub_n(r.v);
    return r;
}
inline F load64(const uint32_t* p) {  // canonical little-endian -> Montgomery
    F x;
    memcpy(x.v, p, 32);
    return mul(x, R2);
}
inline void store64(uint32_t* p, const F& x) {  // Montgomery -> canonical
    const F one = {{1, 0, 0, 0}};
    F c = mul(x, one);
    memcpy(p, c.v, 32);
}
}  // namespace fr64

extern "C" {

// neptune's Poseidon circuit (synthesis/bellpepper/neptune.py): every value the circuit allocates,
// in its order, for a batch of preimages. consts: crc[rf t + rp] (compressed round constants),
// m[t t], pre_sparse[t t], w_hat[rp t], v_rest[rp (t-1)]; tag: one element; inputs (batch, t-1);
// out (batch, n) with n = 3 (t-1) + 4 t (rf-1) + 4 rp + 1, the hash last. Returns n, or -1.
//   first full round, input i >= 1: (x+k)^2, (x+k)^4, (x+k)^5 + k'   (the tag's S-box is constant)
//   later full rounds, each element: x (the allocated lc), x^2, x^4, x^5 + k (no k: terminal)
//   partial rounds: the same on element 0; MDS as neptune's apply_matrix: y_j = sum_i M[i][j] x_i
//   (pre_sparse after the 4th full round, the sparse w_hat / v_rest after each partial round)
// Field arithmetic: 4 x 64-bit Montgomery (CIOS with 128-bit products), ~5x the speed of the
// 8 x 32-bit ff.cuh code on the host (measured: bench/bellpepper_witness.py).
// neptune_hash: the same computation without the trace: only the hashes, (batch,) to hash_out
// (what the trees and the labels use).
i64 neptune_run(i64 batch, int t, int rf, int rp, const uint32_t* consts, const uint32_t* tag,
                const uint32_t* inputs, uint32_t* out, uint32_t* hash_out) {
    using namespace fr64;
    if (t < 2 || t > MAX_T || rf < 2 || rf % 2) return -1;
    const i64 n = 3 * (i64)(t - 1) + 4 * (i64)t * (rf - 1) + 4 * (i64)rp + 1;
    const int half = rf / 2, u = t - 1;
    const i64 ncrc = (i64)rf * t + rp;
    std::vector<F> crc(ncrc), m(t * t), pre(t * t), wh((i64)rp * t), vr((i64)rp * u);
    i64 o = 0;
    for (i64 i = 0; i < ncrc; i++) crc[i] = load64(consts + 8 * o++);
    for (int i = 0; i < t * t; i++) m[i] = load64(consts + 8 * o++);
    for (int i = 0; i < t * t; i++) pre[i] = load64(consts + 8 * o++);
    for (i64 i = 0; i < (i64)rp * t; i++) wh[i] = load64(consts + 8 * o++);
    for (i64 i = 0; i < (i64)rp * u; i++) vr[i] = load64(consts + 8 * o++);
    const F tg = load64(tag);
#pragma omp parallel for schedule(static) if (batch >= 8)
    for (i64 b = 0; b < batch; b++) {
        F s[MAX_T], tmp[MAX_T];
        uint32_t* tr = out ? out + 8 * b * n : nullptr;
        i64 k = 0;
        auto put = [&](const F& x) { if (tr) store64(tr + 8 * k, x); k++; };
        auto dense = [&](const std::vector<F>& mat) {
            for (int j = 0; j < t; j++) {
                F acc = mul(mat[j], s[0]);
                for (int i = 1; i < t; i++) acc = add(acc, mul(mat[i * t + j], s[i]));
                tmp[j] = acc;
            }
            for (int j = 0; j < t; j++) s[j] = tmp[j];
        };
        int rnd = 0;
        auto mds = [&]() {
            if (rnd == half - 1) {
                dense(pre);
            } else if (rnd > half - 1 && rnd < half + rp) {
                const int q = rnd - half;
                F first = mul(wh[(i64)q * t], s[0]);
                for (int i = 1; i < t; i++) first = add(first, mul(wh[(i64)q * t + i], s[i]));
                for (int j = 1; j < t; j++) s[j] = add(s[j], mul(s[0], vr[(i64)q * u + j - 1]));
                s[0] = first;
            } else {
                dense(m);
            }
            rnd++;
        };
        auto sbox = [&](int i, const F* key) {
            F x = s[i], x2 = mul(x, x), x4 = mul(x2, x2), r = mul(x4, x);
            if (key) r = add(r, *key);
            put(x); put(x2); put(x4); put(r);
            s[i] = r;
        };
        {
            F y = add(tg, crc[0]), y2 = mul(y, y), y4 = mul(y2, y2);
            s[0] = add(mul(y4, y), crc[t]);
            for (int i = 1; i < t; i++) {
                F x = add(load64(inputs + 8 * (b * u + i - 1)), crc[i]);
                F q = mul(x, x), q2 = mul(q, q), r = add(mul(q2, x), crc[t + i]);
                put(q); put(q2); put(r);
                s[i] = r;
            }
            mds();
        }
        i64 off = 2 * t;
        for (int r = 1; r < half; r++) {
            for (int i = 0; i < t; i++) sbox(i, &crc[off + i]);
            off += t;
            mds();
        }
        for (int p = 0; p < rp; p++) {
            sbox(0, &crc[off]);
            off += 1;
            mds();
        }
        for (int r = 0; r < half - 1; r++) {
            for (int i = 0; i < t; i++) sbox(i, &crc[off + i]);
            off += t;
            mds();
        }
        for (int i = 0; i < t; i++) sbox(i, nullptr);
        mds();
        put(s[1]);
        if (hash_out) store64(hash_out + 8 * b, s[1]);
    }
    return n;
}

i64 neptune_trace(i64 batch, int t, int rf, int rp, const uint32_t* consts, const uint32_t* tag,
                  const uint32_t* inputs, uint32_t* out) {
    return neptune_run(batch, t, rf, rp, consts, tag, inputs, out, nullptr);
}

i64 neptune_hash(i64 batch, int t, int rf, int rp, const uint32_t* consts, const uint32_t* tag,
                 const uint32_t* inputs, uint32_t* hash_out) {
    return neptune_run(batch, t, rf, rp, consts, tag, inputs, nullptr, hash_out);
}

}  // extern "C"
