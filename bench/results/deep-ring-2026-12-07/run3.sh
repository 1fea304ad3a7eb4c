#!/usr/bin/env bash
# One call for both pending runs (session 38): the deep ring's GPU tests and batch-1 sweep
# (deep-ring run 1, on branch deep-ring) and the screening ring's racecheck follow-up
# (screen-ring-2026-12-07/run3.sh).
# Binaries built here (build-carry/): thrive-base and test-cur (main, e157b2d's engine),
# thrive-dr and test-dr (branch deep-ring, 272be85's engine).
# Every output goes into one archive, $OUT/run3.tar.gz (the tool returns at most 8 files).
#   device tool: run command="bash bench/results/deep-ring-2026-12-07/run3.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
D="$OUT/run3"; mkdir -p "$D"
exec > >(tee "$D/printed.txt") 2>&1
prepare thrive-base thrive-dr test-dr test-cur
left() { local n=$(( 540 - SECONDS < $1 ? 540 - SECONDS : $1 )); echo $(( n < 1 ? 1 : n )); }
pack() { tar -C "$OUT" -czf "$OUT/run3.tar.gz" run3; }
trap pack EXIT
timeout $(left 120) build-carry/test-dr --gtest_filter='*Persistent*:*ScreenedLmHead*' > "$D/tests-dr.log" 2>&1
echo "tests-dr exit $? at ${SECONDS} s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$D/tests-dr.log" | head -20
for r in 1 2; do
  e2e base-$r "$D" thrive-base 1
  e2e dr-5-0-$r "$D" thrive-dr 1
  e2e dr-6-2-$r "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 2
  e2e dr-6-3-$r "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 3
  e2e dr-5-2-$r "$D" thrive-dr 1 --persistent-stages 5 --persistent-depth 2
  e2e dr-5-3-$r "$D" thrive-dr 1 --persistent-stages 5 --persistent-depth 3
  e2e dr-6-4-$r "$D" thrive-dr 1 --persistent-stages 6 --persistent-depth 4
  e2e dr-5-1-$r "$D" thrive-dr 1 --persistent-stages 5 --persistent-depth 1
  echo "round $r done at ${SECONDS} s"
  [ $SECONDS -gt 300 ] && break
done
# the screening ring's racecheck follow-up on main's test binary: CudaEngineScreenedLmHead/3
# (persistent, batch 1, PDL on), CudaEnginePersistent/2 (PDL off); then the deep ring's /2
for f in 'cur|*ScreenedLmHead*/3' 'cur|BatchAndPdl/CudaEnginePersistent.*/2' 'dr|BatchAndPdl/CudaEnginePersistent.*/2'; do
  b=${f%%|*}; g=${f#*|}; n=$b-$(echo "$g" | tr -c 'A-Za-z0-9\n' '_')
  [ $SECONDS -gt 480 ] && break
  echo "racecheck $b $g start at ${SECONDS} s"
  timeout $(left 80) compute-sanitizer --tool racecheck --print-limit 10 build-carry/test-$b --gtest_filter="$g" > "$D/racecheck-$n.log" 2>&1
  echo "racecheck exit $?"; grep -E "Race reported|RACECHECK SUMMARY|PASSED|FAILED|hazard" "$D/racecheck-$n.log" | head -6
done
echo "end at ${SECONDS} s"
