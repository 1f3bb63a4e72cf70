#!/bin/bash
# The second issue-16 device call: the balanced transposed product (pieces) checked at 2^23 against
# the host-part setup, the 32 GiB partition again (and refused on an 80 GiB card's ledger), every
# GPU test, porep-lite-16m after this branch.
# source .device/env.sh && OUT=gpu-out bash bench/gpu_big_run2.sh
set -u -o pipefail
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
timeout 100 python3 bench/gpu_big.py --params sdr-32g-1 --runs 3 --compare-host sdr-32g-1 --out "$OUT/big2-2_23.json" || exit 1
timeout 150 python3 bench/gpu_big.py --params sdr-32g --runs 5 --refuse-on-gib 80 --out "$OUT/big2-2_27.json"
timeout 200 python3 -m pytest -q -m gpu tests/gpu 2>&1 | tail -4
timeout 130 python3 bench/gpu_prover.py --params porep-lite-16m --runs 2 --out "$OUT/porep16m.json" 2>&1 | tail -4
