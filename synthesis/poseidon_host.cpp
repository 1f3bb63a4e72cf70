// Batched Poseidon permutation with its witness trace, for porep-lite synthesis.
//
// Built by synthesis/poseidon.py (kernel()) through arith.native.build from the same ff.cuh field
// template as the host library and the CUDA kernels. One call permutes a whole batch of states
// and writes, per instance, every value the Poseidon gadget allocates, in the gadget's order:
//   full round r:    for each i: [x_i if r is the first full round after the partial ones],
//                    x_i^2, x_i^4, x_i^5         (x_i = state_i + c_{r,i})
//   partial round r: x, x^2, x^4, x^5           (x = state_0 + c_{r,0})
// followed by the MDS layer (in the partial rounds, an equivalent O(t) form; see below). Vectors cross the ABI canonical (not Montgomery), 8 x uint32 per
// element, little-endian. Replaces ~900 vector calls per batched permutation (measured: the
// sparse MDS product alone cost ~140 ns an entry, its per-entry Montgomery conversions included).
#include <stdint.h>
#include <string.h>
#include <vector>
#include "fr.cuh"

typedef int64_t i64;

namespace {
inline fr_t load(const uint32_t* p) { return fr_t::from_limbs(p).to_mont(); }
inline void store(uint32_t* p, const fr_t& x) {
    fr_t c = x.from_mont();
    memcpy(p, c.v, sizeof c.v);
}
const int MAX_T = 16;
}  // namespace

extern "C" {

// Number of trace values per instance, or -1 for an unsupported width.
i64 poseidon_trace_len(int t, int rf, int rp) {
    if (t < 2 || t > MAX_T) return -1;
    return (i64)rf * t * 3 + t + (i64)rp * 4;
}

// state: (batch, t) in and out. constants: (rf + rp, t). mds: (t, t) row-major.
// sparse: the partial rounds in O(t) form (synthesis/poseidon.py, sparse_partial_rounds):
//   m00, e[rp], v[rp][t-1], w[rp][t-1], M11^rp [t-1][t-1], constants of the next full round[t].
// trace: (batch, poseidon_trace_len) or null. Returns 0, or -1 for an unsupported width.
int poseidon_permute(i64 batch, int t, int rf, int rp, const uint32_t* constants,
                     const uint32_t* mds, const uint32_t* sparse, uint32_t* state, uint32_t* trace) {
    const i64 len = poseidon_trace_len(t, rf, rp);
    if (len < 0) return -1;
    const int rounds = rf + rp, half = rf / 2, after = half + rp, u = t - 1;
    std::vector<fr_t> c(rounds * t), m(t * t);
    for (int i = 0; i < rounds * t; i++) c[i] = load(constants + 8 * i);
    for (int i = 0; i < t * t; i++) m[i] = load(mds + 8 * i);
    const i64 nsp = 1 + (i64)rp * (1 + 2 * u) + (i64)u * u + t;
    std::vector<fr_t> sp(nsp);
    for (i64 i = 0; i < nsp; i++) sp[i] = load(sparse + 8 * i);
    const fr_t m00 = sp[0];
    const fr_t *e = &sp[1], *v = &sp[1 + rp], *w = &sp[1 + rp + (i64)rp * u];
    const fr_t *pw = &sp[1 + rp + 2 * (i64)rp * u], *c_after = pw + u * u;
    // one instance is ~5.5k Montgomery products at t = 9: worth a thread from a few instances
#pragma omp parallel for schedule(static) if (batch >= 8)
    for (i64 b = 0; b < batch; b++) {
        fr_t s[MAX_T], tmp[MAX_T];
        for (int i = 0; i < t; i++) s[i] = load(state + 8 * (b * t + i));
        uint32_t* tr = trace ? trace + 8 * b * len : nullptr;
        i64 k = 0;
        auto put = [&](const fr_t& x) { if (tr) store(tr + 8 * k, x); k++; };
        auto full_round = [&](const fr_t* rc, bool extra) {
            for (int i = 0; i < t; i++) {
                fr_t x = s[i] + rc[i];
                if (extra) put(x);
                fr_t x2 = x.sqr(), x4 = x2.sqr(), x5 = x4 * x;
                put(x2); put(x4); put(x5);
                s[i] = x5;
            }
            for (int i = 0; i < t; i++) {
                fr_t acc = fr_t::zero();
                for (int j = 0; j < t; j++) acc = acc + m[i * t + j] * s[j];
                tmp[i] = acc;
            }
            for (int i = 0; i < t; i++) s[i] = tmp[i];
        };
        for (int r = 0; r < half; r++) full_round(&c[r * t], false);
        // partial rounds on w (s = diag(1, M11^p) w): 2t - 1 products a round instead of t^2
        for (int p = 0; p < rp; p++) {
            fr_t x = s[0] + e[p];
            fr_t x2 = x.sqr(), x4 = x2.sqr(), y = x4 * x;
            put(x); put(x2); put(x4); put(y);
            fr_t w0 = m00 * y;
            for (int i = 0; i < u; i++) w0 = w0 + v[p * u + i] * s[1 + i];
            for (int i = 0; i < u; i++) s[1 + i] = s[1 + i] + w[p * u + i] * y;
            s[0] = w0;
        }
        for (int i = 0; i < u; i++) {
            fr_t acc = fr_t::zero();
            for (int k = 0; k < u; k++) acc = acc + pw[i * u + k] * s[1 + k];
            tmp[1 + i] = acc;
        }
        for (int i = 0; i < u; i++) s[1 + i] = tmp[1 + i];
        full_round(c_after, true);
        for (int r = after + 1; r < rounds; r++) full_round(&c[r * t], false);
        for (int i = 0; i < t; i++) store(state + 8 * (b * t + i), s[i]);
    }
    return 0;
}

// neptune's Poseidon circuit (synthesis/bellpepper/neptune.py): every value the circuit allocates,
// in its order, for a batch of preimages. consts: crc[rf t + rp] (compressed round constants),
// m[t t], pre_sparse[t t], w_hat[rp t], v_rest[rp (t-1)]; tag: one element; inputs (batch, t-1);
// out (batch, n) with n = 3 (t-1) + 4 t (rf-1) + 4 rp + 1, the hash last. Returns n, or -1.
//   first full round, input i >= 1: (x+k)^2, (x+k)^4, (x+k)^5 + k'   (the tag's S-box is constant)
//   later full rounds, each element: x (the allocated lc), x^2, x^4, x^5 + k (no k: terminal)
//   partial rounds: the same on element 0; MDS as neptune's apply_matrix: y_j = sum_i M[i][j] x_i
//   (pre_sparse after the 4th full round, the sparse w_hat / v_rest after each partial round)
i64 neptune_trace(i64 batch, int t, int rf, int rp, const uint32_t* consts, const uint32_t* tag,
                  const uint32_t* inputs, uint32_t* out) {
    if (t < 2 || t > MAX_T || rf < 2 || rf % 2) return -1;
    const i64 n = 3 * (i64)(t - 1) + 4 * (i64)t * (rf - 1) + 4 * (i64)rp + 1;
    const int half = rf / 2, u = t - 1;
    const i64 ncrc = (i64)rf * t + rp;
    std::vector<fr_t> crc(ncrc), m(t * t), pre(t * t), wh((i64)rp * t), vr((i64)rp * u);
    i64 o = 0;
    for (i64 i = 0; i < ncrc; i++) crc[i] = load(consts + 8 * o++);
    for (int i = 0; i < t * t; i++) m[i] = load(consts + 8 * o++);
    for (int i = 0; i < t * t; i++) pre[i] = load(consts + 8 * o++);
    for (i64 i = 0; i < (i64)rp * t; i++) wh[i] = load(consts + 8 * o++);
    for (i64 i = 0; i < (i64)rp * u; i++) vr[i] = load(consts + 8 * o++);
    const fr_t tg = load(tag);
#pragma omp parallel for schedule(static) if (batch >= 8)
    for (i64 b = 0; b < batch; b++) {
        fr_t s[MAX_T], tmp[MAX_T];
        uint32_t* tr = out + 8 * b * n;
        i64 k = 0;
        auto put = [&](const fr_t& x) { store(tr + 8 * k, x); k++; };
        auto dense = [&](const std::vector<fr_t>& mat) {
            for (int j = 0; j < t; j++) {
                fr_t acc = fr_t::zero();
                for (int i = 0; i < t; i++) acc = acc + mat[i * t + j] * s[i];
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
                fr_t first = fr_t::zero();
                for (int i = 0; i < t; i++) first = first + wh[(i64)q * t + i] * s[i];
                for (int j = 1; j < t; j++) s[j] = s[j] + s[0] * vr[(i64)q * u + j - 1];
                s[0] = first;
            } else {
                dense(m);
            }
            rnd++;
        };
        auto sbox = [&](int i, const fr_t* key) {
            fr_t x = s[i], x2 = x.sqr(), x4 = x2.sqr(), r = x4 * x;
            if (key) r = r + *key;
            put(x); put(x2); put(x4); put(r);
            s[i] = r;
        };
        // first full round
        {
            fr_t y = tg + crc[0], y2 = y.sqr(), y4 = y2.sqr();
            s[0] = y4 * y + crc[t];
            for (int i = 1; i < t; i++) {
                fr_t x = load(inputs + 8 * (b * u + i - 1)) + crc[i];
                fr_t q = x.sqr(), q2 = q.sqr(), r = q2 * x + crc[t + i];
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
    }
    return n;
}

}  // extern "C"
