// NTT over Fr on the device, and the pointwise step of the H polynomial.
//
// Orders (as sppark and supra_seal): the forward transform is decimation in frequency (DIF,
// Gentleman-Sande), natural order in, bit-reversed out; the transform back is decimation in
// time (DIT, Cooley-Tukey), bit-reversed in, natural out. Either runs with omega or omega^-1,
// so each direction is available in both orders, and compute_h chains them with no separate
// bit-reversal pass (gpu/cuda/ntt.py: the bit reversal the odd number of transforms needs is
// folded into the pointwise kernel).
//
// Values stay canonical (x, not x R) in device memory: every constant that multiplies them
// (twiddles, coset powers, 1/n) is in Montgomery form, and mont_mul(x, c R) = x c, so the
// transform needs no conversion passes. Only the product of two data values (a * b in
// ntt_h_pointwise) picks up an R^-1, which that kernel removes.
//
// A transform of 2^log_n runs as a few passes; a pass moves one tile of 2^(kb + cb) elements
// per block through shared memory and applies kb radix-2 stages (the stages of bits
// lo .. lo + kb - 1). The tile's elements are 2^kb columns of 2^cb consecutive elements, so a
// warp's global loads are runs of 2^cb * 32 bytes (cb = 3: 256 bytes) even when the stage
// stride is large. Twiddles come from per-stage tables tw[2^b - 1 + j] = omega_{2^(b+1)}^j.
#include "fr.cuh"

// Launch bounds of the pass kernels: at most NTT_MAX_THREADS a block (2^(TILE_BITS-1) in
// gpu/cuda/ntt.py must not exceed it) and NTT_MIN_BLOCKS resident blocks an SM, which caps the
// registers at 65536 / (NTT_MAX_THREADS * NTT_MIN_BLOCKS). bench/gpu_ntt.py measures variants.
#ifndef NTT_MAX_THREADS
#define NTT_MAX_THREADS 512
#endif
#ifndef NTT_MIN_BLOCKS
#define NTT_MIN_BLOCKS 1
#endif
// 1: load each stage's twiddle one stage ahead (hides its L2 latency, costs 8 registers)
#ifndef NTT_PREFETCH
#define NTT_PREFETCH 0
#endif

typedef unsigned int u32;

namespace {

// The element at tile-local position L of tile t in a pass over bits [lo, lo + kb), with cb
// coalescing bits; the tile index runs fastest over the bits above the pass (hi), so blocks
// in flight together share their twiddles in L2.
// 32-bit indices: n <= 2^27 elements (the driver's limit), and 32-bit arithmetic keeps registers
// free for the products.
__device__ __forceinline__ u32 tile_index(u32 t, u32 L, int log_n, int lo, int kb, int cb) {
    int nhi = log_n - lo - kb;
    u32 hi = t & ((1u << nhi) - 1), mid = t >> nhi;
    u32 low = L & ((1u << cb) - 1), m = L >> cb;
    return (hi << (lo + kb)) | (m << lo) | (mid << cb) | low;
}

__device__ __forceinline__ u32 bit_rev(u32 i, int log_n) {
    return log_n == 0 ? 0 : __brev(i) >> (32 - log_n);
}

// The coset/normalisation factor of element i: s_hi[e >> 10] * s_lo[e & 1023] with
// e = i or bitrev(i). Two small tables instead of one of n entries: 2^log_n / 1024 + 1024
// elements per kind, one extra product per element.
struct scale_t {
    const fr_t* lo;  // null: the factor is the constant hi[0] (g = 1), no product to build it
    const fr_t* hi;
    int rev;   // 1: the factor belongs to bitrev(i) (data in bit-reversed order)
    int mode;  // 0 none, 1 on load (before the first stage), 2 on store (after the last)
};

__device__ __forceinline__ fr_t load_elem(const fr_t* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = q[0], b = q[1];
    fr_t r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}
__device__ __forceinline__ void store_elem(fr_t* p, const fr_t& x) {
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    q[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}
__device__ __forceinline__ fr_t ldg_elem(const fr_t* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = __ldg(q), b = __ldg(q + 1);
    fr_t r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}

__device__ __forceinline__ fr_t factor(const scale_t& s, u32 i, int log_n) {
    if (s.lo == nullptr) return ldg_elem(s.hi);
    u32 e = s.rev ? bit_rev(i, log_n) : i;
    return s.hi[e >> 10] * s.lo[e & 1023];
}

// Shared memory holds the tile limb-major (limb l of element L at sh[l * T + L]): a warp
// touching 32 different elements hits 32 different banks.
__device__ __forceinline__ fr_t sh_get(const u32* sh, int T, int L) {
    fr_t r;
#pragma unroll
    for (int l = 0; l < 8; l++) r.v[l] = sh[l * T + L];
    return r;
}
__device__ __forceinline__ void sh_put(u32* sh, int T, int L, const fr_t& x) {
#pragma unroll
    for (int l = 0; l < 8; l++) sh[l * T + L] = x.v[l];
}

// Twiddle of the butterfly whose lower element is global index g, at the stage of bit b.
__device__ __forceinline__ fr_t twiddle(const fr_t* tw, u32 g, int b) {
    return ldg_elem(tw + ((1u << b) - 1 + (g & ((1u << b) - 1))));
}

// The bit of stage st (1 <= st < kb) of a pass, and the global index of thread k's lower
// element at that stage (for its twiddle).
__device__ __forceinline__ int stage_b(int st, int lo, int kb, bool dit) {
    return dit ? lo + st - 1 : lo + kb - 1 - st;
}
__device__ __forceinline__ u32 stage_g(u32 t, u32 k, int st, int log_n, int lo, int kb, int cb,
                                       bool dit) {
    int sl = cb + stage_b(st, lo, kb, dit) - lo;
    u32 i0 = ((k >> sl) << (sl + 1)) | (k & ((1u << sl) - 1));
    return tile_index(t, i0, log_n, lo, kb, cb);
}

// One pass: kb stages of bits lo .. lo+kb-1, DIF (top bit first) or DIT (lowest bit first).
// blockDim.x = T / 2, each thread one butterfly per stage; dynamic shared memory 32 T bytes.
template <bool DIT>
__device__ void pass(fr_t* data, int log_n, int lo, int kb, int cb, const fr_t* tw, scale_t s) {
    extern __shared__ u32 sh[];
    const int T = 1 << (kb + cb), H = T >> 1;
    const u32 t = blockIdx.x, k = threadIdx.x;
    u32 g0 = tile_index(t, k, log_n, lo, kb, cb), g1 = tile_index(t, k + H, log_n, lo, kb, cb);
    fr_t x0 = load_elem(data + g0), x1 = load_elem(data + g1);
    if (s.mode == 1) {
        x0 = x0 * factor(s, g0, log_n);
        x1 = x1 * factor(s, g1, log_n);
    }
    // (k, k + H) is the pair of the pass's widest stage: the first of a DIF pass and the last
    // of a DIT pass, done in registers without a trip through shared memory.
    if (!DIT) {
        fr_t w = twiddle(tw, g0, lo + kb - 1);
        fr_t u = x0;
        x0 = u + x1;
        x1 = (u - x1) * w;
    }
    if (kb > 1) {
        sh_put(sh, T, k, x0);
        sh_put(sh, T, k + H, x1);
        __syncthreads();
#if NTT_PREFETCH
        fr_t w_next = twiddle(tw, stage_g(t, k, 1, log_n, lo, kb, cb, DIT), stage_b(1, lo, kb, DIT));
#endif
        for (int st = 1; st < kb; st++) {
            // DIF: bits lo+kb-2 down to lo; DIT: bits lo up to lo+kb-2
            int b = stage_b(st, lo, kb, DIT);
            int sl = cb + b - lo;  // the bit's position in L
            int half = 1 << sl;
            int i0 = ((k >> sl) << (sl + 1)) | (k & (half - 1)), i1 = i0 + half;
#if NTT_PREFETCH
            // the next stage's twiddle is in flight while this stage multiplies
            fr_t w = w_next;
            if (st + 1 < kb)
                w_next = twiddle(tw, stage_g(t, k, st + 1, log_n, lo, kb, cb, DIT),
                                 stage_b(st + 1, lo, kb, DIT));
#else
            fr_t w = twiddle(tw, tile_index(t, i0, log_n, lo, kb, cb), b);
#endif
            fr_t u = sh_get(sh, T, i0), v = sh_get(sh, T, i1);
            if (DIT) {
                fr_t y = v * w;
                v = u - y;
                u = u + y;
            } else {
                fr_t d = u - v;
                u = u + v;
                v = d * w;
            }
            sh_put(sh, T, i0, u);
            sh_put(sh, T, i1, v);
            __syncthreads();
        }
        x0 = sh_get(sh, T, k);
        x1 = sh_get(sh, T, k + H);
    }
    if (DIT) {
        fr_t y = x1 * twiddle(tw, g0, lo + kb - 1);
        x1 = x0 - y;
        x0 = x0 + y;
    }
    if (s.mode == 2) {
        x0 = x0 * factor(s, g0, log_n);
        x1 = x1 * factor(s, g1, log_n);
    }
    store_elem(data + g0, x0);
    store_elem(data + g1, x1);
}

// Radix-4 form of the same pass: blockDim.x = T / 4 and each thread holds four elements, so
// two stages run in registers per trip through shared memory (half the round trips and
// __syncthreads of pass(), and four independent butterflies a thread for the scheduler).
// A group of two stages covers two adjacent bits (s, s + 1) of the tile-local index L; thread
// k's four elements are k with zeros inserted at those bits, plus 2^s, 2^(s+1), both. When kb is
// odd one stage runs alone (two radix-2 butterflies a thread): last for DIF (bits go down),
// first for DIT (bits go up). The first group loads from memory and the last stores to it
// directly, at its own positions (no extra trip through shared memory).
__device__ __forceinline__ u32 insert_zero(u32 k, int s) {
    return ((k >> s) << (s + 1)) | (k & ((1u << s) - 1));
}

template <bool DIT>
__device__ __forceinline__ void bfly(fr_t& u, fr_t& v, const fr_t& w) {
    if (DIT) {
        fr_t y = v * w;
        v = u - y;
        u = u + y;
    } else {
        fr_t d = u - v;
        u = u + v;
        v = d * w;
    }
}

// A butterfly whose twiddle is 1: (u + v, u - v) in either order, no product.
__device__ __forceinline__ void bfly1(fr_t& u, fr_t& v) {
    fr_t d = u - v;
    u = u + v;
    v = d;
}

// trim = 1: the stage of global bit 0 takes no product. Its twiddle is tw[0] = omega_2^0 = 1
// for every butterfly, and in a group of bits 0 and 1 the pair (0, 2) of bit 1 has
// omega_4^0 = 1 too (g[0]'s bit 0 is 0): three products of four, or both of a lone stage's two,
// are multiplications by 1. The condition is the same for the whole grid (only the lowest
// pass, lo = 0 and cb = 0, has b0 = 0), so no warp diverges. n / 2 products of an NTT's
// n / 2 log n (27: 3.7%).
template <bool DIT>
__device__ void pass4(fr_t* data, int log_n, int lo, int kb, int cb, const fr_t* tw, scale_t s,
                      int trim) {
    extern __shared__ u32 sh[];
    const int T = 1 << (kb + cb), Q = T >> 2;
    const u32 t = blockIdx.x, k = threadIdx.x;
    // groups in the order the stages run: DIF from the top bit down, DIT from the bottom up.
    // A group is (bit position in L of its lower bit, 1 or 2 stages).
    const int top = cb + kb - 1;           // L position of the pass's highest bit
    const int single = kb & 1;             // one radix-2 stage left over
    const int groups = (kb + 1) >> 1;
    for (int gi = 0; gi < groups; gi++) {
        bool first = gi == 0, last = gi == groups - 1;
        int width, sl;                     // stages in this group, its lowest L bit
        if (!DIT) {
            width = (single && last) ? 1 : 2;
            sl = top - 2 * gi - (width - 1);
        } else {
            width = (single && first) ? 1 : 2;
            sl = cb + (gi == 0 ? 0 : 2 * gi - single);
        }
        u32 L[4];
        if (width == 2) {
            u32 L0 = insert_zero(insert_zero(k, sl), sl + 1);
            L[0] = L0;
            L[1] = L0 + (1u << sl);
            L[2] = L0 + (2u << sl);
            L[3] = L0 + (3u << sl);
        } else {  // pairs k and k + Q, each (i0, i0 + 2^sl)
            u32 a = insert_zero(k, sl), b = insert_zero(k + Q, sl);
            L[0] = a;
            L[1] = a + (1u << sl);
            L[2] = b;
            L[3] = b + (1u << sl);
        }
        u32 g[4];
        fr_t x[4];
#pragma unroll
        for (int j = 0; j < 4; j++) g[j] = tile_index(t, L[j], log_n, lo, kb, cb);
        if (first) {  // the first group reads memory: its bits are >= cb, so k's low cb bits
                      // stay L's low bits and a warp reads runs of 2^cb consecutive elements
#pragma unroll
            for (int j = 0; j < 4; j++) {
                x[j] = load_elem(data + g[j]);
                if (s.mode == 1) x[j] = x[j] * factor(s, g[j], log_n);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) x[j] = sh_get(sh, T, L[j]);
        }
        int b0 = lo + sl - cb;  // global bit of the group's lower L bit
        // In a group of two stages (0,1) and (2,3) share their twiddle at bit b0: g[2] =
        // g[0] + 2^(b0+1) has the same bits below b0, so it is loaded once.
        if (trim && b0 == 0) {   // bit 0's stage (and bit 1's pair (0, 2)): twiddles of 1
            if (width == 2) {
                if (!DIT) {
                    bfly1(x[0], x[2]);
                    bfly<false>(x[1], x[3], twiddle(tw, g[1], 1));
                    bfly1(x[0], x[1]);
                    bfly1(x[2], x[3]);
                } else {
                    bfly1(x[0], x[1]);
                    bfly1(x[2], x[3]);
                    bfly1(x[0], x[2]);
                    bfly<true>(x[1], x[3], twiddle(tw, g[1], 1));
                }
            } else {
                bfly1(x[0], x[1]);
                bfly1(x[2], x[3]);
            }
        } else if (width == 2) {
            if (!DIT) {  // bit b0 + 1 first: (0,2), (1,3); then bit b0: (0,1), (2,3)
                bfly<false>(x[0], x[2], twiddle(tw, g[0], b0 + 1));
                bfly<false>(x[1], x[3], twiddle(tw, g[1], b0 + 1));
                fr_t w = twiddle(tw, g[0], b0);
                bfly<false>(x[0], x[1], w);
                bfly<false>(x[2], x[3], w);
            } else {     // bit b0 first: (0,1), (2,3); then bit b0 + 1: (0,2), (1,3)
                fr_t w = twiddle(tw, g[0], b0);
                bfly<true>(x[0], x[1], w);
                bfly<true>(x[2], x[3], w);
                bfly<true>(x[0], x[2], twiddle(tw, g[0], b0 + 1));
                bfly<true>(x[1], x[3], twiddle(tw, g[1], b0 + 1));
            }
        } else {
            // a lone stage's pairs k and k + Q: k + Q keeps k's bits below sl = cb (so the
            // twiddle) only when Q = 2^(kb + cb - 2) >= 2^cb; a pass of one bit (kb = 1, at
            // 2^10) has Q = 2^(cb - 1), and its two pairs need their own twiddles
            fr_t w = twiddle(tw, g[0], b0);
            bfly<DIT>(x[0], x[1], w);
            bfly<DIT>(x[2], x[3], kb > 1 ? w : twiddle(tw, g[2], b0));
        }
        if (last) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (s.mode == 2) x[j] = x[j] * factor(s, g[j], log_n);
                store_elem(data + g[j], x[j]);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) sh_put(sh, T, L[j], x[j]);
            __syncthreads();
        }
    }
}

}  // namespace

extern "C" {

// Launch: grid = 2^(log_n - kb - cb) tiles, block = 2^(kb + cb - 1), shared 2^(kb + cb) * 32 B.
__global__ void __launch_bounds__(NTT_MAX_THREADS, NTT_MIN_BLOCKS)
ntt_dif_pass(fr_t* data, int log_n, int lo, int kb, int cb, const fr_t* tw, const fr_t* s_lo,
             const fr_t* s_hi, int s_rev, int s_mode) {
    pass<false>(data, log_n, lo, kb, cb, tw, scale_t{s_lo, s_hi, s_rev, s_mode});
}
__global__ void __launch_bounds__(NTT_MAX_THREADS, NTT_MIN_BLOCKS)
ntt_dit_pass(fr_t* data, int log_n, int lo, int kb, int cb, const fr_t* tw, const fr_t* s_lo,
             const fr_t* s_hi, int s_rev, int s_mode) {
    pass<true>(data, log_n, lo, kb, cb, tw, scale_t{s_lo, s_hi, s_rev, s_mode});
}

// Radix-4 passes (pass4): grid as above, block = 2^(kb + cb - 2) (kb + cb >= 2), same shared;
// trim 1: bit 0's stage without its products by 1 (pass4 says which).
__global__ void __launch_bounds__(NTT_MAX_THREADS, NTT_MIN_BLOCKS)
ntt_dif_pass4(fr_t* data, int log_n, int lo, int kb, int cb, const fr_t* tw, const fr_t* s_lo,
              const fr_t* s_hi, int s_rev, int s_mode, int trim) {
    pass4<false>(data, log_n, lo, kb, cb, tw, scale_t{s_lo, s_hi, s_rev, s_mode}, trim);
}
__global__ void __launch_bounds__(NTT_MAX_THREADS, NTT_MIN_BLOCKS)
ntt_dit_pass4(fr_t* data, int log_n, int lo, int kb, int cb, const fr_t* tw, const fr_t* s_lo,
              const fr_t* s_hi, int s_rev, int s_mode, int trim) {
    pass4<true>(data, log_n, lo, kb, cb, tw, scale_t{s_lo, s_hi, s_rev, s_mode}, trim);
}

// Per-stage twiddle tables for a transform of 2^log_n: tw[2^b - 1 + j] = omega_{2^(b+1)}^j for
// b < log_n, j < 2^b (Montgomery form); roots[k] = omega_{2^k} (Montgomery), k <= 32. Each
// thread fills a run of 32 entries of one table: one exponentiation, then 31 products.
__global__ void ntt_twiddles(fr_t* tw, int log_n, const fr_t* roots) {
    const int RUN = 32;
    size_t total = (size_t(1) << log_n) - 1;
    size_t start = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * RUN;
    if (start >= total) return;
    // entry e belongs to table b = floor(log2(e + 1)); a run never crosses tables when they
    // are >= 32 long, and shorter tables (b < 5) are walked entry by entry
    for (size_t e = start; e < start + RUN && e < total;) {
        int b = 63 - __clzll((long long)(e + 1));
        size_t j = e + 1 - (size_t(1) << b);
        fr_t w = roots[b + 1];
        uint32_t ex[2] = {(uint32_t)j, (uint32_t)(j >> 32)};
        fr_t x = w.pow(ex, 2);
        size_t end = (size_t(1) << (b + 1)) - 1;  // one past this table
        if (end > start + RUN) end = start + RUN;
        if (end > total) end = total;
        for (; e < end; e++) {
            tw[e] = x;
            x = x * w;
        }
    }
}

// Scale tables: lo[k] = g^k (k < 1024), hi[k] = c g^(1024 k) (k < count_hi), Montgomery.
__global__ void ntt_scale_tables(fr_t* lo, fr_t* hi, int count_hi, const fr_t* g, const fr_t* c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 1024) {
        uint32_t e[1] = {(uint32_t)i};
        lo[i] = g->pow(e, 1);
    }
    if (i < count_hi) {
        uint32_t e[2] = {(uint32_t)((uint64_t)i * 1024), (uint32_t)(((uint64_t)i * 1024) >> 32)};
        hi[i] = g->pow(e, 2) * *c;
    }
}

// In-place bit-reversal permutation (only the natural-to-natural API needs it).
__global__ void ntt_bit_reverse(fr_t* data, int log_n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    u32 j = bit_rev(i, log_n);
    if (i < j) {
        fr_t a = load_elem(data + i), b = load_elem(data + j);
        store_elem(data + i, b);
        store_elem(data + j, a);
    }
}

// The pointwise step of H on the coset, written to position bitrev(i): the coset evaluations
// arrive in natural order, and the inverse DIT that follows wants them bit-reversed. Each
// thread owns the pair (i, bitrev(i)), i <= bitrev(i). With z_r2 = Z(g)^-1 R^2, a[i] <- a b / Z
// (mont_mul(mont_mul(a, b), z_r2)); with z_r2 null, a[i] <- a b R^-1, one product, and the
// inverse coset NTT's scale on store carries Z(g)^-1 R instead ("inv_coset_h" in
// gpu/cuda/ntt.py: the transform is linear, so the constant may ride on its last factor). C
// is not here: its coefficients are subtracted after the inverse coset NTT (ntt_h_sub_coeffs;
// gpu/cuda/ntt.py compute_h_device says why that is the same H with one NTT fewer).
__global__ void ntt_h_pointwise(fr_t* a, const fr_t* b, int log_n, const fr_t* z_r2) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    u32 j = bit_rev(i, log_n);
    if (j < i) return;
    fr_t hi = load_elem(a + i) * load_elem(b + i);
    if (z_r2) hi = hi * ldg_elem(z_r2);
    if (j != i) {
        fr_t hj = load_elem(a + j) * load_elem(b + j);
        if (z_r2) hj = hj * ldg_elem(z_r2);
        store_elem(a + i, hj);
    }
    store_elem(a + j, hi);
}

// The last step of H: h[k] <- h[k] - c'[bitrev(k)], where c' holds C's coefficients times
// Z(g)^-1 in bit-reversed order (the inverse DIF of c, scaled on store by "inv_z"). Canonical
// values, so a plain modular subtraction.
__global__ void ntt_h_sub_coeffs(fr_t* h, const fr_t* c, int log_n) {
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (1u << log_n)) return;
    store_elem(h + k, load_elem(h + k) - load_elem(c + bit_rev(k, log_n)));
}

// first_bad <- min index of an element >= r (non-canonical), left alone when all are canonical.
__global__ void ntt_check_canonical(const fr_t* data, u32 n, u32* first_bad) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t x = load_elem(data + i);
    if (fr_t::geq_mod(x.v)) atomicMin(first_bad, i);
}

}  // extern "C"
