#!/bin/bash
# One call of the next device lease's plan (docs/performance.md, "Waiting for a device"), run on
# the lent machine from the checkout's root with `.device` and `.zkc` carried:
#   bash bench/device_call.sh N        (N = 1 .. 4; $OUT set by the device tool)
# 1: the GPU suite, then WinningPoSts under four PoRep jobs (curio); 2: `zkhive up` from a
# 32 GiB .params and its mirror; 3: the partition (big) with the witness MSMs beside the NTTs
# (ZKHIVE_SIDE_EARLY=1) and beside the H MSM (the default), then the key holder's SIGKILL;
# 4: G1 MSM at 2^24 / 2^26 (beside sppark's figures), the split/dense choice at 2^25, a
# WindowPoSt partition with its dense witness; 5 (any card): the GPU suite and the choice;
# 6: the GPU suite, then the partition under both side-stream schedules; 8 (H200): the GPU
# suite, the partition with the current defaults against each recent step turned off (with the
# H query's dense engine profiled, in one process), then the cluster's 4 jobs: the musts
# (PROVER_TESTS=1 first: the prover's tests; SORT_TESTS=1: the window sort's tests; the kept
# buffers and the window sort are the defaults since 2026-12-07);
# 10 (any card): the dense engine's and the compact matvec's GPU tests, then the H query's dense
# engine alone at 2^27 with each dense step off, profiled; 11 (any card): a 32 GiB partition's
# matvec over z and over the planes, and its upload from the blob and staged ahead; 13 (any
# card): the dense engine's tests and the H query alone at its default (2^25 chunks in 3-window
# slices) against 2^24 in 5 and 2^25 in 4 (call 12, the inversion's block and the loads-ahead
# and 128-register tail forms, ran in the ninth session: docs/performance.md); 14 (any card):
# the split MSM's GPU tests, then the 1s by the XYZZ sum against the affine chains
# (bench/gpu_split_msm.py; ONES_MODES, ONES_MIXES, ONES_G1, ONES_G2, ONES_TESTS_K); 16 (any
# card): the NTT's tests, then compute_h trimmed against the full products (gpu_ntt.py --trim-ab);
# 17 (any card): the NTT's tests, the 1s' chains in each kernel form (ZKHIVE_MSM_ONES_KERNEL),
# the H query's dense engine in each apply form (ZKHIVE_MSM_APPLY_KERNEL); 18 (any card): the
# window sort's and the prover's GPU tests, then the H query alone sorted each way; 19 (H200):
# the SIGKILL mid-job with the standby prover, then without.
# It unpacks the cubins made here (.zkc/cubin.txz), builds whatever this head changed
# (`--all`: the measured-slower variants too, the lean G2 kernels among them), runs the call's
# steps through bench/filecoin_gpu_run.sh, and packs everything under $OUT into one archive
# (the tool returns at most 8 files): $OUT/callN.tgz, plus $OUT/steps.txt and the cubins
# built on the device ($OUT/cubin.txz) for the next call to carry.
set -u -o pipefail
N=${1:?usage: bash bench/device_call.sh N (1-6, 8, 10, 11, 13, 14, 16-19)}
OUT=${OUT:?OUT is the output folder of the device tool}
mkdir -p .zkcache "$OUT/run"
[ -f .zkc/cubin.txz ] && tar xJf .zkc/cubin.txz -C .zkcache
# shellcheck disable=SC1091
source .device/env.sh
export ZKHIVE_CACHE_DIR=$PWD/.zkcache PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m gpu.cuda.precompile --all --jobs "$(nproc)" > "$OUT/run/precompile.log" 2>&1
echo "precompile: rc=$? in $(( $(date +%s) - t0 )) s" | tee "$OUT/steps.txt"
run() { OUT="$OUT/run" bash bench/filecoin_gpu_run.sh "$@"; }
case "$N" in
1) [ "${SKIP_TESTS:-0}" = 1 ] || TESTS_S=200 run tests
   # a schedule the suite found wrong is not what the curio run measures: the previous one
   if grep -q "FAILED tests/gpu/test_prover_cuda" "$OUT/run/gpu-tests.log" 2>/dev/null; then
       export ZKHIVE_MSM_DENSE_WITNESS=0
       echo "prover tests failed: curio with ZKHIVE_MSM_DENSE_WITNESS=0" | tee -a "$OUT/steps.txt"
   fi
   JOBS=4 WINNING=10 SPACING=8 CURIO_S=330 run curio
   if [ "${BIG_AB:-0}" = 1 ]; then   # the partition, early side stream (default) against =0
       ZKHIVE_SIDE_EARLY=1 RUNS=3 BIG_S=120 run big
       mv "$OUT/run/filecoin-big.json" "$OUT/run/big-early.json" 2>/dev/null
       mv "$OUT/run/filecoin-big.log" "$OUT/run/big-early.log" 2>/dev/null
       RUNS=3 BIG_S=100 run big
   fi ;;
2) df -h /tmp . | tee -a "$OUT/steps.txt"   # the mirror takes what the disk has room for
   # the load's tests first (~30 s): engines warmed beside the reads, partial mirrors; a load
   # they found wrong is not what the start is timed with: the serial order then
   [ "${PARAMS_TESTS:-1}" = 0 ] || { timeout 120 python3 -m pytest -q -m gpu tests/gpu/test_params_cuda.py \
       tests/gpu/test_params_mirror_cuda.py -p no:cacheprovider > "$OUT/run/params-tests.log" 2>&1
   echo "params tests: rc=$? $(tail -1 "$OUT/run/params-tests.log")" | tee -a "$OUT/steps.txt"; }
   if grep -q "^FAILED" "$OUT/run/params-tests.log"; then
       export ZKHIVE_ENGINES_BESIDE_READS=0
       echo "params tests failed: the start with ZKHIVE_ENGINES_BESIDE_READS=0" | tee -a "$OUT/steps.txt"
   fi
   ZKHIVE_PARAMS_MIRROR_SPARE=${MIRROR_SPARE:-536870912} PARAMS_JOBS=1 PARAMS_MIRROR=1 PARAMS_S=540 run params ;;
3) ZKHIVE_SIDE_EARLY=1 RUNS=3 BIG_S=200 run big
   mv "$OUT/run/filecoin-big.json" "$OUT/run/big-early.json" 2>/dev/null
   mv "$OUT/run/filecoin-big.log" "$OUT/run/big-early.log" 2>/dev/null
   RUNS=3 BIG_S=150 run big
   HOLDER_S=${HOLDER_S:-240} run holder ;;
4) MSM_S=150 run msm
   SPLIT_S=120 run split
   RUNS=2 WINDOW_S=280 run window ;;
5) TESTS_S=240 run tests        # fits an H100: the suite, then the split/dense choice
   SPLIT_S=120 run split ;;
6) TESTS_S=240 run tests      # the GPU suite (the prover's tests take both schedules)
   echo "gpu suite: $(tail -1 "$OUT/run/gpu-tests.log")" | tee -a "$OUT/steps.txt"
   # early against the default in one process (one key; default, early, default again, serial)
   BIG_VARIANTS="early:ZKHIVE_SIDE_EARLY=1 again:ZKHIVE_SIDE_EARLY=0 serial:ZKHIVE_MSM_OVERLAP=0" RUNS=3 BIG_S=200 run big ;;
8) # the H200's musts after calls 10 and 11 (an H100) timed the dense steps and the planes
   # matvec, now on by default: the GPU suite, then in one process with one key the partition
   # (default; the serial profile; the dense steps off; the matvec over z; the default again),
   # then the cluster's 4 jobs (SKIP_TESTS=1: the suite ran on another card of this head;
   # SKIP_CLUSTER=1: the partition alone; SKIP_BIG=1: the cluster alone)
   # the NTT's tests first where asked (NTT_TESTS=1, ~30 s): the partition is timed with the
   # trimmed products (ZKHIVE_NTT_TRIM) only where they gave the host's results
   if [ "${NTT_TESTS:-0}" = 1 ]; then  # the field's ops (the square among them) and the NTT
       timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_ntt_field.py \
           tests/gpu/test_ntt.py > "$OUT/run/ntt-tests.log" 2>&1
       echo "ntt tests: rc=$? $(tail -1 "$OUT/run/ntt-tests.log")" | tee -a "$OUT/steps.txt"
       grep -E "^(FAILED|ERROR)" "$OUT/run/ntt-tests.log" | head -20 | tee -a "$OUT/steps.txt"
       # the square written out (ff_eo::mont_sqr) wrong on the device: the product's square,
       # whose cubins the carried cache holds too (precompile --all with this flag, on dev)
       if grep -q "^FAILED tests/gpu/test_ntt_field.py" "$OUT/run/ntt-tests.log"; then
           export ZKHIVE_NVCC_FLAGS="-DFF_SQR_MUL"
           echo "ZKHIVE_NVCC_FLAGS=-DFF_SQR_MUL from here" | tee -a "$OUT/steps.txt"
       fi
       if grep -q "^FAILED tests/gpu/test_ntt.py" "$OUT/run/ntt-tests.log"; then
           export ZKHIVE_NTT_TRIM=0; echo "ZKHIVE_NTT_TRIM=0 from here" | tee -a "$OUT/steps.txt"
       fi
       timeout 30 python3 bench/gpu_msm.py --rates --out "$OUT/run/rates.json" \
           > "$OUT/run/rates.log" 2>&1
       echo "rates: rc=$? $(tail -1 "$OUT/run/rates.log")" | tee -a "$OUT/steps.txt"
   fi
   if [ "${PROVER_TESTS:-0}" = 1 ]; then  # the prover's own tests (the buffers kept between proofs)
       timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_prover_cuda.py \
           > "$OUT/run/prover-tests.log" 2>&1
       echo "prover tests: rc=$? $(tail -1 "$OUT/run/prover-tests.log")" | tee -a "$OUT/steps.txt"
       grep -E "^(FAILED|ERROR)" "$OUT/run/prover-tests.log" | head -20 | tee -a "$OUT/steps.txt"
       if grep -q "passed" "$OUT/run/prover-tests.log" && \
               ! grep -q "^FAILED.*buffers_serve_the_next_proof" "$OUT/run/prover-tests.log"; then
           export ZKHIVE_PROOF_POOL=1; echo "ZKHIVE_PROOF_POOL=1 from here" | tee -a "$OUT/steps.txt"
       fi
   fi
   if [ "${SORT_TESTS:-0}" = 1 ]; then  # the radix sort within each window (ZKHIVE_MSM_RADIX)
       timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_msm.py \
           tests/gpu/test_split_msm.py -k "radix_sort_gives or (dense_engine_chunks and window)" \
           > "$OUT/run/sort-tests.log" 2>&1
       echo "sort tests: rc=$? $(tail -1 "$OUT/run/sort-tests.log")" | tee -a "$OUT/steps.txt"
       grep -E "^(FAILED|ERROR)" "$OUT/run/sort-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   fi
   if [ "${ONES_TESTS:-0}" = 1 ]; then  # the 1s' chains and the affine apply in each form
       timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_split_msm.py \
           tests/gpu/test_msm.py -k "ones_by_affine or (dense_engine_chunks and lean) or \
           precomputed_affine_rounds_double" > "$OUT/run/ones-tests.log" 2>&1
       echo "ones tests: rc=$? $(tail -1 "$OUT/run/ones-tests.log")" | tee -a "$OUT/steps.txt"
   fi
   if [ "${SKIP_TESTS:-0}" != 1 ]; then
       TESTS_S=${TESTS_S:-150} run tests
       echo "gpu suite: $(tail -1 "$OUT/run/gpu-tests.log")" | tee -a "$OUT/steps.txt"
   fi
   # (c24w5: the dense engine's 2^24 chunks in 5-window slices, the default before the ninth
   # session; old-dense: the eighth session's dense steps off too; z: the matvec over z)
   [ "${SKIP_BIG:-0}" = 1 ] || \
   BIG_VARIANTS="${BIG_VARIANTS:-prof:ZKHIVE_MSM_OVERLAP=0,ZKHIVE_MSM_PROFILE=1 c24w5:ZKHIVE_MSM_OVERLAP=1,ZKHIVE_DENSE_CHUNK_LOG=24,ZKHIVE_MSM_DENSE_AFFINE_WINDOWS=5 old-dense:ZKHIVE_DENSE_CHUNK_LOG=24,ZKHIVE_MSM_DENSE_AFFINE_WINDOWS=5,ZKHIVE_MSM_AFFINE_SLICE_RANGE=0,ZKHIVE_MSM_DENSE_FINAL_INTO=0 z:ZKHIVE_MATVEC_PLANES=0 again: xyzz-ones:ZKHIVE_MSM_ONES_AFFINE=0}" \
       RUNS=${RUNS:-3} BIG_S=${BIG_S:-200} run big
   # the upload's host side staged by the prove-ahead fetcher (on by default): off where its
   # test failed
   if grep -q "^FAILED.*staged_ahead" "$OUT/run/gpu-tests.log" 2>/dev/null; then
       export ZKHIVE_STAGE_AHEAD=0; echo "cluster with ZKHIVE_STAGE_AHEAD=0" | tee -a "$OUT/steps.txt"
   fi
   [ "${SKIP_CLUSTER:-0}" = 1 ] || JOBS=4 CONFIGS=1 CLUSTER_S=${CLUSTER_S:-270} run cluster ;;
10) # any card (fits ~78 GiB): the GPU tests of the dense engine and the compact matvec, then
   # the H query's dense engine alone at 2^27 (bench/gpu_dense_steps.py): the defaults, each
   # dense step off, a fifth round, profiled
   timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_compact_cuda.py \
       tests/gpu/test_split_msm.py tests/gpu/test_msm.py \
       -k "compact_cuda or dense_engine or precomputed_tables_give" \
       > "$OUT/run/step-tests.log" 2>&1
   echo "step tests: rc=$? $(tail -1 "$OUT/run/step-tests.log")" | tee -a "$OUT/steps.txt"
   timeout "${DENSE_S:-300}" python3 bench/gpu_dense_steps.py --log-n 27 --runs "${RUNS:-3}" \
       --out "$OUT/run/dense-steps.json" --variant prof:ZKHIVE_MSM_PROFILE=1 \
       --variant no-range:ZKHIVE_MSM_AFFINE_SLICE_RANGE=0 \
       --variant no-into:ZKHIVE_MSM_DENSE_FINAL_INTO=0 \
       --variant r5:ZKHIVE_MSM_DENSE_AFFINE_ROUNDS=5 --variant again: \
       > "$OUT/run/dense-steps.log" 2>&1
   echo "dense steps: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/dense-steps.log" ;;
11) # any card (fits ~78 GiB): a 32 GiB partition's matvec over z and over the planes, and its
   # upload from the blob and staged ahead (bench/gpu_matvec.py; no key)
   timeout "${MATVEC_S:-240}" python3 bench/gpu_matvec.py --params filecoin-32g --runs 5 \
       --out "$OUT/run/matvec.json" > "$OUT/run/matvec.log" 2>&1
   echo "matvec: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/matvec.log" ;;
13) # any card (fits ~78 GiB): the dense engine's GPU tests, then the H query alone at 2^27
   # in the default chunks of 2^25 in 3-window slices (the prefix products in the radix sort's
   # second list, the running sums in the workspace's buckets: gpu/affine_plan.py
   # dense_sharing) against 2^24 in 5 (the default before), each engine's bytes planned and
   # held beside it, profiled
   timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_split_msm.py \
       -k "dense_engine" > "$OUT/run/step-tests.log" 2>&1
   echo "step tests: rc=$? $(tail -1 "$OUT/run/step-tests.log")" | tee -a "$OUT/steps.txt"
   timeout "${DENSE_S:-300}" python3 bench/gpu_dense_steps.py --log-n 27 --runs "${RUNS:-3}" \
       --out "$OUT/run/dense-chunks.json" --variant prof:ZKHIVE_MSM_PROFILE=1 \
       --variant c24w5:ZKHIVE_DENSE_CHUNK_LOG=24,ZKHIVE_MSM_DENSE_AFFINE_WINDOWS=5 \
       --variant c25w4:ZKHIVE_MSM_DENSE_AFFINE_WINDOWS=4 \
       --variant again: > "$OUT/run/dense-chunks.log" 2>&1
   echo "dense chunks: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/dense-chunks.log" ;;
14) # any card (fits ~78 GiB): the split MSM's GPU tests (the 1s by affine chains among them),
   # then the 1s at filecoin-32g's mix (61.5 M of 130 M at 2^27): G1 2^27 and G2 2^26, the XYZZ
   # sum against the chains (ZKHIVE_MSM_ONES_AFFINE), every result checked by the known logs
   timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_split_msm.py \
       -k "${ONES_TESTS_K:-}" > "$OUT/run/step-tests.log" 2>&1
   echo "split tests: rc=$? $(tail -1 "$OUT/run/step-tests.log")" | tee -a "$OUT/steps.txt"
   grep -E "^(FAILED|ERROR)" "$OUT/run/step-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   timeout "${ONES_S:-300}" python3 bench/gpu_split_msm.py --g1 "${ONES_G1:-27}" \
       --g2 "${ONES_G2:-26}" --runs "${RUNS:-3}" --modes "${ONES_MODES:-on,on+ones}" \
       --mixes "${ONES_MIXES:-fil}" \
       --out "$OUT/run/ones.json" > "$OUT/run/ones.log" 2>&1
   echo "ones: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/ones.log" ;;
16) # any card: the NTT's GPU tests (both ZKHIVE_NTT_TRIM settings, the 2^24 check too), then
   # compute_h and a forward NTT trimmed against the full products, alternating in one process
   ZKHIVE_TEST_BIG=1 timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider \
       tests/gpu/test_ntt.py > "$OUT/run/step-tests.log" 2>&1
   echo "ntt tests: rc=$? $(tail -1 "$OUT/run/step-tests.log")" | tee -a "$OUT/steps.txt"
   grep -E "^(FAILED|ERROR)" "$OUT/run/step-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   timeout "${TRIM_S:-200}" python3 bench/gpu_ntt.py --trim-ab --sizes "${TRIM_SIZES:-20,24,27}" \
       --out "$OUT/run/trim.json" > "$OUT/run/trim.log" 2>&1
   echo "trim: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   # the same with the radix-4 passes held to 96 registers, so that the DIF's also run 5 blocks
   # an SM (ptxas: 94 / 96 registers, no spills; the radix-2 passes are not used at these sizes)
   ZKHIVE_NVCC_FLAGS="${NTT_VARIANT_FLAGS:--DNTT_MAX_THREADS=128 -DNTT_MIN_BLOCKS=5}" \
   timeout "${TRIM_S:-200}" python3 bench/gpu_ntt.py --trim-ab --sizes 24,27 \
       --out "$OUT/run/trim-bounds.json" > "$OUT/run/trim-bounds.log" 2>&1
   echo "trim, 128x5 bounds: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/trim.log" "$OUT/run/trim-bounds.log" ;;
18) # any card (fits ~78 GiB): the window sort's GPU tests and the prover's (the buffers kept
   # between proofs), then the H query alone at 2^27 sorted by whole keys (lsd, the default)
   # against within each window (ZKHIVE_MSM_RADIX=window), profiled and not, alternating
   timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_msm.py \
       tests/gpu/test_split_msm.py -k "radix_sort_gives or (dense_engine_chunks and window)" \
       > "$OUT/run/sort-tests.log" 2>&1
   echo "sort tests: rc=$? $(tail -1 "$OUT/run/sort-tests.log")" | tee -a "$OUT/steps.txt"
   grep -E "^(FAILED|ERROR)" "$OUT/run/sort-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_prover_cuda.py \
       > "$OUT/run/prover-tests.log" 2>&1
   echo "prover tests: rc=$? $(tail -1 "$OUT/run/prover-tests.log")" | tee -a "$OUT/steps.txt"
   grep -E "^(FAILED|ERROR)" "$OUT/run/prover-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   timeout "${DENSE_S:-240}" python3 bench/gpu_dense_steps.py --log-n 27 --runs "${RUNS:-3}" \
       --out "$OUT/run/dense-sort.json" \
       --variant lprof:ZKHIVE_MSM_RADIX=lsd,ZKHIVE_MSM_PROFILE=1 \
       --variant wprof:ZKHIVE_MSM_RADIX=window,ZKHIVE_MSM_PROFILE=1 \
       --variant window:ZKHIVE_MSM_RADIX=window --variant lsd:ZKHIVE_MSM_RADIX=lsd \
       --variant window2:ZKHIVE_MSM_RADIX=window > "$OUT/run/dense-sort.log" 2>&1
   echo "dense sort: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/dense-sort.log" ;;
19) # H200: a prover SIGKILLed mid-job with [worker] prover_standby (the standby takes the
   # device over, the key attached from the holder), then without (the keeper's restart), in
   # one lease: the SIGKILL goal (<= 3 s) against 9.94 s (2026-12-05)
   STANDBY=on HOLDER_S=${HOLDER_S:-260} run holder
   mv "$OUT/run/holder.log" "$OUT/run/holder-standby.log" 2>/dev/null
   mv "$OUT/run/holder" "$OUT/run/holder-standby" 2>/dev/null
   STANDBY=off HOLDER_S=${HOLDER_S:-260} run holder
   for f in "$OUT/run/holder-standby/holder-restart.json" "$OUT/run/holder/holder-restart.json"; do
       echo "$f: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('standby','kill_to_pickup_s','kill_to_first_proved_s','new_prover_ready_after_kill_s','kill_jobs_verified','took_over_from_standby','restart_to_first_proved_s','restart_job_verified','error')})" "$f" 2>&1)" | tee -a "$OUT/steps.txt"
   done ;;
17) # any card: the NTT's GPU tests (the twelfth session's mends: 2^10's one-bit pass, the
   # constant scale of the plain inverse), the 1s' chains' tests in each kernel form, then the
   # forms timed on the 1s alone (bench/gpu_split_msm.py --mixes bits): G1 2^26, G2 2^25
   timeout 30 python3 bench/gpu_msm.py --rates --out "$OUT/run/rates.json" \
       > "$OUT/run/rates.log" 2>&1
   echo "rates: rc=$? $(tail -1 "$OUT/run/rates.log")" | tee -a "$OUT/steps.txt"
   ZKHIVE_TEST_BIG=1 timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider \
       tests/gpu/test_ntt_field.py tests/gpu/test_ntt.py > "$OUT/run/ntt-tests.log" 2>&1
   echo "ntt tests: rc=$? $(tail -1 "$OUT/run/ntt-tests.log")" | tee -a "$OUT/steps.txt"
   grep -E "^(FAILED|ERROR)" "$OUT/run/ntt-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_split_msm.py \
       tests/gpu/test_msm.py -k "ones_by_affine or (dense_engine_chunks and lean) or \
       precomputed_affine_rounds_double" > "$OUT/run/ones-tests.log" 2>&1
   echo "ones tests: rc=$? $(tail -1 "$OUT/run/ones-tests.log")" | tee -a "$OUT/steps.txt"
   grep -E "^(FAILED|ERROR)" "$OUT/run/ones-tests.log" | head -20 | tee -a "$OUT/steps.txt"
   timeout "${DENSE_S:-150}" python3 bench/gpu_dense_steps.py --log-n 27 --runs "${RUNS:-3}" \
       --out "$OUT/run/dense-apply.json" --variant lean:ZKHIVE_MSM_APPLY_KERNEL=lean \
       --variant lean5:ZKHIVE_MSM_APPLY_KERNEL=lean5 --variant again: \
       --variant prof5:ZKHIVE_MSM_APPLY_KERNEL=lean5,ZKHIVE_MSM_PROFILE=1 \
       --variant prof:ZKHIVE_MSM_PROFILE=1 > "$OUT/run/dense-apply.log" 2>&1
   echo "dense apply: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   timeout "${ONES_S:-120}" python3 bench/gpu_split_msm.py --g1 "${ONES_G1:-26}" --g2 0 \
       --runs "${RUNS:-3}" --modes "${ONES_MODES_G1:-on+ones64,on+ones64@lean,on+ones64@lean5,on+ones64@whole}" \
       --mixes bits --out "$OUT/run/ones-g1.json" > "$OUT/run/ones-g1.log" 2>&1
   echo "ones g1: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   timeout "${ONES_S:-120}" python3 bench/gpu_split_msm.py --g1 0 --g2 "${ONES_G2:-25}" \
       --runs "${RUNS:-3}" \
       --modes "${ONES_MODES_G2:-on+ones64,on+ones64@lean,on+ones64@lean3,on+ones64@whole3,on+ones64@whole}" \
       --mixes bits --out "$OUT/run/ones-g2.json" > "$OUT/run/ones-g2.log" 2>&1
   echo "ones g2: rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"
   cat "$OUT/run/ones-g1.log" "$OUT/run/ones-g2.log" "$OUT/run/dense-apply.log" ;;
*) echo "call $N: one of 1-6, 8, 10, 11, 13, 14, 16 or 17" >&2; exit 2 ;;
esac
cat "$OUT/run/steps.txt" >> "$OUT/steps.txt" 2>/dev/null
tar cJf "$OUT/cubin.txz" -C .zkcache cubin
tar czf "$OUT/call$N.tgz" -C "$OUT" run && rm -rf "$OUT/run"
cat "$OUT/steps.txt"
