#!/bin/bash
# The filecoin family on the H200 (issue 23's Must: the 32 GiB benchmark partition proved and
# verified; the 10-partition job through the cluster), in two device calls from the checkout's
# root after `source .device/env.sh` (ZKHIVE_CACHE_DIR holding the precompiled cubins):
#   OUT=gpu-out bash bench/filecoin_gpu_run.sh big       # gpu_big.py: filecoin-2k, then filecoin-32g
#   OUT=gpu-out bash bench/filecoin_gpu_run.sh cluster   # cluster_sdr32g.py on filecoin-32g, 3 jobs
# big: per set the compact matrices (built: ~30 s at 32 GiB), a sample sector's C1 (2 KiB sealed,
# 32 GiB a benchmark sector), partition 0's compact assignment, the key made on the device
# (dev ceremony), a warm-up and 3 timed proofs, verified (and a wrong public input rejected).
# cluster: `zkhive up` (Redis, one synthesis worker with PW processes, the prover with its key made
# in process, the aggregate worker verifying every partition), JOBS jobs at once; configs 2 then 1
# prover processes a device; the table last. Compare with sdr-32g: 2.13 s a partition, 21.3 s a job.
set -u -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
case "${1:-big}" in
big)
    timeout 580 python3 bench/gpu_big.py --params "${PARAMS:-filecoin-2k,filecoin-32g}" --runs 3 \
        --out "$OUT/filecoin-big.json" 2>&1 | tee "$OUT/filecoin-big.log" ;;
cluster)
    PARAMS=${PARAMS:-filecoin-32g} JOBS=${JOBS:-3} CONFIGS=${CONFIGS:-2,1} bash bench/cluster_sdr32g.sh ;;
*)
    echo "usage: bash bench/filecoin_gpu_run.sh big|cluster" >&2; exit 2 ;;
esac
