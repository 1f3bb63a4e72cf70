// Parameter files on the device (driver gpu/groth16/bellperson.py): the point checks of
// subgroup.cuh while a file streams in (FileQuery.fill_device, points="full"), and resident bases
// back to canonical xy limbs for writing a key made on the device (device_rows).
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

// out[i] = canonical xy limbs of the Montgomery affine base i (identity: all zero).
#define STORE_KERNEL(G, F, L)                                                                   \
    extern "C" __global__ void G##_store_bases(i64 n, const affine_t<F>* in, uint32_t* out) {  \
        i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;                                    \
        if (i >= n) return;                                                                    \
        store_affine<F>(in[i], out + (i64)(L) * i);                                            \
    }
STORE_KERNEL(g1, fq_t, 24)
STORE_KERNEL(g2, fq2_t, 48)
