// A .params mirror's compressed points into a resident base buffer (driver gpu/cuda/params.py
// _fill_mirror; the file: gpu/groth16/mirror.py). One thread a point: decompress (y = sqrt(x^3
// + b): a point that decompresses is on the curve), with FULL the subgroup check ([r] P = O,
// subgroup.cuh) too, and store it Montgomery affine at row idx[j] (idx null: row j) of out, the
// layout load_bases writes. The identity is refused (a .params holds none; the rows the density
// leaves out were zeroed before). bad = the smallest (j << 3 | why): 1 flags (not compressed, or
// the point at infinity), 2 x >= p, 3 no curve point has that x, 4 not in the subgroup.
#pragma once
#include "decompress.cuh"
#ifdef MIRROR_FULL
#include "subgroup.cuh"
#endif

typedef int64_t i64;

template <class F, int W>
CURVE_FN int mirror_point(const uint8_t* in, affine_t<F>* p);

template <>
CURVE_FN int mirror_point<fq_t, 48>(const uint8_t* in, affine_t<fq_t>* p) {
    bool inf;
    int why = decompress_g1_affine(in, p, &inf);
    return why ? why : (inf ? 1 : 0);
}

template <>
CURVE_FN int mirror_point<fq2_t, 96>(const uint8_t* in, affine_t<fq2_t>* p) {
    bool inf;
    int why = decompress_g2_affine(in, p, &inf);
    return why ? why : (inf ? 1 : 0);
}

#ifdef __CUDACC__   // the kernel body (the host build, compress_host.cpp, takes mirror_point only)
template <class F, int W, bool FULL>
__device__ __forceinline__ void mirror_points(i64 m, const uint8_t* in, const int* idx,
                                              affine_t<F>* out, unsigned long long* bad) {
    i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    affine_t<F> p;
    int why = mirror_point<F, W>(in + (i64)W * j, &p);
#ifdef MIRROR_FULL
    if (FULL && !why && !in_subgroup(p)) why = 4;
#endif
    if (why) {
        atomicMin(bad, ((unsigned long long)j << 3) | (unsigned long long)why);
        p = affine_t<F>::identity();
    }
    out[idx ? (i64)idx[j] : j] = p;
}
#endif
