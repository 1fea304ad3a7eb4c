#!/usr/bin/env bash
# The screened lm_head in one launch (2026-12-06, session 35): the final RMSNorm, the screening, a
# grid-wide wait, the exact pass and the argmax in engine_lm_head_screen, where the step had run
# engine_rmsnorm, engine_lm_head_screen and engine_argmax_screened. Its GPU tests, then thrive e2e
# on the random Qwen3-1.7B checkpoint (prompt 512, 64 tokens, best kernels, graphs): the new build
# (thrive) against the one before (thrive-base: the build of session 34's run 3, 20:50 UTC, whose
# kernels' PTX equals e8c34f0's), alternating in one call: batch 1 twice each, batch 4 once each,
# and the new build's exact lm_head once (its tokens are the reference).
#   Build here first: cmake --build build -j 2 --target thrive model_test_cuda_engine, then
#   build/thrive and build/tests/model_test_cuda_engine -> build-carry/ (libraries in build-carry/lib).
#   device tool: run command="bash bench/results/lm-head-fused-2026-12-06/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-base
timeout 240 build-carry/model_test_cuda_engine \
  --gtest_filter='*ScreenedLmHead*:*NonFinite*:*GreedyLoop*:*BatchOne*:*CudaEngineStages*' > "$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests.log" | head -30
for r in 1 2; do
  for b in thrive-base thrive; do e2e "$b-b1-$r" "$OUT" $b 1; done
done
e2e "thrive-exact-b1" "$OUT" thrive 1 --lm-head exact
for b in thrive-base thrive; do e2e "$b-b4" "$OUT" $b 4; done
python3 bench/results/lm-head-fused-2026-12-06/compare.py "$OUT"
