#!/usr/bin/env bash
# Twentieth pass, call 2 (H200, 2026-12-04): holding back the next matrix's tile issues until a
# stage's output is stored and counted (kDlHoldMask: bit w for stage w, 0 qkv, 1 o, 2 gate/up,
# 3 down), batch 1 alternating, batch 4 once; the persistent kernel's GPU tests with mask 14.
#   device tool: run command="bash bench/results/h200-tagged-handoffs-2026-12-04/run2.sh" carry=["build-carry"]
#   build-carry/: thrive-mM = `cmake --build build --target thrive` with kDlHoldMask = M (M = 0, 4,
#   14, 15); model_test_cuda_engine with 14; lib/ as run1.sh.
# Out ($OUT): e2e-mM-{1,2}.json, e2e-mM-b4.json, tests.txt.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-m0 thrive-m4 thrive-m14 thrive-m15 model_test_cuda_engine
for r in 1 2; do
  for m in 0 14 15 4; do e2e m$m-$r "$OUT" thrive-m$m 1; done
done
for m in 0 14; do e2e m$m-b4 "$OUT" thrive-m$m 4; done
timeout 300 build-carry/model_test_cuda_engine \
  --gtest_filter='*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*' > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$OUT/tests.txt" | head -30
