// The chunked MSM's bucket merge (gpu/cuda/msm.py DenseEngine), for host and device: a chunk's
// buckets are made as any MSM's (msm_core.cuh), then each bucket the chunk wrote (counts[k] != 0)
// is added into the MSM's running buckets, one thread a bucket, and the window reduction runs
// once after the last chunk. Adding each run into its bucket inside the accumulation loop
// instead measured 2.4x slower on the H200 (issue 25, call 1): a warp's lanes end their runs at
// different trips, so nearly every trip ran the full addition for some lane.
#pragma once
#include "curve.cuh"

template <class F>
CURVE_FN void merge_bucket(int64_t k, const uint32_t* counts, const xyzz_t<F>* chunk,
                           xyzz_t<F>* acc) {
    if (counts && !counts[k]) return;  // counts = null: every bucket (the radix sort zeroes them)
    xyzz_t<F> b = acc[k];
    b.add(chunk[k]);
    acc[k] = b;
}
