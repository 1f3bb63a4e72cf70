// Pippenger's multi-scalar multiplication, the per-thread steps, for host and device.
//
// sum_i s_i P_i with s_i in Fr (canonical, 8 x 32-bit limbs) and P_i affine:
//  1. digits: each scalar is cut into W windows of c bits, as signed digits in
//     [-2^(c-1), 2^(c-1)] (a digit above 2^(c-1) becomes d - 2^c with a carry into the next
//     window), so a window needs B = 2^(c-1) buckets instead of 2^c - 1. Bucket key
//     w*B + |d| - 1; zero digits are dropped before the sort.
//  2. counting sort of (key, point index | sign << 31) by key (histogram, scan, scatter).
//  3. bucket accumulation over the sorted list cut into equal ranges, one per thread, so that
//     a skewed digit distribution (all-equal scalars, long runs of 0 and 1 in the PoRep
//     witness) costs the same as a uniform one: a run of one key that a range holds entirely is
//     that bucket's sum; a run that crosses a range boundary leaves partial sums, two slots per
//     range, which the next level reduces the same way until one range holds everything.
//  4. window reduction: sum_b b S_b per window, in segments of G buckets (running sums), each
//     segment's offset added as a small scalar multiple; then the segments of a window summed.
//  5. combination: sum_w 2^(cw) W_w (Horner, c doublings per window).
// The CUDA kernels (msm.cu) run one of these bodies per thread; the host build
// (gpu/native/curve_host.cpp) runs the same bodies in loops, so the CPU tests check them.
#pragma once
#include <stdint.h>
#include "curve.cuh"

#define MSM_SENTINEL 0xffffffffu
#define MSM_NEG_BIT 0x80000000u

// Number of windows for c-bit signed digits of a 255-bit scalar: c W >= 256, one bit of room
// for the carry out of the top window (so its digit stays within 2^(c-1)).
CURVE_FN int msm_windows(int c) { return (256 + c - 1) / c; }

// Bits [off, off + c) of an 8-limb scalar, c <= 31 (zero past bit 255).
CURVE_FN uint32_t scalar_bits(const uint32_t* s, int off, int c) {
    int limb = off >> 5, sh = off & 31;
    if (limb >= 8) return 0;
    uint64_t v = s[limb] >> sh;
    if (sh + c > 32 && limb + 1 < 8) v |= (uint64_t)s[limb + 1] << (32 - sh);
    return (uint32_t)v & ((1u << c) - 1);
}

// The signed digits of one scalar, window by window (the carry ties window w to w - 1).
struct digit_iter {
    const uint32_t* s;
    int c, w;
    uint32_t carry;
    CURVE_FN digit_iter(const uint32_t* s_, int c_) : s(s_), c(c_), w(0), carry(0) {}
    // Next window's digit as bucket key offset |d| (0 = no bucket) and sign.
    CURVE_FN uint32_t next(bool* neg) {
        uint32_t d = scalar_bits(s, w * c, c) + carry;
        w++;
        uint32_t half = 1u << (c - 1);
        if (d > half) {
            carry = 1;
            *neg = true;
            return (1u << c) - d;
        }
        carry = 0;
        *neg = false;
        return d;
    }
};

// Level 1 source: the affine bases, through the sorted (index | sign) values.
// A source loads entry k (load) and adds it (add) separately, so the range loop can issue the
// next entry's gather before the current addition: on the device a base is a random 96/192-byte
// read whose latency would otherwise stall every addition.
template <class F>
struct base_source {
    typedef affine_t<F> item;
    const affine_t<F>* bases;
    const uint32_t* vals;
    CURVE_FN item load(int64_t k) const {
        uint32_t v = vals[k];
        affine_t<F> p = bases[v & ~MSM_NEG_BIT];
        if (v & MSM_NEG_BIT) p = -p;
        return p;
    }
    CURVE_FN static void add(xyzz_t<F>& acc, const item& p) { acc.add_affine(p); }
};

// Brings the bytes at p into L1 without a register to hold them (no-op on the host).
CURVE_FN void prefetch_l1(const void* p) {
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.L1 [%0];" ::"l"(p));
#endif
}

// Level 1 for accumulate_range_lean: the base is read when it is added, and the next one is
// brought into L1 instead of into 48 registers (an affine G2 base spans two 128-byte lines).
template <class F>
struct base_source_lean {
    const affine_t<F>* bases;
    const uint32_t* vals;
    CURVE_FN void touch(int64_t k) const {
        const char* p = (const char*)(bases + (vals[k] & ~MSM_NEG_BIT));
        prefetch_l1(p);
        if (sizeof(affine_t<F>) > 64) prefetch_l1(p + sizeof(affine_t<F>) - 1);
    }
    CURVE_FN void add(xyzz_t<F>& acc, int64_t k) const {
        uint32_t v = vals[k];
        acc.add_affine_lean(bases[v & ~MSM_NEG_BIT], (v & MSM_NEG_BIT) != 0);
    }
};

// Later levels: the partial sums of the level before.
template <class F>
struct part_source {
    typedef xyzz_t<F> item;
    const xyzz_t<F>* parts;
    CURVE_FN item load(int64_t k) const { return parts[k]; }
    CURVE_FN static void add(xyzz_t<F>& acc, const item& p) { acc.add(p); }
};

// Range t = [t L, min(t L + L, M)) of the sorted keys: the sum of each run of equal keys goes to
// buckets[key] when the range holds the whole run, else into this range's two partial slots
// (out_keys/out_parts[2t], [2t + 1]). Unused slots repeat the neighbouring slot's key with the
// identity, so partials of one key stay contiguous at the next level; a range with no crossing
// run writes MSM_SENTINEL keys, which never sit inside a run (a run crossing range t would make
// range t a single open run).
// PREFETCH: load entry k + 1 before adding entry k (hides the gather's latency; costs one
// item's registers: 24 for G1, 48 for G2, where the accumulator already takes 96).
template <class F, class Src, bool PREFETCH = true>
CURVE_FN void accumulate_range(int64_t t, int64_t L, int64_t M, const uint32_t* keys,
                               const Src& src, xyzz_t<F>* buckets, uint32_t* out_keys,
                               xyzz_t<F>* out_parts) {
    int64_t lo = t * L, hi = lo + L < M ? lo + L : M;
    uint32_t ka = MSM_SENTINEL, kb = MSM_SENTINEL;
    xyzz_t<F> pa = xyzz_t<F>::identity(), pb = xyzz_t<F>::identity();
    if (lo < hi) {
        bool first_open = lo > 0 && keys[lo - 1] == keys[lo];
        bool last_open = hi < M && keys[hi] == keys[hi - 1];
        uint32_t cur = keys[lo];
        bool first = true;
        xyzz_t<F> acc = xyzz_t<F>::identity();
        typename Src::item next;
        if (PREFETCH) next = src.load(lo);
        for (int64_t k = lo; k < hi; k++) {
            uint32_t key = keys[k];
            typename Src::item item;
            if (PREFETCH) {
                item = next;
                if (k + 1 < hi) next = src.load(k + 1);
            } else {
                item = src.load(k);
            }
            if (key != cur) {
                if (cur != MSM_SENTINEL) {
                    if (first && first_open) { ka = cur; pa = acc; }
                    else buckets[cur] = acc;
                }
                first = false;
                cur = key;
                acc = xyzz_t<F>::identity();
            }
            Src::add(acc, item);
        }
        if (cur != MSM_SENTINEL) {
            if (!((first && first_open) || last_open)) buckets[cur] = acc;
            else if (first) { ka = cur; pa = acc; kb = cur; }  // one run, open: pb stays identity
            else { kb = cur; pb = acc; }
        }
        if (ka == MSM_SENTINEL) ka = kb;  // pa stays identity
        if (kb == MSM_SENTINEL) kb = ka;
    }
    out_keys[2 * t] = ka;
    out_parts[2 * t] = pa;
    out_keys[2 * t + 1] = kb;
    out_parts[2 * t + 1] = pb;
}

// accumulate_range's result (the same buckets, keys and partial slots) with fewer registers
// live across the loop, for G2's level 1 (Src: base_source_lean): the partial sum of a first
// run that crosses the range's start is stored when that run ends instead of being held to the
// end of the range (an XYZZ point: 96 registers for G2, held through every later addition),
// and the next base is prefetched into L1 (Src::touch), not into registers.
template <class F, class Src>
CURVE_FN void accumulate_range_lean(int64_t t, int64_t L, int64_t M, const uint32_t* keys,
                                    const Src& src, xyzz_t<F>* buckets, uint32_t* out_keys,
                                    xyzz_t<F>* out_parts) {
    int64_t lo = t * L, hi = lo + L < M ? lo + L : M;
    uint32_t ka = MSM_SENTINEL, kb = MSM_SENTINEL;  // set exactly when their slot is written
    if (lo < hi) {
        bool first_open = lo > 0 && keys[lo - 1] == keys[lo];
        bool last_open = hi < M && keys[hi] == keys[hi - 1];
        uint32_t cur = keys[lo];
        bool first = true;
        xyzz_t<F> acc = xyzz_t<F>::identity();
        for (int64_t k = lo; k < hi; k++) {
            uint32_t key = keys[k];
            if (k + 1 < hi) src.touch(k + 1);
            if (key != cur) {
                if (cur != MSM_SENTINEL) {
                    if (first && first_open) { ka = cur; out_parts[2 * t] = acc; }
                    else buckets[cur] = acc;
                }
                first = false;
                cur = key;
                acc = xyzz_t<F>::identity();
            }
            src.add(acc, k);
        }
        if (cur != MSM_SENTINEL) {
            if (!((first && first_open) || last_open)) buckets[cur] = acc;
            else if (first) {  // one run, open: the second slot repeats its key, identity
                ka = cur;
                out_parts[2 * t] = acc;
            } else {
                kb = cur;
                out_parts[2 * t + 1] = acc;
            }
        }
    }
    if (ka == MSM_SENTINEL) { ka = kb; out_parts[2 * t] = xyzz_t<F>::identity(); }
    if (kb == MSM_SENTINEL) { kb = ka; out_parts[2 * t + 1] = xyzz_t<F>::identity(); }
    out_keys[2 * t] = ka;
    out_keys[2 * t + 1] = kb;
}

// Segment j of window w (buckets j G + 1 .. (j + 1) G): running sums from the top give
// sum (b - j G) S_b; adding j G times the segment's plain sum T_j gives sum b S_b. counts =
// null: every bucket was written (the chunked MSM zeroes its buckets, and zero is the identity).
// Bucket b holds digit b + 1, so the running sums weigh it b - j G + 1 and the offset is j G.
// With run_out (the first of two levels) the offset is left out and G T_j goes to *run_out
// (log2 G doublings): sum_j j G T_j = sum_j j (G T_j) is then the same reduction one level up,
// over S = B / G points (first_run_out), whose own offsets are few. One j G product a segment
// (a chain of ~log2 B doublings and additions, 22 G2 operations against a segment's 16 at
// G = 8) made the G2 reduction of a 2^21 MSM 16.8 ms against a 1.6 ms floor on the H200.
template <class F>
CURVE_COLD void add_cold(xyzz_t<F>& acc, const xyzz_t<F>& q) { acc.add(q); }

// The reduction's additions: inline for G1; for G2 one out-of-line copy. Three inlined G2
// additions made msm_g2_reduce.cu a 1.59 MB cubin and the precompile's critical path (159 s of
// ptxas on the H200's 16 cores, 112 s alone on 2); the reduction is ~1% of a G2 MSM's time.
template <class F>
CURVE_FN void reduce_add(xyzz_t<F>& acc, const xyzz_t<F>& q) {
    if constexpr (sizeof(F) > 48) add_cold(acc, q);
    else acc.add(q);
}

template <class F>
CURVE_FN xyzz_t<F> reduce_segment(int w, int64_t j, int64_t B, int64_t G,
                                  const xyzz_t<F>* buckets, const uint32_t* counts,
                                  xyzz_t<F>* run_out = nullptr) {
    xyzz_t<F> run = xyzz_t<F>::identity(), tot = xyzz_t<F>::identity();
    for (int64_t b = (j + 1) * G - 1; b >= j * G; b--) {
        int64_t key = w * B + b;
        if (!counts || counts[key]) reduce_add(run, buckets[key]);
        reduce_add(tot, run);
    }
    if (run_out) *run_out = run.mul_small((uint32_t)G);
    else reduce_add(tot, run.mul_small((uint32_t)(j * G)));
    return tot;
}

// Where the first level's segment k = w S + j hands on G T_j: runs[k - 1], which the second
// level (reduce_segment over runs, B = S) weighs (k - 1) - w S + 1 = j. Segment 0 hands on
// nothing (null: its offset, 0, is added as the second level adds its own) and runs[w S + S - 1],
// weighed S, is set to the identity. One call site of reduce_segment for both levels: each
// site inlines the whole loop (two made msm_g1.cu's cubin 1.45 MB against 1.11).
template <class F>
CURVE_FN xyzz_t<F>* first_run_out(int64_t k, int64_t S, xyzz_t<F>* runs) {
    int64_t j = k % S;
    if (j == S - 1) runs[k] = xyzz_t<F>::identity();
    return j ? runs + k - 1 : nullptr;
}

// sum of in[row * len + q * g .. + g) (clipped to the row): one step of the per-window sums.
template <class F>
CURVE_FN xyzz_t<F> sum_group(int64_t row, int64_t q, int64_t len, int64_t g, const xyzz_t<F>* in) {
    xyzz_t<F> acc = xyzz_t<F>::identity();
    int64_t end = (q + 1) * g < len ? (q + 1) * g : len;
    for (int64_t i = q * g; i < end; i++) acc.add(in[row * len + i]);
    return acc;
}

// sum_w 2^(c w) win[w], Horner from the top window.
template <class F>
CURVE_FN xyzz_t<F> combine_windows(int W, int c, const xyzz_t<F>* win) {
    xyzz_t<F> acc = win[W - 1];
    for (int w = W - 2; w >= 0; w--) {
        for (int i = 0; i < c; i++) acc = acc.dbl();
        acc.add(win[w]);
    }
    return acc;
}
