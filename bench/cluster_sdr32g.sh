#!/usr/bin/env bash
# Issue 16's cluster Must on the H200 host, in one device call (after `source .device/env.sh`,
# from the checkout's root, with ZKHIVE_CACHE_DIR holding the precompiled cubins):
#   the 10-partition sdr-32g job through the real cluster (`zkhive up`: Redis, one synthesis
#   worker with 8 processes on the 16 cores, the prover with the key made in its own process,
#   the aggregate worker verifying every partition against the published vk), 3 jobs submitted
#   at once; first with gpu_workers_per_device = 2, then (if the time left allows) 1; the table last.
# Env: PARAMS (sdr-32g), JOBS (3), CONFIGS (2,1), PW (8 synthesis processes), BUDGET_S (530).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export ZKHIVE_BENCH_DIR=${ZKHIVE_BENCH_DIR:-/tmp/zkhive-sdr32g}
export ZKHIVE_STATE_DIR=$ZKHIVE_BENCH_DIR/state
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee "$OUT/log"
python3 bench/cluster_sdr32g.py --params "${PARAMS:-sdr-32g}" --jobs "${JOBS:-3}" \
    --configs "${CONFIGS:-2,1}" --partition-workers "${PW:-8}" --budget-s "${BUDGET_S:-530}" \
    --ready-timeout "${READY_S:-240}" --timeout "${JOB_S:-240}" \
    --out "$OUT" 2>&1 | tee -a "$OUT/log"
rc=$?
# the device stops here whatever happened: nothing of ours may outlive the call
for d in "$ZKHIVE_BENCH_DIR"/up-*; do [ -d "$d" ] && python3 -m cluster.cli down --run-dir "$d" >/dev/null 2>&1; done
exit $rc
