// .params mirror points onto the device, points="curve" (mirror.cuh; driver gpu/cuda/params.py).
#include "mirror.cuh"

extern "C" __global__ void g1_mirror_points(i64 m, const uint8_t* in, const int* idx,
                                            affine_t<fq_t>* out, unsigned long long* bad) {
    mirror_points<fq_t, 48, false>(m, in, idx, out, bad);
}
extern "C" __global__ void g2_mirror_points(i64 m, const uint8_t* in, const int* idx,
                                            affine_t<fq2_t>* out, unsigned long long* bad) {
    mirror_points<fq2_t, 96, false>(m, in, idx, out, bad);
}
