// Native replay of a recorded bit-gadget template (synthesis/bellpepper/template.py): computes, for
// a batch of instances, every variable the template allocates, in allocation order, one byte
// (0 or 1) each. Built through arith.native.build.
//
// Values of an instance: v[0] = 0, v[1] = 1, v[2 .. 2 + nslots) the input slots, then the
// template's own variables. An operand ref r reads v[r >> 1] ^ (r & 1) (bit 0: negated, as a
// Boolean::Not). The program is a stream of int32:
//   0 XOR a b         x = a ^ b                      (AllocatedBit::xor)
//   1 AND a b         x = a & b                      (and, and_not, nor: negations in the refs)
//   2 CH a b c        x = (a & b) ^ (~a & c)         (Boolean::sha256_ch)
//   3 MAJ a b c       x = (a & b) ^ (a & c) ^ (b & c)
//   4 SUM n k refs[32 n]  the k low bits of sum_w sum_i bit(w, i) 2^i   (UInt32::addmany)
// each op writing the next own variable(s).
#include <stdint.h>
#include <string.h>
#include <vector>

typedef int64_t i64;
typedef uint64_t u64;

extern "C" {

// Returns 0, or -1 when the program is malformed (it writes past naux or reads a later value).
int bits_replay(const int32_t* prog, i64 prog_len, int nslots, i64 naux, i64 batch,
                const uint8_t* slots, uint8_t* trace) {
    int bad = 0;
#pragma omp parallel for schedule(static) if (batch >= 4) reduction(| : bad)
    for (i64 b = 0; b < batch; b++) {
        std::vector<uint8_t> v(2 + nslots + naux);
        v[0] = 0;
        v[1] = 1;
        memcpy(&v[2], slots + b * nslots, nslots);
        const i64 base = 2 + nslots, end = base + naux;
        i64 k = base;
        const uint8_t* vv = v.data();
#define E(r) ((uint8_t)(vv[(r) >> 1] ^ ((r) & 1)))
        i64 pc = 0;
        while (pc < prog_len && !bad) {
            const int32_t op = prog[pc];
            if (op == 4) {
                const int n = prog[pc + 1], nb = prog[pc + 2];
                const int32_t* refs = prog + pc + 3;
                u64 total = 0;
                for (int w = 0; w < n; w++) {
                    u64 word = 0;
                    for (int i = 0; i < 32; i++) word |= (u64)E(refs[32 * w + i]) << i;
                    total += word;
                }
                if (k + nb > end) { bad = 1; break; }
                for (int i = 0; i < nb; i++) v[k + i] = (uint8_t)((total >> i) & 1);
                k += nb;
                pc += 3 + 32 * (i64)n;
                continue;
            }
            if (k >= end) { bad = 1; break; }
            const int32_t a = prog[pc + 1], c2 = prog[pc + 2];
            uint8_t x;
            if (op == 0) {
                x = E(a) ^ E(c2);
                pc += 3;
            } else if (op == 1) {
                x = E(a) & E(c2);
                pc += 3;
            } else if (op == 2) {
                const int32_t c3 = prog[pc + 3];
                x = (uint8_t)((E(a) & E(c2)) ^ ((1 ^ E(a)) & E(c3)));
                pc += 4;
            } else if (op == 3) {
                const int32_t c3 = prog[pc + 3];
                x = (uint8_t)((E(a) & E(c2)) ^ (E(a) & E(c3)) ^ (E(c2) & E(c3)));
                pc += 4;
            } else {
                bad = 1;
                break;
            }
            v[k++] = x;
        }
#undef E
        if (k != end) bad = 1;
        memcpy(trace + b * naux, &v[base], naux);
    }
    return bad ? -1 : 0;
}

// The same replay bit-sliced: 64 instances at a time, one uint64 per value (lane l = instance
// 64 g + l), so each op is one word operation for 64 instances; SUM adds its column bits into a
// 6-plane binary counter (ripple half adders), emits the counter's low plane and shifts it.
// Slots and trace are transposed at the group's edges. Same contract as bits_replay.
int bits_replay64(const int32_t* prog, i64 prog_len, int nslots, i64 naux, i64 batch,
                  const uint8_t* slots, uint8_t* trace) {
    const i64 groups = (batch + 63) / 64;
    int bad = 0;
#pragma omp parallel for schedule(dynamic) if (groups >= 2) reduction(| : bad)
    for (i64 g = 0; g < groups; g++) {
        const i64 b0 = 64 * g;
        const int lanes = (int)(batch - b0 < 64 ? batch - b0 : 64);
        std::vector<u64> v(2 + nslots + naux, 0);
        v[1] = ~0ull;
        for (int l = 0; l < lanes; l++) {
            const uint8_t* in = slots + (b0 + l) * nslots;
            for (int j = 0; j < nslots; j++) v[2 + j] |= (u64)(in[j] & 1) << l;
        }
        const i64 base = 2 + nslots, end = base + naux;
        i64 k = base;
        u64* vv = v.data();
#define E64(r) (vv[(r) >> 1] ^ (0 - (u64)((r) & 1)))
        i64 pc = 0;
        while (pc < prog_len) {
            const int32_t op = prog[pc];
            if (op == 4) {
                const int n = prog[pc + 1], nb = prog[pc + 2];
                const int32_t* refs = prog + pc + 3;
                if (k + nb > end) { bad = 1; break; }
                u64 cnt[6] = {0, 0, 0, 0, 0, 0};
                for (int i = 0; i < nb; i++) {
                    if (i < 32) {
                        for (int w = 0; w < n; w++) {
                            u64 carry = E64(refs[32 * w + i]);
                            for (int q = 0; q < 6 && carry; q++) {
                                const u64 t = cnt[q] & carry;
                                cnt[q] ^= carry;
                                carry = t;
                            }
                        }
                    }
                    vv[k + i] = cnt[0];
                    for (int q = 0; q < 5; q++) cnt[q] = cnt[q + 1];
                    cnt[5] = 0;
                }
                k += nb;
                pc += 3 + 32 * (i64)n;
                continue;
            }
            if (k >= end) { bad = 1; break; }
            const int32_t a = prog[pc + 1], c2 = prog[pc + 2];
            u64 x;
            if (op == 0) {
                x = E64(a) ^ E64(c2);
                pc += 3;
            } else if (op == 1) {
                x = E64(a) & E64(c2);
                pc += 3;
            } else if (op == 2) {
                const u64 ea = E64(a);
                x = (ea & E64(c2)) ^ (~ea & E64(prog[pc + 3]));
                pc += 4;
            } else if (op == 3) {
                const u64 ea = E64(a), eb = E64(c2), ec = E64(prog[pc + 3]);
                x = (ea & eb) ^ (ea & ec) ^ (eb & ec);
                pc += 4;
            } else {
                bad = 1;
                break;
            }
            vv[k++] = x;
        }
#undef E64
        if (k != end) bad = 1;
        for (int l = 0; l < lanes; l++) {
            uint8_t* out = trace + (b0 + l) * naux;
            const u64* src = vv + base;
            for (i64 j = 0; j < naux; j++) out[j] = (uint8_t)((src[j] >> l) & 1);
        }
    }
    return bad ? -1 : 0;
}
}

