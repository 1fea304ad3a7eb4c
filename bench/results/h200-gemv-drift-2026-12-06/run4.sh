#!/usr/bin/env bash
# Call 4 (2026-12-06): after a review of the block count (the one-split case no longer refused,
# more blocks than SMs refused also with the persistent kernel off, a test model whose automatic
# count is below the SM count), the CUDA engine's persistent-kernel and option tests, and one
# batch-1 e2e with the automatic count.
#   device tool: run command="bash bench/results/h200-gemv-drift-2026-12-06/run4.sh" carry=["build-carry"]
#   build-carry/: thrive, model_test_cuda_engine built from the working tree; lib/ as run1.sh.
# Out ($OUT): tests.txt, e2e-auto.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive model_test_cuda_engine
timeout 300 build-carry/model_test_cuda_engine \
  --gtest_filter='*Persistent*:*GreedyLoop*:*NonFinite*:CudaEngineOptions*:*BatchOne*' > "$OUT/tests.txt" 2>&1
echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure" "$OUT/tests.txt" | head -20
e2e auto "$OUT" thrive 1
