#!/bin/bash
# The filecoin family on the H200 (issues 23 and 24), from the checkout's root after
# `source .device/env.sh` (ZKHIVE_CACHE_DIR holding the cubins `python -m gpu.cuda.precompile`
# made here), each step's log and JSON written under $OUT as it finishes:
#   OUT=gpu-out bash bench/filecoin_gpu_run.sh [big] [cluster] [gateway] [tests] [msm] [params] [window] [curio] [holder]
#   (default: big cluster gateway)
# big:     gpu_big.py on filecoin-32g: the compact matrices (built: ~20 s), a 32 GiB benchmark
#          sector's C1, partition 0's compact assignment, the key made on the device (dev
#          ceremony), a warm-up and $RUNS timed proofs, verified (a wrong public input rejected).
# cluster: cluster_sdr32g.py on filecoin-32g: `zkhive up` (Redis, one synthesis worker with 8
#          processes, the prover with its key made in process, the aggregate worker verifying
#          every partition), $JOBS jobs at once, one prover process a device.
# gateway: gateway.py on filecoin-2k: a 2 KiB sector sealed, its Commit2 input sent through cuzk's
#          Prove from a gRPC client built from our .proto, the proof verified with the .vk file.
# tests:   the GPU suite (`pytest -m gpu tests/gpu`), its time.
# msm:     gpu_msm.py, G1 at 2^24 and 2^26 ($MSM_PLAN), beside sppark's figures on this card.
# split:   gpu_split_msm.py at G1 2^25 (a query larger than a chunk): the split's tail engine
#          against the dense engine by witness mix ($SPLIT_MIXES), where the choice is made.
# params:  params_up.py: a 32 GiB .params file written, the page cache dropped, `zkhive up` with
#          preload = ["porep-32g"] to a ready prover, $PARAMS_JOBS job(s) verified with the .vk.
#          PARAMS_MIRROR=1: then the compressed mirror the prover wrote, `up` again from it
#          (params_up.py --mirror; the report's "mirror").
# window:  gpu_big.py on window-post-32g: a full WindowPoSt partition (2,349 benchmark sectors),
#          the key made on the device, $RUNS timed proofs verified (issue 37).
# curio:   gpu_curio.py: PoRep's and WinningPoSt's 32 GiB keys resident together, the ledger of
#          all four kinds, WinningPoSts through the gateway while $JOBS PoRep jobs load the device.
# holder:  holder_restart.py ($STANDBY=on: with [worker] prover_standby): `zkhive up` with [gpu] key_holder on (the 32 GiB key made in the
#          holder's process), $HOLDER_JOBS jobs, the prover SIGKILLed after $KILL_AFTER partitions
#          under the keeper: seconds from the kill to the first partition proved, every job
#          verified; then `zkhive restart prove-cuda0` mid-job the same way (HOLDER=off: baseline).
# Compare with sdr-32g: 2.13 s a partition, 21.3 s a job (docs/performance.md).
set -u -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(big cluster gateway)
for step in "${steps[@]}"; do
    t0=$(date +%s)
    case "$step" in
    big)
        timeout "${BIG_S:-240}" python3 bench/gpu_big.py --params "${PARAMS:-filecoin-32g}" \
            --runs "${RUNS:-3}" --out "$OUT/filecoin-big.json" \
            $(for v in ${BIG_VARIANTS:-}; do printf -- '--variant %s ' "$v"; done) \
            > "$OUT/filecoin-big.log" 2>&1 ;;
    cluster)
        OMP_NUM_THREADS=2 timeout "${CLUSTER_S:-300}" python3 bench/cluster_sdr32g.py \
            --params "${PARAMS:-filecoin-32g}" --jobs "${JOBS:-3}" --configs "${CONFIGS:-1}" \
            --budget-s "$(( ${CLUSTER_S:-300} - 20 ))" --out "$OUT/cluster" > "$OUT/cluster.log" 2>&1 ;;
    gateway)
        timeout "${GATEWAY_S:-180}" python3 bench/gateway.py --params filecoin-2k --devices cuda:0 \
            --setup-backend cuda --jobs 2 --calls 20 > "$OUT/gateway.log" 2>&1 ;;
    tests)
        timeout "${TESTS_S:-240}" python3 -m pytest -q -m gpu tests/gpu --durations=8 -p no:cacheprovider \
            > "$OUT/gpu-tests.log" 2>&1 ;;
    msm)
        timeout "${MSM_S:-240}" python3 bench/gpu_msm.py --plan "${MSM_PLAN:-g1:24,g1:26}" \
            --out "$OUT/msm.json" > "$OUT/msm.log" 2>&1 ;;
    split)
        timeout "${SPLIT_S:-150}" python3 bench/gpu_split_msm.py --g1 "${SPLIT_LOG:-25}" --g2 0 \
            --modes on,dense,auto --mixes "${SPLIT_MIXES:-p90,p97,p99,dense}" --runs 3 \
            --out "$OUT/split.json" > "$OUT/split.log" 2>&1 ;;
    params)
        timeout "${PARAMS_S:-$([ "${PARAMS_MIRROR:-0}" = 1 ] && echo 900 || echo 420)}" \
            python3 bench/params_up.py --params filecoin-32g --dir "${PARAMS_DIR:-/tmp/filparams}" \
            --jobs "${PARAMS_JOBS:-1}" --out "$OUT/params-up.json" \
            $([ "${PARAMS_MIRROR:-0}" = 1 ] && echo --mirror) > "$OUT/params-up.log" 2>&1 ;;
    window)
        timeout "${WINDOW_S:-360}" python3 bench/gpu_big.py --params window-post-32g --runs "${RUNS:-3}" \
            --out "$OUT/window-big.json" > "$OUT/window-big.log" 2>&1 ;;
    curio)
        timeout "${CURIO_S:-420}" python3 bench/gpu_curio.py --jobs "${JOBS:-4}" --out "$OUT/curio" \
            --winning "${WINNING:-3}" --spacing "${SPACING:-2}" \
            > "$OUT/curio.log" 2>&1 ;;
    holder)
        OMP_NUM_THREADS=2 timeout "${HOLDER_S:-540}" python3 bench/holder_restart.py --params "${PARAMS:-filecoin-32g}" \
            --jobs "${HOLDER_JOBS:-2}" --kill-after "${KILL_AFTER:-4}" --holder "${HOLDER:-on}" \
            --standby "${STANDBY:-off}" --out "$OUT/holder" > "$OUT/holder.log" 2>&1 ;;
    *)
        echo "usage: bash bench/filecoin_gpu_run.sh [big] [cluster] [gateway] [tests] [msm] [params] [window] [curio] [holder]" >&2; exit 2 ;;
    esac
    echo "$step: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
done
