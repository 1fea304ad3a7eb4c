#!/usr/bin/env bash
# device tool: run command="bash bench/results/h200-idle-sm-probe-2026-12-06/run.sh" timeout_s=240
# Builds probe3.cu on the GPU machine and runs it (16 kernels of ~0.2 ms; killed at 120 s).
# Out ($OUT): gpu.txt, probe3.txt, probe3-nohint.txt.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/probe3-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$OUT/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/probe3 probe3.cu || exit 1
nvcc -O3 -arch=sm_90 -DPROBE_NO_HINT -o /tmp/probe3-nohint probe3.cu || exit 1
timeout 120 /tmp/probe3 | tee "$OUT/probe3.txt"
echo "probe3: exit ${PIPESTATUS[0]}"
# the same without the L2 evict-first hint
timeout 120 /tmp/probe3-nohint | tee "$OUT/probe3-nohint.txt"
echo "probe3-nohint: exit ${PIPESTATUS[0]}"
