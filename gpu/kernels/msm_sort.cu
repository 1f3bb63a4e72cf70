// The MSM's radix sort of (bucket key, point index | sign) pairs (gpu/cuda/msm.py drives it;
// gpu/msm_sort.py picks it). Why not msm.cu's counting sort: that one does a global atomic per
// digit and writes each pair to a random word of a list far larger than L2, 36 ms for the
// 218 M digits of a 2^24 chunk at c = 20 (a quarter of the H MSM), and a two-level version of
// it with shared-memory bins measured 44 ms (its writes stay single words). Here every write is
// part of a run: the digits are written in window-major order (coalesced), then an LSD radix
// sort of 8 bits a pass (3 passes for 23-bit keys), each pass
//   upsweep    a block's tile of RADIX_TILE keys counted per 8-bit digit (shared counters),
//              written digit-major: hist[d * blocks + block];
//   scan       msm.cu's exclusive scan over that matrix: each (digit, block) pair's offset;
//   downsweep  the tile loaded (CUB BlockLoad, warp transpose), sorted by the pass's bits in
//              the block (CUB BlockRadixSort: stable), and each digit's run written to its
//              offset by consecutive threads.
// Stable passes from the low bits up leave the list sorted by key. A zero digit gets the key
// `zero_key` (>= every bucket's) and sorts past the M nonzero ones, which the accumulation
// reads; no counts: the caller zeroes the buckets (zero is the identity).
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "curve_io.cuh"
#include "msm_core.cuh"

typedef int64_t i64;

#define RADIX_THREADS 256
#define RADIX_ITEMS 16
#define RADIX_TILE (RADIX_THREADS * RADIX_ITEMS)
#define RADIX_BITS 8
#define RADIX_DIGITS (1 << RADIX_BITS)

// Digit w of scalar i at w n + i: key w wstride + |d| - 1 (zero_key for d = 0), value
// (w vstride + i) | sign. wstride = 2^(c-1), vstride = 0: a plain MSM; wstride = 0, vstride = n:
// over precomputed bases 2^(c w) P_i (one set of buckets). *m += the nonzero digits; *bad = the
// smallest first + i of a scalar >= r.
extern "C" __global__ void msm_radix_digits(i64 n, const uint32_t* scalars, int c, uint32_t wstride,
                                            uint32_t vstride, uint32_t zero_key, uint32_t* keys,
                                            uint32_t* vals, unsigned long long* m,
                                            unsigned long long* bad, i64 first) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t nonzero = 0;
    if (i < n) {
        const uint4* p = reinterpret_cast<const uint4*>(scalars + 8 * i);
        uint4 a = p[0], b = p[1];
        uint32_t s[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        if (!fr_canonical(s)) atomicMin(bad, (unsigned long long)(first + i));
        const int W = msm_windows(c);
        digit_iter it(s, c);
        for (int w = 0; w < W; w++) {
            bool neg;
            uint32_t d = it.next(&neg);
            keys[w * n + i] = d ? w * wstride + d - 1 : zero_key;
            vals[w * n + i] = (w * vstride + (uint32_t)i) | (neg ? MSM_NEG_BIT : 0);
            nonzero += d != 0;
        }
    }
    // one atomic a warp
#pragma unroll
    for (int o = 16; o; o >>= 1) nonzero += __shfl_down_sync(0xffffffffu, nonzero, o);
    if ((threadIdx.x & 31) == 0 && nonzero) atomicAdd(m, (unsigned long long)nonzero);
}

// hist[d * blocks + block] = the keys of the block's tile whose bits [shift, shift + 8) are d.
extern "C" __global__ void __launch_bounds__(RADIX_THREADS)
msm_radix_upsweep(i64 count, const uint32_t* keys, int shift, i64 blocks, uint32_t* hist) {
    __shared__ uint32_t h[RADIX_DIGITS];
    h[threadIdx.x] = 0;
    __syncthreads();
    i64 lo = (i64)blockIdx.x * RADIX_TILE;
#pragma unroll
    for (int j = 0; j < RADIX_ITEMS; j++) {
        i64 k = lo + j * RADIX_THREADS + threadIdx.x;
        if (k < count) atomicAdd(h + ((keys[k] >> shift) & (RADIX_DIGITS - 1)), 1u);
    }
    __syncthreads();
    hist[(i64)threadIdx.x * blocks + blockIdx.x] = h[threadIdx.x];
}

// The block's tile sorted by bits [shift, shift + 8), each digit's run written from
// offs[d * blocks + block] on (the scanned upsweep counts).
extern "C" __global__ void __launch_bounds__(RADIX_THREADS)
msm_radix_downsweep(i64 count, const uint32_t* keys_in, const uint32_t* vals_in, int shift,
                    i64 blocks, const uint32_t* offs, uint32_t* keys_out, uint32_t* vals_out) {
    typedef cub::BlockLoad<uint32_t, RADIX_THREADS, RADIX_ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE>
        Load;
    typedef cub::BlockRadixSort<uint32_t, RADIX_THREADS, RADIX_ITEMS, uint32_t> Sort;
    typedef cub::BlockScan<uint32_t, RADIX_THREADS> Scan;
    __shared__ union {
        typename Load::TempStorage load;
        typename Sort::TempStorage sort;
        typename Scan::TempStorage scan;
    } tmp;
    // the global offset of each digit's run minus where the run starts in the sorted tile
    __shared__ uint32_t base[RADIX_DIGITS];

    i64 lo = (i64)blockIdx.x * RADIX_TILE;
    int valid = count - lo < RADIX_TILE ? (int)(count - lo) : RADIX_TILE;
    uint32_t k[RADIX_ITEMS], v[RADIX_ITEMS];
    // past the end: digit 255 and after every real item of the tile (blocked order), so after
    // the stable sort they hold the ranks >= valid, which are not written
    Load(tmp.load).Load(keys_in + lo, k, valid, 0xffffffffu);
    __syncthreads();
    Load(tmp.load).Load(vals_in + lo, v, valid, 0u);
    __syncthreads();

    // the tile's count of each digit -> where its run starts in the sorted tile
    base[threadIdx.x] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < RADIX_ITEMS; j++)
        if (threadIdx.x * RADIX_ITEMS + j < valid)
            atomicAdd(base + ((k[j] >> shift) & (RADIX_DIGITS - 1)), 1u);
    __syncthreads();
    uint32_t cnt = base[threadIdx.x], start;
    Scan(tmp.scan).ExclusiveSum(cnt, start);
    __syncthreads();
    base[threadIdx.x] = offs[(i64)threadIdx.x * blocks + blockIdx.x] - start;
    __syncthreads();

    Sort(tmp.sort).SortBlockedToStriped(k, v, shift, shift + RADIX_BITS);
#pragma unroll
    for (int j = 0; j < RADIX_ITEMS; j++) {
        int rank = j * RADIX_THREADS + threadIdx.x;
        if (rank < valid) {
            uint32_t pos = base[(k[j] >> shift) & (RADIX_DIGITS - 1)] + rank;
            keys_out[pos] = k[j];
            vals_out[pos] = v[j];
        }
    }
}

// The radix sort within each window (gpu/msm_sort.py WindowSortPlan; ZKHIVE_MSM_RADIX=window).
// The digits are written window-major, so the list is sorted by window before any pass: what
// is left is each window's (c - 1)-bit digit and the zero digits. msm_radix_digits writes the
// bare digit |d| - 1 (wstride = vstride = 0) and a zero digit as 2^D (zero_key = 2^D, D = c - 1:
// the bit above every digit), so D + 1 bits sort a window: two passes of at most 10 bits (one
// for c <= 10) instead of three 8-bit passes over the 23-bit (window, digit) key at c = 20, each
// pass sorting every window in place, its tiles inside one window. The last pass writes the
// accumulation's key w wstride + digit (zero_key for a zero digit) and moves every zero digit
// after all windows' nonzero ones, which the accumulation reads (M of them): its counts matrix
// puts the zero bins last. The matrix, scanned in place (msm.cu's msm_scan_chunks and
// msm_scan_sums; the chunk totals are added by the downsweep, no msm_scan_add pass), is
// bins x tiles a window: at c = 20 and 8192-item tiles the same bytes as the 8-bit passes'
// counts and offsets at 4096.
#define SEG_THREADS 512
#define SEG_ITEMS 16
#define SEG_TILE (SEG_THREADS * SEG_ITEMS)
#define SEG_MAX_BINS 1024
#define SEG_SCAN_CHUNK 4096  // msm.cu's SCAN_CHUNK: the chunk total each entry adds

// The counts matrix's entry of (bin, window w, tile t of the window): a window's bins together,
// tiles fastest. bins: the pass's bins a window (the last pass: its nonzero bins, the zero
// digits in bin `bins`, whose entries follow every window's nonzero ones).
__device__ __forceinline__ i64 seg_entry(uint32_t bin, int w, i64 t, i64 tiles, int W,
                                         uint32_t bins, int last) {
    if (last && bin == bins) return ((i64)W * bins + w) * tiles + t;
    return ((i64)w * bins + bin) * tiles + t;
}

// hist[seg_entry(...)] = the keys of window blockIdx.y's tile blockIdx.x whose bits [shift,
// shift + bits) are bin; n keys a window.
extern "C" __global__ void __launch_bounds__(SEG_THREADS)
msm_window_upsweep(i64 n, const uint32_t* keys, int shift, int bits, uint32_t bins, int last,
                   int W, uint32_t* hist) {
    __shared__ uint32_t h[SEG_MAX_BINS];
    for (int j = threadIdx.x; j < SEG_MAX_BINS; j += SEG_THREADS) h[j] = 0;
    __syncthreads();
    const int w = blockIdx.y;
    const i64 t = blockIdx.x, tiles = gridDim.x, lo = t * SEG_TILE;
    const i64 valid = n - lo < SEG_TILE ? n - lo : SEG_TILE;
    const uint32_t* src = keys + (i64)w * n + lo;
    const uint32_t mask = (1u << bits) - 1;
#pragma unroll
    for (int j = 0; j < SEG_ITEMS; j++) {
        int k = j * SEG_THREADS + threadIdx.x;
        if (k < valid) atomicAdd(h + ((src[k] >> shift) & mask), 1u);
    }
    __syncthreads();
    const uint32_t used = last ? bins + 1 : bins;
    for (uint32_t j = threadIdx.x; j < used; j += SEG_THREADS)
        hist[seg_entry(j, w, t, tiles, W, bins, last)] = h[j];
}

// Window blockIdx.y's tile blockIdx.x sorted by bits [shift, shift + bits), each bin's run
// written from its scanned entry (offs[e] + sums[e / SEG_SCAN_CHUNK]) on. The last pass writes
// w wstride + digit, or zero_key for a zero digit (bin == bins).
extern "C" __global__ void __launch_bounds__(SEG_THREADS)
msm_window_downsweep(i64 n, const uint32_t* keys_in, const uint32_t* vals_in, int shift,
                     int bits, uint32_t bins, int last, int W, const uint32_t* offs,
                     const uint32_t* sums, uint32_t wstride, uint32_t zero_key,
                     uint32_t* keys_out, uint32_t* vals_out) {
    typedef cub::BlockLoad<uint32_t, SEG_THREADS, SEG_ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE>
        Load;
    // 5 bits an inner pass: a 10-bit range in two, as the 8-bit passes' two of 4
    typedef cub::BlockRadixSort<uint32_t, SEG_THREADS, SEG_ITEMS, uint32_t, 5> Sort;
    typedef cub::BlockScan<uint32_t, SEG_THREADS> Scan;
    __shared__ union {
        typename Load::TempStorage load;
        typename Sort::TempStorage sort;
        typename Scan::TempStorage scan;
    } tmp;
    // each bin's global offset minus where its run starts in the sorted tile
    __shared__ uint32_t base[SEG_MAX_BINS];

    const int w = blockIdx.y;
    const i64 t = blockIdx.x, tiles = gridDim.x, lo = t * SEG_TILE;
    const int valid = n - lo < SEG_TILE ? (int)(n - lo) : SEG_TILE;
    const i64 at = (i64)w * n + lo;
    const uint32_t mask = (1u << bits) - 1;
    uint32_t k[SEG_ITEMS], v[SEG_ITEMS];
    // past the end: bin `mask`, at or after every real bin and after every real item of the
    // tile (blocked order), so the stable sort gives them the ranks >= valid, not written
    Load(tmp.load).Load(keys_in + at, k, valid, 0xffffffffu);
    __syncthreads();
    Load(tmp.load).Load(vals_in + at, v, valid, 0u);
    __syncthreads();

    for (int j = threadIdx.x; j < SEG_MAX_BINS; j += SEG_THREADS) base[j] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < SEG_ITEMS; j++)
        if (threadIdx.x * SEG_ITEMS + j < valid) atomicAdd(base + ((k[j] >> shift) & mask), 1u);
    __syncthreads();
    // the tile's runs: bins 2 x .. 2 x + 1 of thread x (SEG_MAX_BINS = 2 SEG_THREADS)
    const uint32_t b0 = 2 * threadIdx.x, c0 = base[b0], c1 = base[b0 + 1];
    uint32_t start;
    Scan(tmp.scan).ExclusiveSum(c0 + c1, start);
    __syncthreads();
    const uint32_t used = last ? bins + 1 : bins;
    if (b0 < used) {
        i64 e = seg_entry(b0, w, t, tiles, W, bins, last);
        base[b0] = offs[e] + sums[e / SEG_SCAN_CHUNK] - start;
    }
    if (b0 + 1 < used) {
        i64 e = seg_entry(b0 + 1, w, t, tiles, W, bins, last);
        base[b0 + 1] = offs[e] + sums[e / SEG_SCAN_CHUNK] - (start + c0);
    }
    __syncthreads();

    Sort(tmp.sort).SortBlockedToStriped(k, v, shift, shift + bits);
    const uint32_t window_key = (uint32_t)w * wstride;
#pragma unroll
    for (int j = 0; j < SEG_ITEMS; j++) {
        int rank = j * SEG_THREADS + threadIdx.x;
        if (rank < valid) {
            uint32_t bin = (k[j] >> shift) & mask;
            uint32_t pos = base[bin] + rank;
            keys_out[pos] = !last ? k[j] : bin == bins ? zero_key : window_key + k[j];
            vals_out[pos] = v[j];
        }
    }
}
