// Host build of the curve and MSM code (gpu/kernels/curve.cuh, msm_core.cuh): the CPU tests
// check the same per-thread bodies the CUDA kernels run, here in plain loops.
//
// Points cross this C ABI in the xy encoding (canonical little-endian x || y, 24 limbs for G1,
// 48 for G2, identity all zero); scalars as canonical Fr, 8 limbs each.
#include <stdint.h>
#include <string.h>
#include <vector>
#include "curve_io.cuh"
#include "msm_core.cuh"
#include "msm_merge.cuh"
#include "msm_affine.cuh"

// msm()'s flags (gpu/native/curve.py): level 1 by the lean bodies; the affine rounds' slices
// over their own stretch and buckets; the dense chunks' affine tail added into the running
// buckets
#define MSM_HOST_LEAN 1
#define MSM_HOST_SLICE_RANGE 2
#define MSM_HOST_FINAL_INTO 4
// the inversion's top in one block (its threads' log2 in bits 8-15 of the flags, its chains'
// limit in bits 16-30)
#define MSM_HOST_INV_BLOCK 8
// the rounds' apply in its lean form (pair_apply<F, true>: the device's ZKHIVE_MSM_APPLY_KERNEL forms)
#define MSM_HOST_APPLY_LEAN 16

typedef int64_t i64;

namespace {

template <class F>
i64 load_bases(i64 n, const uint32_t* raw, std::vector<affine_t<F>>& out) {
    const int S = 2 * coord_limbs<F>::N;
    const F b = curve_b((const F*)0);
    out.resize(n);
    i64 bad = -1;
#pragma omp parallel for schedule(static) if (n >= 1024)
    for (i64 i = 0; i < n; i++) {
        bool ok = coords_reduced<F>(raw + S * i);
        if (ok) {
            out[i] = load_affine<F>(raw + S * i);
            ok = out[i].on_curve(b);
        }
        if (!ok) {
#pragma omp critical
            if (bad < 0 || i < bad) bad = i;
        }
    }
    return bad;
}

// The device's block_tree_invert, its barriers between the loops: the leaves tree[BT + t]
// become their inverses (the tree up, the root, back down).
template <class F>
void block_tree_invert(std::vector<F>& tree, i64 BT) {
    for (i64 h = BT / 2; h >= 1; h >>= 1)
        for (i64 t = 0; t < h; t++) tree_up<F>(h + t, tree.data());
    tree[1] = inv_top(tree[1]);
    for (i64 h = 1; h < BT; h <<= 1)
        for (i64 t = 0; t < h; t++) tree_down<F>(h + t, tree.data());
}

// The inversion's top in one thread block of BT threads (the device's fq_batch_block): chains
// of W, the block's tree, back along the chains.
template <class F>
void batch_invert_block(std::vector<F>& v, i64 n, i64 BT) {
    i64 W = n / BT + (n % BT != 0);
    if (W < 1) W = 1;
    std::vector<F> pre(n > 0 ? n : 1), tree(2 * BT);
    for (i64 t = 0; t < BT; t++) batch_prefix<F>(t, n, BT, (int)W, v.data(), pre.data(), tree.data() + BT);
    block_tree_invert<F>(tree, BT);
    for (i64 t = 0; t < BT; t++) batch_back<F>(t, n, BT, (int)W, v.data(), pre.data(), tree.data() + BT);
}

// v[0..n) inverted in place as gpu/cuda/affine_acc.py does it: levels of K2 items a thread
// until at most `top` values are left for one thread (batch_top), or with block_log > 0 until
// at most 2^block_log x block_w are left for one block (batch_invert_block).
template <class F>
void batch_invert(std::vector<F>& v, i64 n, int K2, i64 top, int block_log, i64 block_w) {
    if (block_log > 0 && n <= ((i64)1 << block_log) * block_w) {
        batch_invert_block<F>(v, n, (i64)1 << block_log);
        return;
    }
    if (block_log == 0 && n <= top) {
        std::vector<F> pre(n > 0 ? n : 1);
        batch_top<F>(n, v.data(), pre.data());
        return;
    }
    i64 T = n / K2 + (n % K2 != 0);
    std::vector<F> pre(n), tot(T);
    for (i64 t = 0; t < T; t++) batch_prefix<F>(t, n, T, K2, v.data(), pre.data(), tot.data());
    batch_invert<F>(tot, T, K2, top, block_log, block_w);
    for (i64 t = 0; t < T; t++) batch_back<F>(t, n, T, K2, v.data(), pre.data(), tot.data());
}

// Step 3 by rounds of batched affine additions (msm_affine.cuh), the device driver's steps
// (gpu/cuda/affine_acc.py) in loops: K pairs a thread, K2 values a thread at the inversion's
// levels, the nb buckets in slices of `slice` keys (the dense engine's windows a few at a time).
// Writes every one of the nb buckets, or with `into` adds each sum to what the bucket holds
// (bucket_final_into: the dense engine's running buckets). ranged: each slice's round 0 over
// its own stretch of the sorted items (slice_items) and every round's halving and scan over
// the slice's buckets alone (ZKHIVE_MSM_AFFINE_SLICE_RANGE); the lengths and starts outside the
// slice then hold stale words, as the device's reused buffers do, so a read of one shows.
template <class F>
void affine_buckets(i64 M, const uint32_t* keys, const uint32_t* vals,
                    const affine_t<F>* bases, i64 nb, int rounds, int K, int K2, i64 slice,
                    bool ranged, bool into, int flags, std::vector<xyzz_t<F>>& buckets) {
    const int block_log = (flags & MSM_HOST_INV_BLOCK) ? (flags >> 8) & 0xff : 0;
    const i64 block_w = (flags >> 16) & 0x7fff;
    std::vector<uint32_t> start0(nb, 0), cnt0(nb, 0);
    for (i64 i = 0; i < M; i++) run_bounds(i, M, keys, start0.data(), cnt0.data());
    for (i64 b = 0; b < nb; b++) cnt0[b] -= start0[b];
    const uint32_t stale = ranged ? 0x5a5a5a5au : 0u;
    for (i64 lo = 0; lo < nb; lo += slice) {
        i64 hi = lo + slice < nb ? lo + slice : nb;
        std::vector<uint32_t> start = start0, cnt = cnt0, start_out(nb, stale), cnt_out(nb, stale);
        std::vector<uint32_t> key_in(keys, keys + M), key_out, src;
        std::vector<affine_t<F>> pts, out;
        unsigned long long range[2] = {0, (unsigned long long)M};
        if (ranged) slice_items(M, keys, lo, hi, range);
        i64 Min = M;
        for (int r = 0; r < rounds; r++) {
            i64 Mout = 0;
            if (ranged) {  // the device's launch over the slice's buckets, pointers moved to lo
                for (i64 b = 0; b < hi - lo; b++) {
                    run_halve(b, 0, hi - lo, cnt.data() + lo, cnt_out.data() + lo);
                    start_out[lo + b] = (uint32_t)Mout;
                    Mout += cnt_out[lo + b];
                }
            } else {
                for (i64 b = 0; b < nb; b++) {
                    run_halve(b, lo, hi, cnt.data(), cnt_out.data());
                    start_out[b] = (uint32_t)Mout;
                    Mout += cnt_out[b];
                }
            }
            src.assign(Mout, 0);
            key_out.assign(Mout, 0);
            i64 first = ranged && r == 0 ? (i64)range[0] : 0;
            i64 end = ranged && r == 0 ? (i64)range[1] : Min;
            for (i64 i = first; i < end; i++)
                pair_layout(i, lo, hi, key_in.data(), start.data(), cnt.data(), start_out.data(),
                            src.data(), key_out.data());
            i64 T = Mout / K + (Mout % K != 0);
            std::vector<F> pre(Mout), tot(T);
            out.assign(Mout, affine_t<F>::identity());
            table_points<F> tp{bases, vals};
            array_points<F> ap{pts.data()};
            for (i64 t = 0; t < T; t++) {
                if (r == 0) pair_prefix<F>(t, Mout, T, K, src.data(), tp, pre.data(), tot.data());
                else pair_prefix<F>(t, Mout, T, K, src.data(), ap, pre.data(), tot.data());
            }
            batch_invert<F>(tot, T, K2, 64, block_log, block_w);
            const bool lean_apply = (flags & MSM_HOST_APPLY_LEAN) != 0;
            for (i64 t = 0; t < T; t++) {
                if (lean_apply && r == 0)
                    pair_apply<F, true>(t, Mout, T, K, src.data(), tp, pre.data(), tot.data(), out.data());
                else if (lean_apply)
                    pair_apply<F, true>(t, Mout, T, K, src.data(), ap, pre.data(), tot.data(), out.data());
                else if (r == 0)
                    pair_apply<F>(t, Mout, T, K, src.data(), tp, pre.data(), tot.data(), out.data());
                else
                    pair_apply<F>(t, Mout, T, K, src.data(), ap, pre.data(), tot.data(), out.data());
            }
            pts.swap(out);
            key_in.swap(key_out);
            start.swap(start_out);
            cnt.swap(cnt_out);
            Min = Mout;
        }
        for (i64 b = lo; b < hi; b++) {
            if (into) bucket_final_into<F>(b, start.data(), cnt.data(), pts.data(), buckets.data());
            else bucket_final<F>(b, start.data(), cnt.data(), pts.data(), buckets.data());
        }
    }
}

// The whole MSM through the msm_core steps. T1: level-1 ranges; L2: partials per range at
// later levels (>= 4, so each level shrinks); G: buckets per reduction segment. chunk > 0: the
// device's chunked dense MSM (gpu/cuda/msm.py DenseEngine): the scalars sorted a chunk at a
// time, each chunk's buckets merged into running buckets zeroed first (msm_merge.cuh), one
// window reduction over those without the counts (every bucket holds a point, maybe the identity).
template <class F>
void accumulate_chunk(i64 lo, i64 n, const std::vector<affine_t<F>>& bases,
                      const uint32_t* scalars, int c, i64 T1, i64 L2,
                      std::vector<xyzz_t<F>>& buckets, std::vector<uint32_t>& counts,
                      int affine, int slice, int flags) {
    const bool lean = flags & MSM_HOST_LEAN;
    typedef xyzz_t<F> P;
    const int W = msm_windows(c);
    const i64 B = (i64)1 << (c - 1);
    // 1-2: digits, counting sort
    counts.assign(W * B, 0);
    std::vector<uint32_t> cursor(W * B);
    for (i64 i = 0; i < n; i++) {
        digit_iter it(scalars + 8 * i, c);
        for (int w = 0; w < W; w++) {
            bool neg;
            uint32_t d = it.next(&neg);
            if (d) counts[w * B + d - 1]++;
        }
    }
    i64 M = 0;
    for (i64 k = 0; k < W * B; k++) { cursor[k] = (uint32_t)M; M += counts[k]; }
    std::vector<uint32_t> keys(M), vals(M);
    for (i64 i = 0; i < n; i++) {
        digit_iter it(scalars + 8 * i, c);
        for (int w = 0; w < W; w++) {
            bool neg;
            uint32_t d = it.next(&neg);
            if (!d) continue;
            uint32_t key = (uint32_t)(w * B + d - 1), pos = cursor[key]++;
            keys[pos] = key;
            vals[pos] = (uint32_t)i | (neg ? MSM_NEG_BIT : 0);
        }
    }
    // 3: bucket accumulation, levels until one range holds everything (affine > 0: that many
    // rounds of batched affine additions; affine packs the rounds, K and K2: r | K << 8 |
    // K2 << 20; slice > 0: the windows a slice of the buckets holds)
    if (affine > 0) {
        affine_buckets<F>(M, keys.data(), vals.data(), bases.data() + lo, W * B, affine & 0xff,
                          (affine >> 8) & 0xfff, affine >> 20, slice > 0 ? slice * B : W * B,
                          (flags & MSM_HOST_SLICE_RANGE) != 0, (flags & MSM_HOST_FINAL_INTO) != 0,
                          flags, buckets);
        return;
    }
    std::vector<P> parts(2 * T1), next;
    std::vector<uint32_t> part_keys(2 * T1), next_keys;
    i64 L = M / T1 + (M % T1 != 0);
    if (L < 1) L = 1;
    base_source<F> src{bases.data() + lo, vals.data()};
    base_source_lean<F> lean_src{bases.data() + lo, vals.data()};
#pragma omp parallel for schedule(dynamic, 1)
    for (i64 t = 0; t < T1; t++) {
        if (lean)  // the device's g2_accumulate_bases_lean (ZKHIVE_MSM_G2_LEAN)
            accumulate_range_lean<F>(t, L, M, keys.data(), lean_src, buckets.data(),
                                     part_keys.data(), parts.data());
        else
            accumulate_range<F>(t, L, M, keys.data(), src, buckets.data(), part_keys.data(),
                                parts.data());
    }
    for (i64 T = T1; T > 1;) {
        i64 Mp = 2 * T, Tn = Mp / L2 + (Mp % L2 != 0);
        next.assign(2 * Tn, P::identity());
        next_keys.assign(2 * Tn, 0);
        part_source<F> ps{parts.data()};
#pragma omp parallel for schedule(dynamic, 1)
        for (i64 t = 0; t < Tn; t++)
            accumulate_range<F>(t, L2, Mp, part_keys.data(), ps, buckets.data(),
                                next_keys.data(), next.data());
        parts.swap(next);
        part_keys.swap(next_keys);
        T = Tn;
    }
}

template <class F>
i64 msm(i64 n, const uint32_t* raw_bases, const uint32_t* scalars, int c, i64 T1, i64 L2,
        i64 G, i64 G2, i64 chunk, int affine, int slice, int flags, uint32_t* out) {
    typedef xyzz_t<F> P;
    std::vector<affine_t<F>> bases;
    i64 bad = load_bases<F>(n, raw_bases, bases);
    if (bad >= 0) return bad;
    const int W = msm_windows(c);
    const i64 B = (i64)1 << (c - 1);
    std::vector<P> buckets(W * B, P::identity());
    std::vector<uint32_t> counts;
    if (chunk <= 0) {
        accumulate_chunk<F>(0, n, bases, scalars, c, T1, L2, buckets, counts, affine, slice,
                            flags & ~MSM_HOST_FINAL_INTO);
    } else if (affine > 0 && (flags & MSM_HOST_FINAL_INTO)) {
        // the dense engine's ZKHIVE_MSM_DENSE_FINAL_INTO: each chunk's affine tail adds into
        // the running buckets (zeroed: the identity), no merge
        for (i64 lo = 0; lo < n; lo += chunk)
            accumulate_chunk<F>(lo, n - lo < chunk ? n - lo : chunk, bases, scalars + 8 * lo, c,
                                T1, L2, buckets, counts, affine, slice, flags);
    } else {
        // the chunk's buckets hold stale sums where it wrote nothing: merge by its counts
        std::vector<P> mine(W * B, P::identity());
        for (i64 lo = 0; lo < n; lo += chunk) {
            accumulate_chunk<F>(lo, n - lo < chunk ? n - lo : chunk, bases, scalars + 8 * lo, c,
                                T1, L2, mine, counts, affine, slice, flags & ~MSM_HOST_FINAL_INTO);
            for (i64 k = 0; k < W * B; k++) merge_bucket<F>(k, counts.data(), mine.data(),
                                                            buckets.data());
        }
    }
    const uint32_t* cnt = chunk <= 0 ? counts.data() : nullptr;
    // 4: window reduction in segments of G buckets (their offsets left out, G T_j kept), the
    // offsets by the same reduction over the S segments in segments of G2 (gpu/cuda/msm.py
    // _reduce), both levels' parts of each window summed
    if (G > B) G = B;
    i64 S = B / G;
    if (G2 > S) G2 = S;
    i64 S2 = S > 1 ? S / G2 : 0, row = S + S2;
    std::vector<P> seg(W * row), runs(W * S);
    // stale bytes, as the device's buffer holds from the last MSM: every slot read is written
    memset((void*)runs.data(), 0x5a, sizeof(P) * runs.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (i64 k = 0; k < W * S; k++)
        seg[(k / S) * row + k % S] = reduce_segment<F>(
            (int)(k / S), k % S, B, G, buckets.data(), cnt,
            S > 1 ? first_run_out<F>(k, S, runs.data()) : nullptr);
    for (i64 k = 0; k < W * S2; k++)
        seg[(k / S2) * row + S + k % S2] = reduce_segment<F>((int)(k / S2), k % S2, S, G2,
                                                             runs.data(), nullptr);
    for (i64 len = row; len > 1;) {
        i64 g = len < 8 ? len : 8, q = len / g + (len % g != 0);
        std::vector<P> red(W * q);
        for (i64 r = 0; r < W; r++)
            for (i64 j = 0; j < q; j++) red[r * q + j] = sum_group<F>(r, j, len, g, seg.data());
        seg.swap(red);
        len = q;
    }
    // 5: combination
    store_affine<F>(combine_windows<F>(W, c, seg.data()).to_affine(), out);
    return -1;
}

// The split MSM's 1s by the device's affine chains (ones_affine.cu): G blocks of BT threads, W
// chains a thread, a block's steps each with fq_batch_block's tree, the blocks one after the
// other (they share nothing); then the G BT W accumulators summed in XYZZ. -1, or the first
// base that is not a reduced point on the curve.
template <class F>
i64 sum_ones_affine(i64 n, const uint32_t* raw, i64 M, const uint32_t* lists, i64 G, i64 BT,
                    int W, int lean, uint32_t* out) {
    std::vector<affine_t<F>> bases;
    i64 bad = load_bases<F>(n, raw, bases);
    if (bad >= 0) return bad;
    const i64 An = G * BT * W, S = M > An ? (M + An - 1) / An : 1;
    std::vector<affine_t<F>> accs(An);
    std::vector<F> pre(An), tree(2 * BT);
    const table_points<F> pts{bases.data(), lists};
    for (i64 blk = 0; blk < G; blk++) {
        for (i64 t = 0; t < BT; t++) ones_init<F>(blk, t, BT, W, M, pts, accs.data());
        for (i64 s = 1; s < S; s++) {
            for (i64 t = 0; t < BT; t++)
                tree[BT + t] = ones_prefix<F>(blk, t, BT, W, An, s, M, pts, accs.data(),
                                              pre.data());
            block_tree_invert<F>(tree, BT);
            for (i64 t = 0; t < BT; t++) {
                if (lean)
                    ones_apply<F, true>(blk, t, BT, W, An, s, M, pts, tree[BT + t], pre.data(),
                                        accs.data());
                else
                    ones_apply<F>(blk, t, BT, W, An, s, M, pts, tree[BT + t], pre.data(),
                                  accs.data());
            }
        }
    }
    xyzz_t<F> acc = xyzz_t<F>::identity();
    for (i64 a = 0; a < An; a++) acc.add_affine(accs[a]);
    store_affine<F>(acc.to_affine(), out);
    return -1;
}

template <class F>
int point_op(int op, const uint32_t* a_raw, const uint32_t* b_raw, uint32_t k, uint32_t* out) {
    typedef xyzz_t<F> P;
    affine_t<F> a = load_affine<F>(a_raw), b = load_affine<F>(b_raw);
    P r;
    switch (op) {
        case 0: r = P::from_affine(a); r.add_affine(b); break;              // a + b, mixed
        case 1: r = P::from_affine(a); r.add(P::from_affine(b)); break;     // a + b, full
        case 2: r = P::from_affine(a).dbl(); break;                          // 2a
        case 3: r = P::from_affine(a).dbl(); r.add_affine(b); break;         // 2a + b, Z != 1
        case 4: r = P::from_affine(a).dbl(); r.add(P::from_affine(b).dbl()); break;  // 2a + 2b
        case 5: r = P::from_affine(a).mul_small(k); break;                   // k a
        case 6: r = P::from_affine(-a); break;                               // -a
        case 7: return a.on_curve(curve_b((const F*)0)) ? 1 : 0;
        case 8: r = P::from_affine(a); r.add_affine_lean(b, false); break;  // a + b, lean
        case 9: r = P::from_affine(a).dbl(); r.add_affine_lean(b, false); break;  // 2a + b
        case 10: r = P::from_affine(a).dbl(); r.add_affine_lean(b, true); break;  // 2a - b
        default: return -1;
    }
    store_affine<F>(r.to_affine(), out);
    return 0;
}

// Step 5 for the device MSM: W window sums in the device's XYZZ layout (Montgomery limbs,
// X, Y, ZZ, ZZZ), Horner on the CPU, affine xy out. The chain of c doublings per window is
// serial; one GPU thread ran it at ~5 us a product (10 ms G1, 27 ms G2), the CPU takes well
// under a millisecond.
template <class F>
void combine(int W, int c, const uint32_t* win, uint32_t* out) {
    std::vector<xyzz_t<F>> w(W);
    memcpy(w.data(), win, sizeof(xyzz_t<F>) * W);
    store_affine<F>(combine_windows<F>(W, c, w.data()).to_affine(), out);
}

}  // namespace

extern "C" {

void g1_combine(int W, int c, const uint32_t* win, uint32_t* out) { combine<fq_t>(W, c, win, out); }
void g2_combine(int W, int c, const uint32_t* win, uint32_t* out) { combine<fq2_t>(W, c, win, out); }

int g1_point_op(int op, const uint32_t* a, const uint32_t* b, uint32_t k, uint32_t* out) {
    return point_op<fq_t>(op, a, b, k, out);
}
int g2_point_op(int op, const uint32_t* a, const uint32_t* b, uint32_t k, uint32_t* out) {
    return point_op<fq2_t>(op, a, b, k, out);
}
// Returns -1, or the index of the first base that is not a reduced point on the curve.
// G, G2: buckets a first-level segment of the window reduction, points a second-level one.
// chunk > 0: the chunked MSM with buckets shared by the chunks (the device's DenseEngine).
// affine > 0: step 3 by batched affine additions (rounds | K << 8 | K2 << 20), the buckets
// `slice` windows at a time (0: all at once). flags: MSM_HOST_* above.
i64 g1_msm(i64 n, const uint32_t* bases, const uint32_t* scalars, int c, i64 T1, i64 L2, i64 G,
           i64 G2, i64 chunk, int affine, int slice, int flags, uint32_t* out) {
    return msm<fq_t>(n, bases, scalars, c, T1, L2, G, G2, chunk, affine, slice, flags, out);
}
i64 g2_msm(i64 n, const uint32_t* bases, const uint32_t* scalars, int c, i64 T1, i64 L2, i64 G,
           i64 G2, i64 chunk, int affine, int slice, int flags, uint32_t* out) {
    return msm<fq2_t>(n, bases, scalars, c, T1, L2, G, G2, chunk, affine, slice, flags, out);
}
// sum of bases[lists[k]], k < M (n bases, xy limbs), by the device's affine chains (lean: the
// apply a coordinate at a time, ones_apply's Lean)
i64 g1_sum_ones_affine(i64 n, const uint32_t* bases, i64 M, const uint32_t* lists, i64 G, i64 BT,
                       int W, int lean, uint32_t* out) {
    return sum_ones_affine<fq_t>(n, bases, M, lists, G, BT, W, lean, out);
}
i64 g2_sum_ones_affine(i64 n, const uint32_t* bases, i64 M, const uint32_t* lists, i64 G, i64 BT,
                       int W, int lean, uint32_t* out) {
    return sum_ones_affine<fq2_t>(n, bases, M, lists, G, BT, W, lean, out);
}
// The signed digits of one scalar (tests): W values |d| | sign << 31.
void msm_digits(const uint32_t* scalar, int c, uint32_t* out) {
    digit_iter it(scalar, c);
    for (int w = 0; w < msm_windows(c); w++) {
        bool neg;
        uint32_t d = it.next(&neg);
        out[w] = d | (neg ? MSM_NEG_BIT : 0);
    }
}

}  // extern "C"
