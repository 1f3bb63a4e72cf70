#!/bin/bash
# The second issue-16 device call: split MSM with the tail window fix, two-thread prove-ahead in the cluster.
# source .device/env.sh && OUT=gpu-out bash bench/gpu_scale_run2.sh
set -u -o pipefail
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 40 python3 -m pytest -q -m gpu tests/gpu/test_split_msm.py 2>&1 | tail -2
timeout 45 python3 bench/gpu_split_msm.py --g1 24 --g2 22 --runs 3 --mixes sdr-l,bits --out "$OUT/split_msm2.json" 2>&1 | tail -4
OMP_NUM_THREADS=2 timeout 60 python3 bench/gpu_cluster.py --params porep-lite-1m --jobs 4 --synthesis-workers 7 \
  --prove-ahead 1 --provers-per-device 1 --out /tmp/c2 > /tmp/c2.log 2>&1; cp /tmp/c2/cluster.json "$OUT/cluster2-a1-p1.json"
python3 -c "import json; r = json.load(open('$OUT/cluster2-a1-p1.json')); print({k: r.get(k) for k in ('wall_s', 'seconds_per_proof', 'all_verify', 'busy_fraction', 'busy_fraction_device_span', 'device_busy_s', 'nvidia_smi_util_mean', 'down_rc')})" || tail -8 /tmp/c2.log
