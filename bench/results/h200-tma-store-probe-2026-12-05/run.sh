#!/usr/bin/env bash
# device tool: run command="bash bench/results/h200-tma-store-probe-2026-12-05/run.sh" timeout_s=240
# (about a minute on the GPU: 36 kernels of ~0.2 ms a depth plus the build; each probe is killed at 120 s)
# DEPTHS: the ring depths to probe (default 5, the kernel's; run 2 used DEPTHS="2 3 5": 1, 2 and 4
# tiles of 32 KiB in flight a block). Out ($OUT): gpu.txt, probe2.txt (depth 5) or probe2-depthN.txt.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/probe2-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$OUT/gpu.txt"
depths=${DEPTHS:-5}
for n in $depths; do
  nvcc -O3 -arch=sm_90 -DPROBE_STAGES=$n -o /tmp/probe2-$n probe2.cu &
done
wait
for n in $depths; do
  name=probe2-depth$n
  [ "$depths" = 5 ] && name=probe2
  echo "== ring depth $n"
  timeout 120 /tmp/probe2-$n | tee "$OUT/$name.txt"
  echo "probe2 depth $n: exit ${PIPESTATUS[0]}"
done
