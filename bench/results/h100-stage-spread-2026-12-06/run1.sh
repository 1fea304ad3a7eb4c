#!/usr/bin/env bash
# Call 1 (2026-12-06, session 30): every block's stage stamps (the persistent kernel's stage
# starts per block, `persistent_stage_spread_us` in the e2e JSON). The GPU tests of the stage
# timing and the persistent kernel with it, then batch 1 against the committed kernel, alternating.
#   device tool: run command="bash bench/results/h100-stage-spread-2026-12-06/run1.sh" carry=["build-carry"]
#   build-carry/: thrive-base (40f9df9), thrive-new and model_test_cuda_engine (the change),
#   lib/ as in ../h200-lm-head-2026-12-04/common.sh.
# Out ($OUT): tests.txt, e2e-*.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-new thrive-base
timeout 120 build-carry/model_test_cuda_engine \
  --gtest_filter='CudaEngineStages.*:BatchAndPdl/CudaEnginePersistent.*:BatchAndBlocks/*' > "$OUT/tests.txt" 2>&1
echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/tests.txt" | head -10
for r in 1 2; do
  e2e "new-$r" "$OUT" thrive-new 1
  e2e "base-$r" "$OUT" thrive-base 1
done
