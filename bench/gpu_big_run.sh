#!/bin/bash
# The issue-16 device call for the 32 GiB partition: the new GPU tests, sdr-32g-1 (checked against
# the host-part setup), then sdr-32g, then the GPU tests the change touches.
# source .device/env.sh && OUT=gpu-out bash bench/gpu_big_run.sh
set -u -o pipefail
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
timeout 80 python3 -m pytest -q -x -m gpu tests/gpu/test_compact_cuda.py 2>&1 | tail -15
timeout 140 python3 bench/gpu_big.py --params sdr-32g-1 --runs 3 --compare-host sdr-32g-1 --out "$OUT/big-2_23.json" || exit 1
timeout 300 python3 bench/gpu_big.py --params sdr-32g --runs 3 --out "$OUT/big-2_27.json"
timeout 65 python3 -m pytest -q -m gpu tests/gpu/test_prover_cuda.py tests/gpu/test_split_msm.py 2>&1 | tail -3
