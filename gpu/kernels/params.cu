// Parameter files on the device (driver gpu/groth16/bellperson.py): a file's points into our
// layout as they stream in (FileQuery.fill_device), and resident bases back to canonical xy limbs
// for writing a key made on the device (device_rows). The subgroup check is subgroup.cu (its
// [r] P loop compiles slowly; only points="full" loads it).
#include "curve_io.cuh"

typedef int64_t i64;

// out[i] = canonical xy limbs of the Montgomery affine base i (identity: all zero).
#define STORE_KERNEL(G, F, L)                                                                   \
    extern "C" __global__ void G##_store_bases(i64 n, const affine_t<F>* in, uint32_t* out) {  \
        i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;                                    \
        if (i >= n) return;                                                                    \
        store_affine<F>(in[i], out + (i64)(L) * i);                                            \
    }
STORE_KERNEL(g1, fq_t, 24)
STORE_KERNEL(g2, fq2_t, 48)

// A chunk of a .params section as the file holds it (ZCash uncompressed, big-endian: G1 x || y,
// G2 x.c1 x.c0 y.c1 y.c0), one thread a point: each coordinate byte-reversed into our xy layout
// (little-endian, G2 c0 before c1) at row idx[j] - v0 of xy (idx null: row j), ready for
// load_bases. A point with a flag bit set (infinity, compressed, sort) is refused: bad = j.
template <int COORDS>
__device__ __forceinline__ void load_file_points(i64 m, const uint8_t* be, const int* idx, i64 v0,
                                                 uint8_t* xy, unsigned long long* bad) {
    i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const uint8_t* src = be + (i64)48 * COORDS * j;
    if (src[0] & 0xE0) {
        atomicMin(bad, (unsigned long long)j);
        return;
    }
    i64 row = idx ? (i64)idx[j] - v0 : j;
    uint8_t* dst = xy + (i64)48 * COORDS * row;
    for (int c = 0; c < COORDS; c++) {
        const uint8_t* s = src + 48 * (COORDS == 4 ? (c ^ 1) : c);
        uint8_t* o = dst + 48 * c;
        for (int b = 0; b < 48; b++) o[b] = s[47 - b];
    }
}

extern "C" __global__ void g1_load_file_points(i64 m, const uint8_t* be, const int* idx, i64 v0,
                                               uint8_t* xy, unsigned long long* bad) {
    load_file_points<2>(m, be, idx, v0, xy, bad);
}
extern "C" __global__ void g2_load_file_points(i64 m, const uint8_t* be, const int* idx, i64 v0,
                                               uint8_t* xy, unsigned long long* bad) {
    load_file_points<4>(m, be, idx, v0, xy, bad);
}

// out[i] = base i as a .params file holds it: ZCash uncompressed, big-endian (G1 x || y, G2
// x.c1 x.c0 y.c1 y.c0), the identity as 0x40 then zeros. The writer's conversion on the device.
template <class F, int COORDS>
__device__ __forceinline__ void store_file_points(i64 n, const affine_t<F>* in, uint8_t* out) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t xy[12 * COORDS];
    store_affine<F>(in[i], xy);
    uint32_t any = 0;
    for (int k = 0; k < 12 * COORDS; k++) any |= xy[k];
    uint8_t* o = out + (i64)48 * COORDS * i;
    for (int c = 0; c < COORDS; c++) {
        const uint32_t* s = xy + 12 * (COORDS == 4 ? (c ^ 1) : c);
        for (int b = 0; b < 48; b++) o[48 * c + b] = (uint8_t)(s[(47 - b) >> 2] >> (8 * ((47 - b) & 3)));
    }
    if (!any) o[0] = 0x40;
}

extern "C" __global__ void g1_store_file_points(i64 n, const affine_t<fq_t>* in, uint8_t* out) {
    store_file_points<fq_t, 2>(n, in, out);
}
extern "C" __global__ void g2_store_file_points(i64 n, const affine_t<fq2_t>* in, uint8_t* out) {
    store_file_points<fq2_t, 4>(n, in, out);
}
