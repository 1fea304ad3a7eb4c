#!/usr/bin/env bash
# Call 1 (2026-12-06): the GEMV's cross-warp sums with named barriers (drift.patch: warps 2-15
# arrive and go on, warps 0-1 wait and sum) and the persistent grid capped at 128 blocks
# (grid128.patch: Qwen3-1.7B's 128 o/down row groups, 256 qkv and 768 gate/up then divide evenly,
# and no block's share grows), against the committed kernel, batch 1 alternating twice, batch 4
# once; then the persistent-kernel GPU tests with the named barriers.
#   device tool: run command="bash bench/results/h200-gemv-drift-2026-12-06/run1.sh" carry=["build-carry"]
#   build-carry/: thrive-base and test-base (thrive, model_test_cuda_engine) built at 70fa0fe;
#   thrive-drift, test-drift with drift.patch; thrive-g128 with grid128.patch; thrive-drift-g128
#   with both; lib/ = libfmt.so.9, libspdlog.so.1.10, libsqlite3.so.0 from the CPU machine (Debian 12).
# Out ($OUT): e2e-*.json, tests-drift.txt.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-drift thrive-g128 thrive-drift-g128 test-drift
for round in 1 2; do
  for v in base drift g128 drift-g128; do e2e "$v-$round" "$OUT" "thrive-$v" 1; done
done
e2e base-b4 "$OUT" thrive-base 4
e2e drift-b4 "$OUT" thrive-drift 4
timeout 300 build-carry/test-drift \
  --gtest_filter='*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*:*NonFinite*:*CudaEngineOptions*' > "$OUT/tests-drift.txt" 2>&1
echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" "$OUT/tests-drift.txt" | head -20
