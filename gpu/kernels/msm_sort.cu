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
