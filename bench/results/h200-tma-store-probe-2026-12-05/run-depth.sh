#!/usr/bin/env bash
# device tool: run command="bash bench/results/h200-tma-store-probe-2026-12-05/run-depth.sh" timeout_s=300
# probe2 at ring depths 2, 3 and 5 (1, 2 and 4 tiles of 32 KiB in flight a block): does the
# round trip with the ring streaming grow with the bytes the SM has in flight?
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/probe2-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu-depth.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$OUT/gpu-depth.txt"
for n in 2 3 5; do
  nvcc -O3 -arch=sm_90 -DPROBE_STAGES=$n -o /tmp/probe2-$n probe2.cu &
done
wait
for n in 2 3 5; do
  echo "== ring depth $n"
  timeout 120 /tmp/probe2-$n | tee "$OUT/probe2-depth$n.txt"
  echo "probe2 depth $n: exit ${PIPESTATUS[0]}"
done
