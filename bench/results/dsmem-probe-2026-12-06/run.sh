#!/usr/bin/env bash
# device tool: run command="bash bench/results/dsmem-probe-2026-12-06/run.sh" timeout_s=240
# Builds probe4.cu on the GPU machine and runs it (64 kernels of ~0.2 ms; killed at 120 s).
# Out ($OUT): gpu.txt, probe4.txt.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/probe4-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$OUT/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/probe4 probe4.cu || exit 1
timeout 120 /tmp/probe4 | tee "$OUT/probe4.txt"
echo "probe4: exit ${PIPESTATUS[0]}"
