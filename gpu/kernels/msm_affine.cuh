// Bucket accumulation by batched affine additions, the per-thread bodies (host and device).
//
// Why: a bucket's run of the sorted digits summed into an XYZZ accumulator costs a mixed
// addition a point, 8M + 2S = 10 Fq products, and at G1 2^24 over precomputed tables
// (2^24 x 12 digits) that is ~89 ms of the MSM's 106. Two affine points add with 3 products
// and one inversion, P + Q = (l^2 - x_P - x_Q, l (x_P - x3) - y_P), l = (y_Q - y_P) / (x_Q - x_P),
// and Montgomery's trick shares one inversion among any number of additions at 3 products
// each: 6 products an addition, when every addition of a step is independent of the others.
// A bucket's run is not (each point adds into the same sum), so the run is summed as a tree:
//
//   round r: the run of each bucket (length c_b) is cut into pairs (items 0+1, 2+3, ...); each
//            pair becomes one point (an odd last item is carried), so c_b -> ceil(c_b / 2).
//            All pairs of all buckets are independent: one batched inversion for the round.
//   after R rounds the few points left of each bucket are summed in XYZZ (bucket_final).
//
// One round on the device (gpu/cuda/affine_acc.py):
//   layout   c_out = ceil(c_in / 2), exclusive scan -> start_out (msm.cu's scan), then each
//            pair's first item writes the pair's slot: src[j] = item | PARTNER, key_out[j];
//   prefix   thread t takes the pairs j = t, t + T, ... (K of them): the pair's denominator
//            d_j, the running product into pre[j], the thread's product into tot[t];
//   invert   tot[] inverted by the same trick one level up (and up, until one thread block
//            takes the last 512 x 32 values: a product tree and one binary-Euclid inversion);
//   apply    thread t walks its pairs backwards: 1/d_j = (1 / (d_0..d_j)) * pre[j - T], then
//            the affine sum of the pair into the round's output.
// Products: 1 (prefix) + 2 (apply's inverse) + 3 (the addition) = 6 a pair, against 10.
//
// A pair is not always a chord: x_P = x_Q is a doubling (y equal: l = 3x^2 / 2y) or a zero sum
// (P = -Q); an identity (x = y = 0, the tables' encoding of a zero base, or a zero sum of an
// earlier round) passes the other point through. Those take the denominator 1 so the batch's
// product never meets a zero.
#pragma once
#include <stdint.h>
#include "fq2.cuh"
#include "curve.cuh"
#include "msm_core.cuh"

// A pair's slot in src[]: the first item's index, this bit when the second exists.
#define AFFINE_PARTNER 0x80000000u

enum { PAIR_P = 0, PAIR_Q = 1, PAIR_ZERO = 2, PAIR_ADD = 3, PAIR_DBL = 4 };

template <class F>
CURVE_FN int pair_kind(const affine_t<F>& p, const affine_t<F>& q, bool has_q) {
    if (!has_q || q.is_identity()) return PAIR_P;
    if (p.is_identity()) return PAIR_Q;
    if (p.x == q.x) return (p.y == q.y && !p.y.is_zero()) ? PAIR_DBL : PAIR_ZERO;
    return PAIR_ADD;
}

// The pair's denominator: x_Q - x_P (chord), 2 y_P (doubling), else 1 (no inversion needed).
template <class F>
CURVE_FN F pair_den(const affine_t<F>& p, const affine_t<F>& q, int kind) {
    if (kind == PAIR_ADD) return q.x - p.x;
    if (kind == PAIR_DBL) return p.y.dbl();
    return F::one();
}

// The pair's sum, given inv = 1 / pair_den. For a doubling q = p, so x3 = l^2 - 2 x_P is the
// chord's formula too.
template <class F>
CURVE_FN affine_t<F> pair_sum(const affine_t<F>& p, const affine_t<F>& q, int kind, const F& inv) {
    if (kind == PAIR_P) return p;
    if (kind == PAIR_Q) return q;
    if (kind == PAIR_ZERO) return affine_t<F>::identity();
    F num;
    if (kind == PAIR_ADD) {
        num = q.y - p.y;
    } else {
        F x2 = p.x.sqr();
        num = x2.dbl() + x2;
    }
    F l = num * inv;
    affine_t<F> r;
    r.x = l.sqr() - p.x - q.x;
    r.y = l * (p.x - r.x) - p.y;
    return r;
}

// Global loads and stores of points and Fq values as 16-byte words: a struct of 32-bit limbs is
// otherwise moved as 24 (a point) or 12 separate words, and each warp-wide word touches 32
// sectors a point apart. Every slot is 16-byte aligned (48- and 96-byte strides from an
// allocation's start).
template <class T>
CURVE_FN T load16(const T* p) {
#if defined(__CUDA_ARCH__)
    static_assert(sizeof(T) % 16 == 0, "16-byte slots");
    T r;
    uint32_t* w = reinterpret_cast<uint32_t*>(&r);
    const uint4* s = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 16); i++) {
        uint4 v = s[i];
        w[4 * i] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
    }
    return r;
#else
    return *p;
#endif
}

template <class T>
CURVE_FN void store16(T* p, const T& v) {
#if defined(__CUDA_ARCH__)
    static_assert(sizeof(T) % 16 == 0, "16-byte slots");
    const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
    uint4* d = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 16); i++)
        d[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
#else
    *p = v;
#endif
}

// Round 0's points: the sorted digits' bases (value: index | sign), as base_source loads them.
// x and y load apart too: the prefix pass needs x alone but for rare pairs (pair_kind_lazy).
template <class F>
struct table_points {
    const affine_t<F>* bases;
    const uint32_t* vals;
    CURVE_FN affine_t<F> load(int64_t i) const {
        uint32_t v = vals[i];
        affine_t<F> p = load16(bases + (v & ~MSM_NEG_BIT));
        if (v & MSM_NEG_BIT) p = -p;
        return p;
    }
    CURVE_FN F load_x(int64_t i) const { return load16(&bases[vals[i] & ~MSM_NEG_BIT].x); }
    CURVE_FN F load_y(int64_t i) const {
        uint32_t v = vals[i];
        F y = load16(&bases[v & ~MSM_NEG_BIT].y);
        return (v & MSM_NEG_BIT) ? -y : y;
    }
};

// Later rounds: the previous round's sums.
template <class F>
struct array_points {
    const affine_t<F>* pts;
    CURVE_FN affine_t<F> load(int64_t i) const { return load16(pts + i); }
    CURVE_FN F load_x(int64_t i) const { return load16(&pts[i].x); }
    CURVE_FN F load_y(int64_t i) const { return load16(&pts[i].y); }
};

// ---- layout (one thread an item or a bucket) ------------------------------------------------

// Round 0's runs from the sorted keys: start[k] = first index, end[k] = one past the last
// (both zeroed first: a bucket without digits keeps 0, 0).
CURVE_FN void run_bounds(int64_t i, int64_t M, const uint32_t* keys, uint32_t* start,
                         uint32_t* end) {
    uint32_t k = keys[i];
    if (i == 0 || keys[i - 1] != k) start[k] = (uint32_t)i;
    if (i + 1 == M || keys[i + 1] != k) end[k] = (uint32_t)(i + 1);
}

// A round's run lengths: ceil(c / 2) for the buckets of the slice [lo, hi), 0 for the others
// (a slice is a range of keys: the dense engine sums a chunk's windows a few at a time, so
// that the rounds' buffers hold a slice's points, not the chunk's).
CURVE_FN void run_halve(int64_t b, int64_t lo, int64_t hi, const uint32_t* cnt_in,
                        uint32_t* cnt_out) {
    cnt_out[b] = (b >= lo && b < hi) ? (cnt_in[b] + 1) >> 1 : 0;
}

// The sorted items of the slice [lo, hi): range[0] = the first i < M with keys[i] >= lo,
// range[1] = the first with keys[i] >= hi (M when none). Why: round 0's layout otherwise runs
// one thread an item of the whole sorted list for every slice (the dense engine's chunk holds
// 13 windows, a slice 5), where the keys ascend and a slice's items are one stretch of it.
CURVE_FN int64_t first_key_at_least(int64_t M, const uint32_t* keys, uint32_t key) {
    int64_t a = 0, b = M;  // keys[a - 1] < key <= keys[b]
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (keys[m] < key) a = m + 1;
        else b = m;
    }
    return a;
}

CURVE_FN void slice_items(int64_t M, const uint32_t* keys, int64_t lo, int64_t hi,
                          unsigned long long* range) {
    range[0] = (unsigned long long)first_key_at_least(M, keys, (uint32_t)lo);
    range[1] = (unsigned long long)first_key_at_least(M, keys, (uint32_t)hi);
}

// The pair slot of item i when it is its pair's first (even offset in its bucket's run) and
// its bucket is in the slice [lo, hi).
CURVE_FN void pair_layout(int64_t i, int64_t lo, int64_t hi, const uint32_t* keys_in,
                          const uint32_t* start_in, const uint32_t* cnt_in,
                          const uint32_t* start_out, uint32_t* src, uint32_t* keys_out) {
    uint32_t b = keys_in[i];
    if ((int64_t)b < lo || (int64_t)b >= hi) return;
    uint32_t r = (uint32_t)i - start_in[b];
    if (r & 1) return;
    uint32_t j = start_out[b] + (r >> 1);
    src[j] = (uint32_t)i | (r + 1 < cnt_in[b] ? AFFINE_PARTNER : 0u);
    keys_out[j] = b;
}

// ---- the batched inversion ------------------------------------------------------------------

// Items j = t + k T (k < K, j < n) of thread t: the last k of them, -1 when none.
CURVE_FN int64_t batch_last(int64_t t, int64_t n, int64_t T, int K) {
    if (t >= n) return -1;
    int64_t k = (n - 1 - t) / T;
    return k < K - 1 ? k : K - 1;
}

// pre[j] = v[t] v[t + T] ... v[j] over thread t's items; tot[t] = all of them (1 when none).
template <class F>
CURVE_FN void batch_prefix(int64_t t, int64_t n, int64_t T, int K, const F* v, F* pre, F* tot) {
    F acc = F::one();
    int64_t last = batch_last(t, n, T, K);
    for (int64_t k = 0; k <= last; k++) {
        int64_t j = t + k * T;
        acc = acc * load16(v + j);
        store16(pre + j, acc);
    }
    store16(tot + t, acc);
}

// v[j] = 1 / v[j] for thread t's items, given itot[t] = 1 / tot[t].
template <class F>
CURVE_FN void batch_back(int64_t t, int64_t n, int64_t T, int K, F* v, const F* pre,
                         const F* itot) {
    int64_t last = batch_last(t, n, T, K);
    if (last < 0) return;
    F inv = load16(itot + t);
    for (int64_t k = last; k >= 0; k--) {
        int64_t j = t + k * T;
        F vj = load16(v + j);
        store16(v + j, k ? inv * load16(pre + j - T) : inv);
        inv = inv * vj;
    }
}

// ---- one inversion by the binary extended Euclid ------------------------------------------

// Why not F::inv (Fermat, x^(p-2)): that is ~570 dependent products, ~0.4 ms on one GPU thread,
// paid once a round while the rest of the chip waits (6.2 of the 68.5 ms of G1 2^24's affine
// accumulation). The binary algorithm's steps are shifts and subtractions of 12 words.
namespace binv {
template <int N>
CURVE_FN bool is_one(const uint32_t* x) {
    uint32_t acc = x[0] ^ 1u;
    for (int i = 1; i < N; i++) acc |= x[i];
    return acc == 0;
}
template <int N>
CURVE_FN void shr1(uint32_t* x) {
    for (int i = 0; i < N - 1; i++) x[i] = (x[i] >> 1) | (x[i + 1] << 31);
    x[N - 1] >>= 1;
}
// x / 2 mod p for x < p: (x + p) / 2 when x is odd (x + p < 2^(32N): p < 2^(32N - 1))
template <class P, int N>
CURVE_FN void half_mod(uint32_t* x) {
    if (x[0] & 1) {
        uint64_t c = 0;
        for (int i = 0; i < N; i++) {
            uint64_t s = (uint64_t)x[i] + P::mod(i) + c;
            x[i] = (uint32_t)s;
            c = s >> 32;
        }
    }
    shr1<N>(x);
}
template <int N>
CURVE_FN bool geq(const uint32_t* a, const uint32_t* b) {
    for (int i = N - 1; i >= 0; i--)
        if (a[i] != b[i]) return a[i] > b[i];
    return true;
}
template <int N>
CURVE_FN uint32_t sub(uint32_t* a, const uint32_t* b) {  // a -= b, the borrow out
    uint64_t br = 0;
    for (int i = 0; i < N; i++) {
        uint64_t d = (uint64_t)a[i] - b[i] - br;
        a[i] = (uint32_t)d;
        br = (d >> 32) & 1;
    }
    return (uint32_t)br;
}
template <class P, int N>
CURVE_FN void sub_mod(uint32_t* a, const uint32_t* b) {  // a = a - b mod p (a, b < p)
    if (sub<N>(a, b)) {
        uint64_t c = 0;
        for (int i = 0; i < N; i++) {
            uint64_t s = (uint64_t)a[i] + P::mod(i) + c;
            a[i] = (uint32_t)s;
            c = s >> 32;
        }
    }
}
}  // namespace binv

// 1 / a in Montgomery form (0 for 0): the binary algorithm inverts the stored integer aR, giving
// a^-1 R^-1; one Montgomery product with R^3 (R^2 * R^2 in Montgomery form) makes it a^-1 R.
template <class P>
CURVE_FN ff<P> inv_binary(const ff<P>& a) {
    constexpr int N = P::N;
    if (a.is_zero()) return ff<P>::zero();
    uint32_t u[N], v[N], x1[N], x2[N];
    for (int i = 0; i < N; i++) {
        u[i] = a.v[i];
        v[i] = P::mod(i);
        x1[i] = 0;
        x2[i] = 0;
    }
    x1[0] = 1;
    // invariants: x1 a = u, x2 a = v (mod p); gcd(u, v) = 1
    while (!binv::is_one<N>(u) && !binv::is_one<N>(v)) {
        while (!(u[0] & 1)) {
            binv::shr1<N>(u);
            binv::half_mod<P, N>(x1);
        }
        while (!(v[0] & 1)) {
            binv::shr1<N>(v);
            binv::half_mod<P, N>(x2);
        }
        if (binv::geq<N>(u, v)) {
            binv::sub<N>(u, v);
            binv::sub_mod<P, N>(x1, x2);
        } else {
            binv::sub<N>(v, u);
            binv::sub_mod<P, N>(x2, x1);
        }
    }
    ff<P> r = ff<P>::from_limbs(binv::is_one<N>(u) ? x1 : x2);
    return r * (ff<P>::r2() * ff<P>::r2());
}

// The top's inversion: the binary algorithm for a prime field (ff) and for Fq2's norm,
// 1 / (c0 + c1 u) = (c0 - c1 u) / (c0^2 + c1^2) (fq2_t::inv's formula; its Fermat inversion of
// the norm is ~570 dependent products, paid once a step by the 1s' chains below).
template <class F>
CURVE_FN F inv_top(const F& a) { return a.inv(); }
template <class P>
CURVE_FN ff<P> inv_top(const ff<P>& a) { return inv_binary<P>(a); }
CURVE_FN fq2_t inv_top(const fq2_t& a) {
    fq_t t = inv_top(a.c0.sqr() + a.c1.sqr());
    return fq2_t::make(a.c0 * t, -(a.c1 * t));
}

// v[0..n) inverted in place by one thread (pre: n scratch elements): the top of the levels.
template <class F>
CURVE_FN void batch_top(int64_t n, F* v, F* pre) {
    F acc = F::one();
    for (int64_t j = 0; j < n; j++) {
        pre[j] = acc;
        acc = acc * v[j];
    }
    F inv = inv_top(acc);
    for (int64_t j = n - 1; j >= 0; j--) {
        F vj = v[j];
        v[j] = inv * pre[j];
        inv = inv * vj;
    }
}

// ---- the inversion's top levels in one thread block (ZKHIVE_MSM_INV_BLOCK) ---------------

// Why: above the round's first level the inversion is latency, not work: each level is a
// chain of LEVEL_WIDTH dependent products up and again down, a launch each way, and the top's
// one thread walks TOP values each way around its inversion: ~176 dependent products and nine
// launches for a round of 2^26 pairs. One block of BT threads takes the last <= BT x W values
// instead: each thread a chain of W (batch_prefix with T = BT), a product tree over the BT
// thread products (log2 BT levels), the root inverted, the tree walked down, the chains back:
// 2 W + 2 log2 BT dependent products and one launch. tree[1 .. 2 BT) is a heap: node i's
// children 2i and 2i + 1, thread t's product at BT + t.

// node i = the product of its children (the way up)
template <class F>
CURVE_FN void tree_up(int64_t i, F* tree) {
    store16(tree + i, load16(tree + 2 * i) * load16(tree + 2 * i + 1));
}

// node i holds 1 / (its subtree's product): each child gets 1 / its own (the way down)
template <class F>
CURVE_FN void tree_down(int64_t i, F* tree) {
    F inv = load16(tree + i), l = load16(tree + 2 * i), r = load16(tree + 2 * i + 1);
    store16(tree + 2 * i, inv * r);
    store16(tree + 2 * i + 1, inv * l);
}

#if defined(__CUDACC__)
// The block's leaves tree[BT + t] (each thread's product, written before the call) become
// their inverses: the tree up, the root by inv_top on thread 0, back down. Every thread of the
// block calls it; each level's writes are visible to the next through the barriers (shared or
// global memory alike). fq_batch_block and ones_affine.cu's steps.
template <class F>
__device__ void block_tree_invert(int64_t t, int64_t BT, F* tree) {
    __syncthreads();
    for (int64_t h = BT / 2; h >= 1; h >>= 1) {
        if (t < h) tree_up<F>(h + t, tree);
        __syncthreads();
    }
    if (t == 0) store16(tree + 1, inv_top(load16(tree + 1)));
    __syncthreads();
    for (int64_t h = 1; h < BT; h <<= 1) {
        if (t < h) tree_down<F>(h + t, tree);
        __syncthreads();
    }
}
#endif

// ---- one round's pairs ----------------------------------------------------------------------

// Round pair j's two points and what they make.
template <class F, class Src>
CURVE_FN int pair_load(int64_t j, const uint32_t* src, const Src& pts, affine_t<F>& p,
                       affine_t<F>& q) {
    uint32_t e = src[j];
    int64_t i = e & ~AFFINE_PARTNER;
    bool has_q = (e & AFFINE_PARTNER) != 0;
    p = pts.load(i);
    q = has_q ? pts.load(i + 1) : affine_t<F>::identity();
    return pair_kind<F>(p, q, has_q);
}

// pair_kind and pair_den of p = ps[ip] and q = qs[iq] (has_q: q exists) from the x
// coordinates, y read only where x cannot decide: x = 0 (the identity's encoding, or one of the
// points (0, +-2)) and equal x (a doubling or a zero sum). The same answers as pair_kind on the
// whole points, for two thirds of the reads (x is the first 48 bytes of a 96-byte point: two of
// its three 32-byte sectors).
template <class F, class SP, class SQ>
CURVE_FN int pair_kind_lazy_at(const SP& ps, int64_t ip, const SQ& qs, int64_t iq, bool has_q,
                               F& den) {
    den = F::one();
    if (!has_q) return PAIR_P;
    F xp = ps.load_x(ip), xq = qs.load_x(iq);
    if (xq.is_zero() && qs.load_y(iq).is_zero()) return PAIR_P;
    if (xp.is_zero() && ps.load_y(ip).is_zero()) return PAIR_Q;
    if (xp == xq) {
        F yp = ps.load_y(ip);
        if (yp == qs.load_y(iq) && !yp.is_zero()) {
            den = yp.dbl();
            return PAIR_DBL;
        }
        return PAIR_ZERO;
    }
    den = xq - xp;
    return PAIR_ADD;
}

// The same for round pair j: its slot's items i and i + 1 of one source.
template <class F, class Src>
CURVE_FN int pair_kind_lazy(int64_t j, const uint32_t* src, const Src& pts, F& den) {
    uint32_t e = src[j];
    int64_t i = e & ~AFFINE_PARTNER;
    return pair_kind_lazy_at<F>(pts, i, pts, i + 1, (e & AFFINE_PARTNER) != 0, den);
}

// batch_prefix over the round's pair denominators (the pairs j < M).
template <class F, class Src>
CURVE_FN void pair_prefix(int64_t t, int64_t M, int64_t T, int K, const uint32_t* src,
                          const Src& pts, F* pre, F* tot) {
    F acc = F::one();
    int64_t last = batch_last(t, M, T, K);
    for (int64_t k = 0; k <= last; k++) {
        int64_t j = t + k * T;
        F den;
        if (pair_kind_lazy<F>(j, src, pts, den) >= PAIR_ADD) acc = acc * den;
        store16(pre + j, acc);
    }
    store16(tot + t, acc);
}

// The chord's sum a coordinate at a time, given 1/(x_Q - x_P): x's read first (the caller's
// denominator came from them), y's after, y_P read again for y3 rather than held (ones_apply
// says why).
template <class F, class SP, class SQ>
CURVE_FN affine_t<F> chord_lean(const SP& ps, int64_t ip, const SQ& qs, int64_t iq,
                                const F& dinv) {
    F xp = ps.load_x(ip), xq = qs.load_x(iq);
    F l = (qs.load_y(iq) - ps.load_y(ip)) * dinv;
    affine_t<F> r;
    r.x = l.sqr() - xp - xq;
    r.y = l * (xp - r.x) - ps.load_y(ip);
    return r;
}

// batch_back fused with the additions: out[j] = the pair's sum. (Loading the next pair's points
// before this pair's products, as the XYZZ accumulation's prefetch does, measured slower on the
// H200: 93.7 against 89.8 ms at G1 2^24, its 48 more registers costing more occupancy than
// the hidden latency gained.) Lean: the kind and denominator from the x's (as pair_prefix found
// them) and the chord a coordinate at a time (chord_lean); the rare kinds load the points whole.
template <class F, bool Lean = false, class Src>
CURVE_FN void pair_apply(int64_t t, int64_t M, int64_t T, int K, const uint32_t* src,
                         const Src& pts, const F* pre, const F* itot, affine_t<F>* out) {
    int64_t last = batch_last(t, M, T, K);
    if (last < 0) return;
    F inv = load16(itot + t);
    for (int64_t k = last; k >= 0; k--) {
        int64_t j = t + k * T;
        uint32_t e = src[j];
        int64_t i = e & ~AFFINE_PARTNER;
        bool has_q = (e & AFFINE_PARTNER) != 0;
        affine_t<F> p, q;
        F den;
        int kind = Lean ? pair_kind_lazy_at<F>(pts, i, pts, i + 1, has_q, den)
                        : pair_load<F>(j, src, pts, p, q);
        F dinv = F::one();
        if (kind >= PAIR_ADD) {
            dinv = k ? inv * load16(pre + j - T) : inv;
            inv = inv * (Lean ? den : pair_den<F>(p, q, kind));
        }
        if (Lean && kind == PAIR_ADD) {
            store16(out + j, chord_lean<F>(pts, i, pts, i + 1, dinv));
            continue;
        }
        if (Lean) {  // rare: the points whole
            p = pts.load(i);
            q = has_q ? pts.load(i + 1) : affine_t<F>::identity();
        }
        store16(out + j, pair_sum<F>(p, q, kind, dinv));
    }
}

// After the rounds, in the dense engine: bucket b's remaining points added into its running
// sum (buckets: the MSM's, kept across chunks), where bucket_final and msm_merge's full
// addition would first write the chunk's sum and then read it back beside the running one:
// a mixed addition a point (10 products; 2-4 points after the rounds) against 10 a point
// after the first plus the merge's 14, and one read and one write of a bucket against four.
template <class F>
CURVE_FN void bucket_final_into(int64_t b, const uint32_t* start, const uint32_t* cnt,
                                const affine_t<F>* pts, xyzz_t<F>* buckets) {
    xyzz_t<F> acc = load16(buckets + b);
    int64_t s = start[b], e = s + cnt[b];
    for (int64_t i = s; i < e; i++) acc.add_affine(load16(pts + i));
    store16(buckets + b, acc);
}

// After the rounds: bucket b's remaining points summed in XYZZ (every bucket written).
template <class F>
CURVE_FN void bucket_final(int64_t b, const uint32_t* start, const uint32_t* cnt,
                           const affine_t<F>* pts, xyzz_t<F>* buckets) {
    xyzz_t<F> acc = xyzz_t<F>::identity();
    int64_t s = start[b], e = s + cnt[b];
    for (int64_t i = s; i < e; i++) acc.add_affine(load16(pts + i));
    store16(buckets + b, acc);
}

// ---- a long sum by chains of affine additions (the split MSM's 1s) -------------------------

// Why: the 1s of a 32 GiB partition's witness (61.5 M of each 130 M query) are summed into one
// point; the mixed addition into an XYZZ sum costs 10 Fq products a point (G2: 28), the affine
// addition 3 (G2: 8) and its share of a batched inversion 3 (G2: 9). The rounds above suit
// many short runs; one long run gives them thousands of launches. Here one kernel holds An
// affine accumulators, a = (blk W + w) BT + t (block blk of BT threads, W chains a thread),
// and in step s accumulator a adds point s An + a (ones_point: a warp's reads consecutive). A
// step's BT W additions of a block share one inversion: thread t's chain of W denominators
// (prefix), the product tree over the block's BT threads, the root by the binary algorithm,
// back down, the chain walked back (apply): the shape of fq_batch_block, once a step. What is
// left (An points) is summed in XYZZ by the split's own kernels. The sum's order is irrelevant.

CURVE_FN int64_t ones_acc(int64_t blk, int64_t t, int w, int64_t BT, int W) {
    return (blk * W + w) * BT + t;
}

// The point accumulator a adds at step s >= 1, or -1 past the M points.
CURVE_FN int64_t ones_point(int64_t a, int64_t An, int64_t s, int64_t M) {
    int64_t k = s * An + a;
    return k < M ? k : -1;
}

// Step 0: accumulator a starts as point a (the identity past the M points).
template <class F, class Src>
CURVE_FN void ones_init(int64_t blk, int64_t t, int64_t BT, int W, int64_t M, const Src& pts,
                        affine_t<F>* accs) {
    for (int w = 0; w < W; w++) {
        int64_t a = ones_acc(blk, t, w, BT, W);
        store16(accs + a, a < M ? pts.load(a) : affine_t<F>::identity());
    }
}

// Step s's chain of thread t: each accumulator's denominator with its point (ones_point), the
// running product into pre[a]; returns the thread's product (1 when nothing needs inverting).
template <class F, class Src>
CURVE_FN F ones_prefix(int64_t blk, int64_t t, int64_t BT, int W, int64_t An, int64_t s,
                       int64_t M, const Src& pts, const affine_t<F>* accs, F* pre) {
    F acc = F::one();
    array_points<F> held{accs};
    for (int w = 0; w < W; w++) {
        int64_t a = ones_acc(blk, t, w, BT, W), k = ones_point(a, An, s, M);
        F den;
        if (pair_kind_lazy_at<F>(held, a, pts, k, k >= 0, den) >= PAIR_ADD) acc = acc * den;
        store16(pre + a, acc);
    }
    return acc;
}

// Step s's additions, given itot = 1 / (the thread's product): the chain walked back, each
// denominator's inverse from the running inverse and the prefix before it (batch_back).
//
// Lean: the chord (all but a few additions) read and computed a coordinate at a time
// (chord_lean), x's first (the denominator, the running inverse's product: then x_Q - x_P and
// the prefix are dead), y's after (l: then y_Q and 1/d are dead), so that no more than x_P,
// x_Q, y_P, l, the running inverse and one product's temporaries are live at once. Loading
// both points whole first holds 4 coordinates, the inverse, 1/d and the denominator together:
// G2's kernel at 254 registers, two blocks an SM (Nsight Compute: the multiply-add pipe 54%
// busy). The rare kinds (an identity, a doubling, a zero sum) load the points whole, as
// pair_kind_lazy_at decided them in ones_prefix.
template <class F, bool Lean = false, class Src>
CURVE_FN void ones_apply(int64_t blk, int64_t t, int64_t BT, int W, int64_t An, int64_t s,
                         int64_t M, const Src& pts, const F& itot, const F* pre,
                         affine_t<F>* accs) {
    F inv = itot;
    array_points<F> held{accs};
    for (int w = W - 1; w >= 0; w--) {
        int64_t a = ones_acc(blk, t, w, BT, W), k = ones_point(a, An, s, M);
        if (k < 0) continue;  // past the points: the accumulator stays
        affine_t<F> p, q;
        F den;
        int kind;
        if (Lean) {
            kind = pair_kind_lazy_at<F>(held, a, pts, k, true, den);
        } else {
            p = load16(accs + a), q = pts.load(k);
            kind = pair_kind<F>(p, q, true);
        }
        F dinv = F::one();
        if (kind >= PAIR_ADD) {
            dinv = w ? inv * load16(pre + a - BT) : inv;
            inv = inv * (Lean ? den : pair_den<F>(p, q, kind));
        }
        if (Lean && kind == PAIR_ADD) {
            store16(accs + a, chord_lean<F>(held, a, pts, k, dinv));
            continue;
        }
        if (Lean) p = held.load(a), q = pts.load(k);  // rare: the points whole
        store16(accs + a, pair_sum<F>(p, q, kind, dinv));
    }
}
