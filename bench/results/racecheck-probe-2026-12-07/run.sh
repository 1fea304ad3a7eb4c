#!/usr/bin/env bash
# racecheck on named_barrier_probe.cu, both modes (device tool: run command="bash bench/results/racecheck-probe-2026-12-07/run.sh").
cd "$(dirname "$0")" && OUT=${OUT:-/tmp/out} && mkdir -p "$OUT"
nvcc -arch=sm_90 -o /tmp/named_barrier_probe named_barrier_probe.cu || exit 1
for m in 0 1; do
  /tmp/named_barrier_probe $m
  compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 4 /tmp/named_barrier_probe $m > "$OUT/racecheck-mode$m.log" 2>&1
  echo "racecheck mode $m exit $?"; grep -E "hazard detected|Thread \(|SUMMARY|wrong" "$OUT/racecheck-mode$m.log" | head -8
done
