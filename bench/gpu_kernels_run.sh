#!/bin/bash
# One device call for the MSM and NTT kernels (issue 13), most important first, inside one
# deadline (BUDGET_S, default 420 s):
#   1. the GPU tests (pytest -m gpu tests/gpu);
#   2. bench/gpu_msm.py: G1 2^20, 2^22, 2^24 and G2 2^20, 2^22 with random, PoRep-like and
#      all-equal scalars, each checked by the known-log identity, kernel variants, windows;
#   3. bench/gpu_ntt.py: NTT and compute_h at 2^16, 2^20, 2^24 with build variants;
#   4. the SASS size of the Fq product (cuobjdump, there only).
# Run on the GPU machine:  source .device/env.sh && bash bench/gpu_kernels_run.sh
# Results in $OUT (<= 8 files). Cubins compiled ahead (python3 -m gpu.cuda.precompile, and the
# -DFF_CIOS ntt variant) are read from $ZKHIVE_CACHE_DIR.
set -u -o pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export ZKHIVE_CACHE_DIR=${ZKHIVE_CACHE_DIR:-$PWD/.zkcache}
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-420}))
left() { local l=$((END - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo $((l > 5 ? l : 5)); }
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
date -u
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== 1. GPU tests"
  timeout "$(left ${TESTS_S:-200})" python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider \
      2>&1 | tee "$OUT/tests.txt" | tail -15
fi
echo "== 2. MSM ($((END - SECONDS)) s left)"
timeout "$(left ${MSM_S:-200})" python3 bench/gpu_msm.py --out "$OUT/msm.json" \
    --plan "${MSM_PLAN:-g1:20:s,g1:22:s,g1:24:s:v:w=19/20/21,g2:20:s,g2:22:s:v}" 2>&1 \
    | tee "$OUT/msm.txt" | tail -30
echo "== 3. NTT ($((END - SECONDS)) s left)"
timeout "$(left ${NTT_S:-120})" python3 bench/gpu_ntt.py ${NTT_ARGS:---variants} \
    --out "$OUT/ntt.json" 2>&1 | tee "$OUT/ntt.txt" | tail -30
echo "== 4. SASS of the products"
c=$(ls -t "$ZKHIVE_CACHE_DIR"/cubin/msm-sm_90-*.cubin | head -1)
cuobjdump -sass -fun fq_mul_rate "$c" 2>/dev/null | grep -cE '^\s+/\*[0-9a-f]{4}\*/' || true
echo "== done with $((END - SECONDS)) s to spare"; date -u
