#!/usr/bin/env bash
# One device call for both steps (prepared 2026-12-05, not yet run): the probe (run1.sh), then
# handoff-warp-step1.patch's binaries against the committed ones of the same commit: the 53
# persistent, GQA-group, greedy-loop and batch-1 GPU tests, then batch 1 twice and batch 4 once,
# alternating. The e2e figures only count if the tests passed.
#   device tool: run command="bash bench/results/h200-fence-probe-2026-12-04/run-all.sh" carry=["build-carry"]
#   build-carry/: thrive and model_test_cuda_engine = `cmake --build build --target thrive
#   model_test_cuda_engine` at cf5cc40; thrive-hw1 and model_test_cuda_engine-hw1 = the same after
#   `git apply bench/results/h200-fence-probe-2026-12-04/handoff-warp-step1.patch`; lib/ =
#   libfmt.so.9, libspdlog.so.1.10, libsqlite3.so.0 from the CPU machine (Debian 12).
# Out ($OUT): probe.txt, tests-hw1.txt, e2e-{base,hw1}{1,2}.json, e2e-{base,hw1}-b4.json.
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/thrive-out} timeout 150 bash "$here/run1.sh" || echo "probe: exit $?"
source "$here/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-hw1 model_test_cuda_engine-hw1
timeout 200 build-carry/model_test_cuda_engine-hw1 \
  --gtest_filter='*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*' > "$OUT/tests-hw1.txt" 2>&1; echo "tests hw1: exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$OUT/tests-hw1.txt" | head -20
e2e base1 "$OUT" thrive 1
e2e hw1-1 "$OUT" thrive-hw1 1
e2e base2 "$OUT" thrive 1
e2e hw1-2 "$OUT" thrive-hw1 1
e2e base-b4 "$OUT" thrive 4
e2e hw1-b4 "$OUT" thrive-hw1 4
