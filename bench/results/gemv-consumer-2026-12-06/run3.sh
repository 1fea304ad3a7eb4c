#!/usr/bin/env bash
# Session 33 (2026-12-06): ldmatrix-first (build-carry/thrive-ldsm, ldmatrix-first.patch) was never
# slower at batch 1 in three calls; this call checks it at batch 4 (two rounds alternating with the
# committed kernel) and runs the CUDA engine's persistent and GQA tests on its test binary
# (build-carry/model_test_cuda_engine-ldsm: the patch applied, cmake --build build -j 2 --target
# model_test_cuda_engine).
#   device tool: run command="bash bench/results/gemv-consumer-2026-12-06/run3.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-ldsm
timeout 100 build-carry/model_test_cuda_engine-ldsm --gtest_filter='*Persistent*:*Gqa*' > "$OUT/test-ldsm.log" 2>&1
echo "ldsm tests exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/test-ldsm.log" | head -20
for r in 1 2; do
  e2e "base-b4-$r" "$OUT" thrive-base 4
  e2e "ldsm-b4-$r" "$OUT" thrive-ldsm 4
done
