#!/bin/bash
# Hardware counters of the kernels that hold the 32 GiB partition's chip time (issue 40 item 1),
# on a lent card whose runtime lets Nsight Compute read them (Firecracker: the H100;
# /work/.library/device/H200.md): what the transforms and the affine additions wait on, where
# timing variants could only guess. From the checkout's root with `.device` and `.zkc` carried:
#   bash bench/ncu_profile.sh [ntt] [ones] [dense]       (default: all three; $OUT set by the tool)
# ntt:   compute_h at 2^$NTT_LOG (default 27) twice; the second's first eight passes (a's inverse
#        DIF, then its forward DIT: the pass over bits 0..8 and the three of 6 bits each).
# ones:  the split MSM's 1s by affine chains (G1 2^26, G2 2^25, 0/1 scalars), one launch each.
# dense: the H query's dense engine at 2^25: one slice's rounds (prefix and apply, rounds 0-4).
# Clocks are left alone (--clock-control none, METHOD.md). One text report a target under $OUT.
set -u -o pipefail
OUT=${OUT:?OUT is the output folder of the device tool}
mkdir -p .zkcache "$OUT"
[ -f .zkc/cubin.txz ] && tar xJf .zkc/cubin.txz -C .zkcache
# shellcheck disable=SC1091
source .device/env.sh
export ZKHIVE_CACHE_DIR=$PWD/.zkcache PYTHONUNBUFFERED=1
python3 -m gpu.cuda.precompile --all --jobs "$(nproc)" > "$OUT/precompile.log" 2>&1
echo "precompile: rc=$?" | tee "$OUT/steps.txt"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu on this machine" | tee -a "$OUT/steps.txt"; exit 1; }
"$NCU" --version | tail -1 | tee -a "$OUT/steps.txt"
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats
          --section LaunchStats --section Occupancy --section SchedulerStats
          --section WarpStateStats --section MemoryWorkloadAnalysis
          --section MemoryWorkloadAnalysis_Tables)
METRICS=sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__sass_inst_executed_op_shared_ld.sum,sm__sass_inst_executed_op_shared_st.sum,sm__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_integer_imad.sum
profile() {  # name kernel-regex skip count command...
    local name=$1 kre=$2 skip=$3 count=$4
    shift 4
    local t0
    t0=$(date +%s)
    timeout "${NCU_S:-200}" "$NCU" --clock-control none --target-processes all \
        -k "regex:$kre" --launch-skip "$skip" --launch-count "$count" \
        "${SECTIONS[@]}" --metrics "$METRICS" --print-details all "$@" \
        > "$OUT/ncu-$name.txt" 2> "$OUT/ncu-$name.err"
    echo "$name: rc=$? in $(( $(date +%s) - t0 )) s, $(grep -c 'Section: GPU Speed Of Light' "$OUT/ncu-$name.txt") kernels" | tee -a "$OUT/steps.txt"
}
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(ntt ones dense)
for step in "${steps[@]}"; do
    case "$step" in
    ntt) profile ntt 'ntt_di[tf]_pass4' 24 8 python3 - "${NTT_LOG:-27}" <<'EOF'
import sys
import numpy as np
from gpu.cuda import loader
from gpu.cuda.memory import DeviceBuffer
loader.init_context()
cuda = loader.driver()
from gpu.cuda.ntt import NttEngine
log_n = int(sys.argv[1]); n = 1 << log_n
rng = np.random.default_rng()
with NttEngine() as eng:
    eng.prepare_h(log_n)
    bufs = [DeviceBuffer(32 * n) for _ in range(3)]
    for _ in range(2):  # the first is the warm-up, the second's passes are profiled
        for buf in bufs:  # random canonical values (< 2^254 < r), never zeros
            v = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
            v[:, 3] &= np.uint64((1 << 62) - 1)
            buf.upload(v)
        eng.compute_h_device(*bufs, log_n)
        cuda.Context.synchronize()
    print("compute_h 2^%d twice" % log_n)
EOF
    ;;
    ones) ZKHIVE_MSM_ONES_AFFINE=1 profile ones 'g[12]_ones_chains' 1 3 \
              python3 bench/gpu_split_msm.py --g1 26 --g2 25 --runs 1 --mixes bits \
              --modes on+ones --out "$OUT/split.json" ;;
    dense) profile dense 'g1_pair_(prefix|apply)' 10 10 \
               python3 bench/gpu_dense_steps.py --log-n 25 --runs 1 --out "$OUT/dense.json" ;;
    *) echo "unknown step $step" | tee -a "$OUT/steps.txt" ;;
    esac
done
