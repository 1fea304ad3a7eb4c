#!/usr/bin/env bash
# The stage signal (engine_dl_signal: block barrier, thread 0's __threadfence, atomicAdd), on the
# working tree after run 1 (the screening ring kept, the kept residual rows dropped), alternating:
#   cur: as committed;
#   rel: thread 0's fence and count as one red.release.gpu (PTX release reduction);
#   nf:  no fence before the count (a race: timing only, a bound on the fence's cost).
# First the screened lm_head's GPU tests with the ring's slab sizes (screen_layout: a new instance
# at hidden 5120, batch 8, takes 32-chunk slabs); last, racecheck of the layered path's tiny-model
# screened test (run 1's racecheck reported hazards in engine_block_sum).
# Binaries built here (build-carry/): thrive-cur, test-cur, thrive-rel, thrive-nf.
#   device tool: run command="bash bench/results/screen-ring-2026-12-07/run2.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-cur thrive-rel thrive-nf test-cur
timeout 90 build-carry/test-cur --gtest_filter='*ScreenedLmHead*:*NonFinite*' > "$OUT/tests-cur.log" 2>&1
echo "tests-cur exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests-cur.log" | head -20
e2e cur-b1-1 "$OUT" thrive-cur 1
e2e nf-b1-1 "$OUT" thrive-nf 1
e2e rel-b1-1 "$OUT" thrive-rel 1
e2e cur-b1-2 "$OUT" thrive-cur 1
left() { local n=$(( 280 - SECONDS < $1 ? 280 - SECONDS : $1 )); echo $(( n < 1 ? 1 : n )); }
echo "racecheck start at ${SECONDS} s"
timeout $(left 45) compute-sanitizer --tool racecheck --print-limit 20 build-carry/test-cur --gtest_filter='*ScreenedLmHead*/7' > "$OUT/racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E "Race reported|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | head -8
