#!/usr/bin/env bash
# Call 2 (2026-12-06): the automatic block count (persistent_decode_blocks: 128 for Qwen3-1.7B on
# 132 SMs) against one block a SM (--persistent-blocks 132) and two unbalanced counts (124: the
# largest o and down shares double; 120), batch 1 alternating, batch 4 once each; then the CUDA
# engine's tests (GPU included) with the working tree's binaries (the CLI tests run a thrive
# binary at its build path, so they run in the closing check, which builds on the device).
#   device tool: run command="bash bench/results/h200-gemv-drift-2026-12-06/run2.sh" carry=["build-carry"]
#   build-carry/: thrive, model_test_cuda_engine built from the working tree (cmake --build build
#   --target thrive model_test_cuda_engine); lib/ as run1.sh.
# Out ($OUT): e2e-*.json, tests-engine.txt.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive model_test_cuda_engine
for round in 1 2; do
  e2e "sm-$round" "$OUT" thrive 1 --persistent-blocks 132
  e2e "auto-$round" "$OUT" thrive 1
done
e2e blocks124 "$OUT" thrive 1 --persistent-blocks 124
e2e blocks120 "$OUT" thrive 1 --persistent-blocks 120
e2e sm-b4 "$OUT" thrive 4 --persistent-blocks 132
e2e auto-b4 "$OUT" thrive 4
timeout 420 build-carry/model_test_cuda_engine > "$OUT/tests-engine.txt" 2>&1
echo "engine tests exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure" "$OUT/tests-engine.txt" | head -20
