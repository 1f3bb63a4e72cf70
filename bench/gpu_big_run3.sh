#!/bin/bash
# The third issue-16 device call: the setup's fixed-base with batched affine conversion
# (fixed_base_batch.cuh), checked by the GPU tests (device key == host key, same proof bytes) and
# timed on the 32 GiB partition.
# source .device/env.sh && OUT=gpu-out bash bench/gpu_big_run3.sh
set -u -o pipefail
timeout 60 python3 -m pytest -q -x -m gpu tests/gpu/test_compact_cuda.py 2>&1 | tail -3
timeout 130 python3 bench/gpu_big.py --params sdr-32g --runs 3 --out "$OUT/big3-2_27.json"
