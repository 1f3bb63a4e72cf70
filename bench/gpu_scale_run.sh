#!/bin/bash
# One device call for issue 16 (the prover at real scale), most important first, in one deadline:
#   1. GPU tests: split MSM (every mix), device decompression, the CUDA prover backend;
#   2. split MSM against plain Pippenger by witness mix (G1 2^24, G2 2^22);
#   3. partition prove time, plain vs split, porep-lite-1m and the SDR-shaped sdr-32g-1 (2^23);
#   4. a saturated cluster run (4 jobs x 10 porep-lite-1m partitions): prove-ahead off, on, and
#      two provers sharing the device (busy fraction from the device's own stage intervals);
#   5. porep-lite-16m (2^24) plain vs split, if time is left.
# source .device/env.sh && bash bench/gpu_scale_run.sh   (cubins precompiled and carried)
set -u -o pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export ZKHIVE_CACHE_DIR=${ZKHIVE_CACHE_DIR:-$PWD/.zkcache}
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-500}))
left() { local l=$((END - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo $((l > 5 ? l : 5)); }
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
echo "== 1. GPU tests"
timeout "$(left 150)" python3 -m pytest -q -m gpu tests/gpu/test_split_msm.py tests/gpu/test_decompress.py \
    tests/gpu/test_prover_cuda.py 2>&1 | tee "$OUT/tests.txt" | tail -15
echo "== 2. split vs plain MSM ($((END - SECONDS)) s left)"
timeout "$(left 80)" python3 bench/gpu_split_msm.py --g1 24 --g2 22 --runs 3 --out "$OUT/split_msm.json" 2>&1 | tail -10
echo "== 3. partitions plain vs split ($((END - SECONDS)) s left)"
timeout "$(left 130)" python3 bench/gpu_prover.py --params porep-lite-1m,sdr-32g-1 --split off,auto --runs 3 \
    --out "$OUT/gpu_prover.json" 2>&1 | tail -16
echo "== 4. cluster: prove-ahead off / on / two provers ($((END - SECONDS)) s left)"
for cfg in "0 1" "1 1" "1 2"; do
    set -- $cfg
    OMP_NUM_THREADS=2 timeout "$(left 60)" python3 bench/gpu_cluster.py --params porep-lite-1m --jobs 4 \
        --synthesis-workers 7 --prove-ahead $1 --provers-per-device $2 --out "/tmp/c-a$1-p$2" > "/tmp/c-a$1-p$2.log" 2>&1
    cp "/tmp/c-a$1-p$2/cluster.json" "$OUT/cluster-a$1-p$2.json"
    python3 -c "import json; r = json.load(open('$OUT/cluster-a$1-p$2.json')); print({k: r.get(k) for k in ('prove_ahead', 'provers_per_device', 'wall_s', 'seconds_per_proof', 'all_verify', 'busy_fraction', 'busy_fraction_device_span', 'nvidia_smi_util_mean', 'up_s', 'down_rc')})" || tail -8 "/tmp/c-a$1-p$2.log"
done
echo "== 5. porep-lite-16m plain vs split ($((END - SECONDS)) s left)"
timeout "$(left 200)" python3 bench/gpu_prover.py --params porep-lite-16m --split off,auto --runs 2 \
    --out "$OUT/gpu_prover_16m.json" 2>&1 | tail -8
echo "== done with $((END - SECONDS)) s to spare"
