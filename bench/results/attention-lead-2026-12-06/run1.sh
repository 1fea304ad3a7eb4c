#!/usr/bin/env bash
# The attention lead (2026-12-06, session 31): one more ring stage, whose tile is issued as the
# attention stage starts (5 tiles in flight a block while attention runs instead of 4) and taken
# back at the o stage's first tile (THRIVE_DL_LEAD=1 in this experiment's binary). A/B at batch 1
# and 4 against the committed kernel (thrive-base) and the new binary without the lead (its code
# alone: ptxas spills 154/264 bytes against 140/224), alternating three rounds; then the CUDA
# engine's persistent-kernel GPU tests with the lead on.
#   Build here first:
#     git stash; cmake --build build -j 2 --target thrive && cp build/thrive build-carry/thrive-base; git stash pop
#     cmake --build build -j 2 --target thrive model_test_cuda_engine
#     cp build/thrive build-carry/thrive-new; cp build/tests/model_test_cuda_engine build-carry/
#   device tool: run command="bash bench/results/attention-lead-2026-12-06/run1.sh" carry=["build-carry"]
# Out ($OUT): e2e-*.json, tests.txt.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-new thrive-base
for r in 1 2 3; do
  e2e "base-$r" "$OUT" thrive-base 1
  THRIVE_DL_LEAD=0 e2e "new0-$r" "$OUT" thrive-new 1
  THRIVE_DL_LEAD=1 e2e "lead-$r" "$OUT" thrive-new 1
done
e2e base-b4 "$OUT" thrive-base 4
THRIVE_DL_LEAD=1 e2e lead-b4 "$OUT" thrive-new 4
THRIVE_DL_LEAD=0 e2e new0-b4 "$OUT" thrive-new 4
THRIVE_DL_LEAD=1 timeout 240 build-carry/model_test_cuda_engine --gtest_filter='*Persistent*:*GreedyLoop*' > "$OUT/tests.txt" 2>&1
echo "tests (lead on): exit $?"; grep -E "PASSED|FAILED|tests ran" "$OUT/tests.txt" | head
