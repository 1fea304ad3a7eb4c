#!/usr/bin/env bash
# Two changes against the committed build (0915940), alternating in one call:
#   new:  the screening kernel's cp.async ring (one 512-thread block a SM, slabs of a group's int8
#         rows in shared memory, NS - 1 in flight) in place of register loads (one group in flight
#         a block, four blocks a SM);
#   keep: new, plus the persistent kernel's o and down stages taking the block's own residual rows
#         from shared memory (engine_dl_gemv's keep) instead of an L2 load after their last tile;
#   acq:  keep, with the stage waits' last acquire load (engine_spin_until) replaced by
#         fence.acq_rel.gpu after the relaxed poll that saw the count (thrive only).
# Binaries built here (build-carry/): thrive-head, test-head (0915940), thrive-new, thrive-keep,
# test-keep (the working tree with both).
#   device tool: run command="bash bench/results/screen-ring-2026-12-07/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-head thrive-new thrive-keep thrive-acq test-head test-keep
for r in 1 2; do
  e2e head-b1-$r "$OUT" thrive-head 1
  e2e new-b1-$r "$OUT" thrive-new 1
  e2e keep-b1-$r "$OUT" thrive-keep 1
  e2e acq-b1-$r "$OUT" thrive-acq 1
done
e2e keep-b4 "$OUT" thrive-keep 4
e2e head-b4 "$OUT" thrive-head 4
filter='*ScreenedLmHead*:*NonFinite*:*GreedyLoop*:*BatchOne*:*Stages*:*Persistent*:*GqaGroups*'
left() { local n=$(( 570 - SECONDS < $1 ? 570 - SECONDS : $1 )); echo $(( n < 1 ? 1 : n )); }  # the call's 600 s, less a margin
echo "tests start at ${SECONDS} s"
timeout $(left 240) build-carry/test-keep --gtest_filter="$filter" > "$OUT/tests-keep.log" 2>&1
echo "tests-keep exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests-keep.log" | head -20
timeout $(left 60) build-carry/test-head --gtest_filter='*ScreenedLmHeadOverflow*:*NonFinite*' > "$OUT/tests-head.log" 2>&1
echo "tests-head exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests-head.log" | head -20
timeout $(left 100) compute-sanitizer --tool racecheck build-carry/test-keep --gtest_filter='*ScreenedLmHead*/3:*ScreenedLmHead*/7' > "$OUT/racecheck.log" 2>&1
echo "racecheck exit $?"; tail -4 "$OUT/racecheck.log"
