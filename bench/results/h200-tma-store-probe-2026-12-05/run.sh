#!/usr/bin/env bash
# device tool: run command="bash bench/results/h200-tma-store-probe-2026-12-05/run.sh" timeout_s=240
# (about a minute on the GPU: 30 kernels of ~0.2 ms plus the build; the probe is killed at 120 s)
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/probe2-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$OUT/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/probe2 probe2.cu && timeout 120 /tmp/probe2 | tee "$OUT/probe2.txt"
echo "probe2: exit ${PIPESTATUS[0]}"
