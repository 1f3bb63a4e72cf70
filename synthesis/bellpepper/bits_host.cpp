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
}
