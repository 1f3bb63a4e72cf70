// Host build of the parameter-file point checks (gpu/kernels/subgroup.cuh), OpenMP: the CPU
// tests of the code the device runs, and the checks of a key the CPU backend proves with.
#include <stdint.h>
#include "subgroup.cuh"

typedef int64_t i64;

template <class F, int L>
static i64 run(i64 n, const uint32_t* xy, int mode, int* why) {
    i64 bad = -1;
    int reason = 0;
#pragma omp parallel for schedule(dynamic, 256)
    for (i64 i = 0; i < n; i++) {
        int w = check_point<F>(xy + (i64)L * i, mode);
        if (w) {
#pragma omp critical
            if (bad < 0 || i < bad) { bad = i; reason = w; }
        }
    }
    *why = reason;
    return bad;
}

extern "C" {
i64 host_check_g1(i64 n, const uint32_t* xy, int mode, int* why) { return run<fq_t, 24>(n, xy, mode, why); }
i64 host_check_g2(i64 n, const uint32_t* xy, int mode, int* why) { return run<fq2_t, 48>(n, xy, mode, why); }
}
