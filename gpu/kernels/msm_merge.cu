// G1 bucket merge of the chunked dense MSM (msm_merge.cuh): acc[k] += chunk[k] where counts[k].
#include "curve_io.cuh"
#include "msm_merge.cuh"

extern "C" __global__ void g1_merge_buckets(int64_t K, const uint32_t* counts,
                                            const xyzz_t<fq_t>* chunk, xyzz_t<fq_t>* acc) {
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < K) merge_bucket<fq_t>(k, counts, chunk, acc);
}
