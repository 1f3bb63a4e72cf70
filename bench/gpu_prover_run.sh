#!/bin/bash
# One device call for the GPU prover (issue 8): the GPU tests of the backend, the partition
# prove benchmark, and a multi-partition job through the real cluster. Run on the GPU machine:
#   source .device/env.sh && bash bench/gpu_prover_run.sh [PARAMS_FOR_CLUSTER]
# Results go to $OUT (or ./gpu-out; at most 7 files, as the device tool returns 8). Cubins
# compiled ahead (python3 -m gpu.cuda.precompile) are read from $ZKHIVE_CACHE_DIR.
set -u -o pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export ZKHIVE_CACHE_DIR=${ZKHIVE_CACHE_DIR:-$PWD/.zkcache}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv
echo "== GPU tests: the CUDA prover backend"
timeout "${TEST_S:-200}" python3 -m pytest -q -m gpu tests/gpu/test_prover_cuda.py -x 2>&1 \
    | tee "$OUT/test_prover_cuda.txt" | tail -15
echo "== partition prove benchmark"
timeout "${PROVER_S:-200}" python3 bench/gpu_prover.py --params "${PROVER_SETS:-porep-lite-64k,porep-lite-1m}" \
    --runs 5 --out "$OUT/gpu_prover.json" 2>&1 | tail -14
echo "== a job through the cluster"
# synthesis workers share the host's cores: two OpenMP threads each
OMP_NUM_THREADS=2 timeout "${CLUSTER_S:-240}" python3 bench/gpu_cluster.py --params "${1:-porep-lite-1m}" \
    --jobs "${JOBS:-1}" --synthesis-workers "${SYNTH:-7}" --out "$OUT/cluster" 2>&1 | tail -40
