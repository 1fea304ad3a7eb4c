#!/usr/bin/env bash
# run1.sh cut to fit the device time left in the session (about 150 s): the persistent kernel's
# GPU tests with the deep ring, then one batch-1 e2e each of the base binary and two depths.
#   device tool: run command="bash bench/results/deep-ring-2026-12-07/run2.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-dr test-dr
left() { local n=$(( 150 - SECONDS < $1 ? 150 - SECONDS : $1 )); echo $(( n < 1 ? 1 : n )); }
D="$OUT/run2"; mkdir -p "$D"
timeout $(left 70) build-carry/test-dr --gtest_filter='BatchAndPdl/CudaEnginePersistent*' > "$D/tests-dr.log" 2>&1
echo "tests-dr exit $? at ${SECONDS} s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$D/tests-dr.log" | head -24
e2e base-1 "$D" thrive-base 1
[ $SECONDS -lt 125 ] && e2e dr-6-2-1 "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 2
[ $SECONDS -lt 135 ] && e2e dr-6-3-1 "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 3
echo "done at ${SECONDS} s"
