// Host build of the key-file point decompression (gpu/kernels/decompress.cuh): CPU tests of the
// code the device runs, and the OpenMP path where no device is current.
#include <stdint.h>
#include "decompress.cuh"

typedef int64_t i64;

template <int W, class Fn>
static i64 run(i64 n, const uint8_t* in, uint32_t* out, int L, Fn fn) {
    i64 bad = -1;
#pragma omp parallel for schedule(static)
    for (i64 i = 0; i < n; i++) {
        if (fn(in + W * i, out + L * i)) {
#pragma omp critical
            if (bad < 0 || i < bad) bad = i;
        }
    }
    return bad;
}

extern "C" {
i64 host_decompress_g1(i64 n, const uint8_t* in, uint32_t* out) { return run<48>(n, in, out, 24, decompress_g1); }
i64 host_decompress_g2(i64 n, const uint8_t* in, uint32_t* out) { return run<96>(n, in, out, 48, decompress_g2); }
}
