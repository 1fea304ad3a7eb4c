#!/usr/bin/env bash
# The screening ring's H200 figure (if the call gets an H200) and the racecheck follow-up of run 1:
# engine_block_sum's hazards, on the persistent instances alone, with PDL on and off.
# Binaries built here at e157b2d (build-carry/): thrive-cur, test-cur.
#   device tool: run command="bash bench/results/screen-ring-2026-12-07/run3.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-cur test-cur
left() { local n=$(( 400 - SECONDS < $1 ? 400 - SECONDS : $1 )); echo $(( n < 1 ? 1 : n )); }
mkdir -p "$OUT/run3"
for i in 1 2 3; do e2e cur-b1-$i "$OUT/run3" thrive-cur 1; done
# CudaEngineScreenedLmHead/3: persistent, batch 1, PDL on; CudaEnginePersistent/0: PDL on, /2: PDL off
for f in '*ScreenedLmHead*/3' 'BatchAndPdl/CudaEnginePersistent.*/2' 'BatchAndPdl/CudaEnginePersistent.*/0'; do
  n=$(echo "$f" | tr -c 'A-Za-z0-9\n' '_')
  echo "racecheck $f start at ${SECONDS} s"
  timeout $(left 70) compute-sanitizer --tool racecheck --print-limit 10 build-carry/test-cur --gtest_filter="$f" > "$OUT/run3/racecheck-$n.log" 2>&1
  echo "racecheck $f exit $?"; grep -E "Race reported|RACECHECK SUMMARY|PASSED|FAILED|hazard" "$OUT/run3/racecheck-$n.log" | head -6
done
