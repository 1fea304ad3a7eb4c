#!/usr/bin/env bash
# The deep ring (the twenty-second pass's unbuilt idea, thirty-second pass): per-slice mbarriers,
# at most `depth` tiles of a slice outstanding, tiles issued as earlier ones land from every wait
# and, at batch 1, from the idle second half of each block during attention.
# Binaries built here (build-carry/): thrive-base (e157b2d), thrive-dr and test-dr (the deep ring).
# First the persistent kernel's GPU tests, then batch-1 e2e, alternating base and deep-ring
# configurations (--persistent-stages NS --persistent-depth P).
#   device tool: run command="bash bench/results/deep-ring-2026-12-07/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-dr test-dr
left() { local n=$(( 240 - SECONDS < $1 ? 240 - SECONDS : $1 )); echo $(( n < 1 ? 1 : n )); }
D="$OUT/run1"; mkdir -p "$D"
timeout $(left 80) build-carry/test-dr --gtest_filter='*Persistent*:*ScreenedLmHead*' > "$D/tests-dr.log" 2>&1
echo "tests-dr exit $? at ${SECONDS} s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$D/tests-dr.log" | head -20
for r in 1 2; do
  e2e base-$r "$D" thrive-base 1
  e2e dr-5-0-$r "$D" thrive-dr 1
  e2e dr-6-2-$r "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 2
  e2e dr-6-3-$r "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 3
  [ $SECONDS -gt 200 ] && break
  e2e dr-5-2-$r "$D" thrive-dr 1 --persistent-stages 5 --persistent-depth 2
  e2e dr-5-3-$r "$D" thrive-dr 1 --persistent-stages 5 --persistent-depth 3
  e2e dr-6-4-$r "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 4
  echo "round $r done at ${SECONDS} s"
  [ $SECONDS -gt 130 ] && break
done
# run 1 of the screening ring's racecheck follow-up (screen-ring-2026-12-07/run3.sh), if time is left
if [ $SECONDS -lt 170 ]; then
  timeout $(left 60) compute-sanitizer --tool racecheck --print-limit 10 build-carry/test-dr \
    --gtest_filter='BatchAndPdl/CudaEnginePersistent.*/2' > "$D/racecheck-persistent-2.log" 2>&1
  echo "racecheck persistent/2 (PDL off) exit $?"; grep -E "Race reported|RACECHECK SUMMARY|PASSED|FAILED" "$D/racecheck-persistent-2.log" | head -6
fi
