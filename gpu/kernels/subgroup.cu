// Parameter-file point checks on the device (subgroup.cuh; driver gpu/groth16/bellperson.py
// FileQuery.fill_device with points="full").
#include "subgroup.cuh"

typedef int64_t i64;

// bad = the smallest index i (<< 2 | reason) whose point fails check_point.
#define CHECK_KERNEL(G, F, L)                                                                   \
    extern "C" __global__ void G##_check_points(i64 n, const uint32_t* xy, int mode,           \
                                                unsigned long long* bad) {                     \
        i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;                                    \
        if (i >= n) return;                                                                    \
        int why = check_point<F>(xy + (i64)(L) * i, mode);                                     \
        if (why) atomicMin(bad, ((unsigned long long)i << 2) | (unsigned long long)why);       \
    }
CHECK_KERNEL(g1, fq_t, 24)
CHECK_KERNEL(g2, fq2_t, 48)

