#!/bin/bash
# The filecoin family on the H200 (issues 23 and 24), from the checkout's root after
# `source .device/env.sh` (ZKHIVE_CACHE_DIR holding the cubins `python -m gpu.cuda.precompile`
# made here), each step's log and JSON written under $OUT as it finishes:
#   OUT=gpu-out bash bench/filecoin_gpu_run.sh [big] [cluster] [gateway]   # default: all three
# big:     gpu_big.py on filecoin-32g: the compact matrices (built: ~20 s), a 32 GiB benchmark
#          sector's C1, partition 0's compact assignment, the key made on the device (dev
#          ceremony), a warm-up and $RUNS timed proofs, verified (a wrong public input rejected).
# cluster: cluster_sdr32g.py on filecoin-32g: `zkhive up` (Redis, one synthesis worker with 8
#          processes, the prover with its key made in process, the aggregate worker verifying
#          every partition), $JOBS jobs at once, one prover process a device.
# gateway: gateway.py on filecoin-2k: a 2 KiB sector sealed, its Commit2 input sent through cuzk's
#          Prove from a gRPC client built from our .proto, the proof verified with the .vk file.
# Compare with sdr-32g: 2.13 s a partition, 21.3 s a job (docs/performance.md).
set -u -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(big cluster gateway)
for step in "${steps[@]}"; do
    t0=$(date +%s)
    case "$step" in
    big)
        timeout "${BIG_S:-240}" python3 bench/gpu_big.py --params "${PARAMS:-filecoin-32g}" \
            --runs "${RUNS:-3}" --out "$OUT/filecoin-big.json" > "$OUT/filecoin-big.log" 2>&1 ;;
    cluster)
        OMP_NUM_THREADS=2 timeout "${CLUSTER_S:-300}" python3 bench/cluster_sdr32g.py \
            --params "${PARAMS:-filecoin-32g}" --jobs "${JOBS:-3}" --configs "${CONFIGS:-1}" \
            --budget-s "$(( ${CLUSTER_S:-300} - 20 ))" --out "$OUT/cluster" > "$OUT/cluster.log" 2>&1 ;;
    gateway)
        timeout "${GATEWAY_S:-180}" python3 bench/gateway.py --params filecoin-2k --devices cuda:0 \
            --setup-backend cuda --jobs 2 --calls 20 > "$OUT/gateway.log" 2>&1 ;;
    *)
        echo "usage: bash bench/filecoin_gpu_run.sh [big] [cluster] [gateway]" >&2; exit 2 ;;
    esac
    echo "$step: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
done
