// Host build of the key-file point decompression (gpu/kernels/decompress.cuh): CPU tests of the
// code the device runs, and the OpenMP path where no device is current.
#include <stdint.h>
#include "decompress.cuh"
#include "mirror.cuh"

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

// mirror.cuh's mirror_point on the host (the .params mirror's CPU path and the device code's
// CPU test): out canonical xy; returns the smallest (i << 3 | why), or -1.
template <class F, int W, int L>
static i64 mirror_run(i64 n, const uint8_t* in, uint32_t* out) {
    i64 bad = -1;
#pragma omp parallel for schedule(static)
    for (i64 i = 0; i < n; i++) {
        affine_t<F> p;
        int why = mirror_point<F, W>(in + W * i, &p);
        for (int k = 0; k < L; k++) out[L * i + k] = 0;
        if (why) {
#pragma omp critical
            if (bad < 0 || ((i << 3) | why) < bad) bad = (i << 3) | why;
        } else {
            store_affine<F>(p, out + L * i);
        }
    }
    return bad;
}

extern "C" {
i64 host_mirror_g1(i64 n, const uint8_t* in, uint32_t* out) { return mirror_run<fq_t, 48, 24>(n, in, out); }
i64 host_mirror_g2(i64 n, const uint8_t* in, uint32_t* out) { return mirror_run<fq2_t, 96, 48>(n, in, out); }
i64 host_decompress_g1(i64 n, const uint8_t* in, uint32_t* out) { return run<48>(n, in, out, 24, decompress_g1); }
i64 host_decompress_g2(i64 n, const uint8_t* in, uint32_t* out) { return run<96>(n, in, out, 48, decompress_g2); }
}
