#!/bin/bash
# One device call for the GPU prover (issue 8), most important first, inside one deadline:
#   1. the GPU tests of the CUDA backend (backends agree, verify, budget, OOM, fixed-base);
#   2. a 10-partition porep-lite-1m job through the real cluster (Redis, workers) on the GPU;
#   3. partition prove time per stage at 2^16 and 2^20, with setup on the device;
#   4. the 2^24 set: setup on the device, timed, and its keys proving and verifying.
# Run on the GPU machine:  source .device/env.sh && bash bench/gpu_prover_run.sh
# Results in $OUT (<= 8 files: what the device tool returns). Cubins compiled ahead
# (python3 -m gpu.cuda.precompile) are read from $ZKHIVE_CACHE_DIR.
set -u -o pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export ZKHIVE_CACHE_DIR=${ZKHIVE_CACHE_DIR:-$PWD/.zkcache}
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-430}))
left() { local l=$((END - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo $((l > 5 ? l : 5)); }
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
echo "== 1. GPU tests: the CUDA prover backend"
timeout "$(left 130)" python3 -m pytest -q -m gpu tests/gpu/test_prover_cuda.py 2>&1 \
    | tee "$OUT/test_prover_cuda.txt" | tail -12
echo "== 2. a 10-partition job through the cluster on the GPU ($((END - SECONDS)) s left)"
OMP_NUM_THREADS=2 timeout "$(left 150)" python3 bench/gpu_cluster.py --params porep-lite-1m \
    --jobs 1 --synthesis-workers 7 --out "$OUT/cluster" 2>&1 | tail -32
echo "== 3. partition prove benchmark ($((END - SECONDS)) s left)"
timeout "$(left 90)" python3 bench/gpu_prover.py --params porep-lite-64k,porep-lite-1m --runs 5 \
    --out "$OUT/gpu_prover.json" 2>&1 | tail -8
echo "== 4. the 2^24 set ($((END - SECONDS)) s left)"
timeout "$(left 400)" python3 bench/gpu_prover.py --params porep-lite-16m --runs 2 \
    --out "$OUT/gpu_prover_16m.json" 2>&1 | tail -8
echo "== done with $((END - SECONDS)) s to spare"
