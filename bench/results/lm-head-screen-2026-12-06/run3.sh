#!/usr/bin/env bash
# The committed tree with 4 screening blocks a SM (2026-12-06, session 34): the screened lm_head's
# GPU tests and run 1's others, on the binaries built here. (The filter's last pattern,
# CudaEngine/*, matched nothing: those tests are named RegistryGraphsAndKnobs/CudaEngine.*; 25 ran,
# run 1's 25.)
#   device tool: run command="bash bench/results/lm-head-screen-2026-12-06/run3.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive
timeout 300 build-carry/model_test_cuda_engine \
  --gtest_filter='*ScreenedLmHead*:*NonFinite*:*GreedyLoop*:*BatchOne*:*CudaEngineStages*:CudaEngine/*' > "$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests.log" | head -30
