// SHA-256 compression with the witness trace of the SHA-256 gadget (synthesis/gadgets/sha256.py).
//
// Built by gadgets/sha256.py (kernel()) through arith.native.build. One call compresses a batch
// and writes, per instance, every variable the gadget's _compress_direct allocates, in its order,
// one byte (0 or 1) each:
//   schedule t = 16..63 (variable message only):
//     sigma0: (a^b) 32 bits, then (a^b^c) bits 0..28; sigma1: 32, then bits 0..21;
//     W_t: the 34 bits of the 4-term sum
//   round t = 0..63: [t > 0: e's sum bits], Sigma1 32 + 32, ch 32, [t > 0: a's sum bits],
//     Sigma0 32 + 32, maj: bc 32, maj 32
//   final: the sum bits of H0..H7 (a sum's bit count: bit length of its largest possible value)
// With a constant message the schedule is computed here and K_t + W_t is one constant.
#include <stdint.h>
#include <string.h>

#include "sha256.cuh"

typedef int64_t i64;
typedef uint64_t u64;
typedef uint32_t u32;

namespace {
using sha256_host::K;
using sha256_host::rotr;
const u64 M32 = 0xFFFFFFFFull;

inline int bitlen(u64 x) { return x ? 64 - __builtin_clzll(x) : 0; }

struct Trace {
    uint8_t* p;
    i64 k = 0;
    inline void bits(u64 v, int n) {
        if (p)
            for (int i = 0; i < n; i++) p[k + i] = (uint8_t)((v >> i) & 1);
        k += n;
    }
};

// sum of nw words and a constant: its bits go to the trace, the low 32 bits are returned
inline u32 add(Trace& tr, const u32* w, int nw, u64 c) {
    u64 total = c;
    for (int i = 0; i < nw; i++) total += w[i];
    tr.bits(total, bitlen((u64)nw * M32 + c));
    return (u32)total;
}

inline u32 xor3(Trace& tr, u32 a, u32 b, u32 c, int shr) {
    u32 t = a ^ b;
    tr.bits(t, 32);
    tr.bits(t ^ c, 32 - shr);
    return t ^ c;
}

i64 compress1(const u32* H, const u32* block, int const_msg, u32* out, uint8_t* trace) {
    Trace tr{trace};
    u32 W[64];
    for (int t = 0; t < 16; t++) W[t] = block[t];
    for (int t = 16; t < 64; t++) {
        u32 x = W[t - 15], y = W[t - 2];
        u32 s0, s1;
        if (const_msg) {
            s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3);
            s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >> 10);
            W[t] = W[t - 16] + s0 + W[t - 7] + s1;
        } else {
            s0 = xor3(tr, rotr(x, 7), rotr(x, 18), x >> 3, 3);
            s1 = xor3(tr, rotr(y, 17), rotr(y, 19), y >> 10, 10);
            u32 terms[4] = {W[t - 16], s0, W[t - 7], s1};
            W[t] = add(tr, terms, 4, 0);
        }
    }
    u32 a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
    // deferred sums: words and constant of e and a (materialized where first used)
    u32 et[6], at[7];
    int ne = 0, na = 0;
    u64 ec = 0, ac = 0;
    for (int t = 0; t < 64; t++) {
        if (t > 0) e = add(tr, et, ne, ec);
        u32 S1 = xor3(tr, rotr(e, 6), rotr(e, 11), rotr(e, 25), 0);
        u32 ch = (e & f) ^ (~e & g);
        tr.bits(ch, 32);
        if (t > 0) a = add(tr, at, na, ac);
        u32 S0 = xor3(tr, rotr(a, 2), rotr(a, 13), rotr(a, 22), 0);
        u32 bc = b & c, mj = (a & b) ^ (a & c) ^ bc;
        tr.bits(bc, 32);
        tr.bits(mj, 32);
        // t1 = h + S1 + ch + K + W (K + W one constant when the message is)
        u32 t1[5] = {h, S1, ch, W[t], 0};
        int n1 = const_msg ? 3 : 4;
        u64 c1 = const_msg ? (u64)((K[t] + W[t]) & M32) : (u64)K[t];
        h = g; g = f; f = e;
        ne = 0;
        for (int i = 0; i < n1; i++) et[ne++] = t1[i];
        et[ne++] = d;
        ec = c1;
        d = c; c = b; b = a;
        na = 0;
        for (int i = 0; i < n1; i++) at[na++] = t1[i];
        at[na++] = S0;
        at[na++] = mj;
        ac = c1;
    }
    at[na++] = H[0];
    out[0] = add(tr, at, na, ac);
    u32 p1[2] = {H[1], b}, p2[2] = {H[2], c}, p3[2] = {H[3], d};
    out[1] = add(tr, p1, 2, 0);
    out[2] = add(tr, p2, 2, 0);
    out[3] = add(tr, p3, 2, 0);
    et[ne++] = H[4];
    out[4] = add(tr, et, ne, ec);
    u32 p5[2] = {H[5], f}, p6[2] = {H[6], g}, p7[2] = {H[7], h};
    out[5] = add(tr, p5, 2, 0);
    out[6] = add(tr, p6, 2, 0);
    out[7] = add(tr, p7, 2, 0);
    return tr.k;
}
}  // namespace

extern "C" {

// Variables per compression: for a constant message the bit counts of the sums depend on the
// constants, so the length of one instance is that of the block given (all rows share it).
i64 sha256_trace_len_for(const u32* block, int const_msg) {
    u32 H[8] = {0}, out[8];
    return compress1(H, block, const_msg, out, nullptr);
}

i64 sha256_trace_len(int const_msg) {
    u32 zero[16] = {0};
    return sha256_trace_len_for(zero, const_msg);
}

// state: (batch, 8) words, block: (batch, 16) words, out: (batch, 8), trace: (batch, len) or null.
int sha256_compress(i64 batch, const u32* state, const u32* block, u32* out, uint8_t* trace,
                    i64 const_msg) {
    const i64 len = sha256_trace_len_for(block, (int)const_msg);
#pragma omp parallel for schedule(static) if (batch >= 64)
    for (i64 i = 0; i < batch; i++)
        compress1(state + 8 * i, block + 16 * i, (int)const_msg, out + 8 * i,
                  trace ? trace + len * i : nullptr);
    return 0;
}

}  // extern "C"
