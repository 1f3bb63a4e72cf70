// Key-file point decompression on the device (decompress.cuh; driver gpu/groth16/compress.py).
#include "decompress.cuh"

typedef int64_t i64;

// out[i] = xy limbs of point i; bad = smallest index that does not decompress.
extern "C" __global__ void g1_decompress(i64 n, const uint8_t* in, uint32_t* out,
                                         unsigned long long* bad) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (decompress_g1(in + 48 * i, out + 24 * i)) atomicMin(bad, (unsigned long long)i);
}

extern "C" __global__ void g2_decompress(i64 n, const uint8_t* in, uint32_t* out,
                                         unsigned long long* bad) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (decompress_g2(in + 96 * i, out + 48 * i)) atomicMin(bad, (unsigned long long)i);
}
