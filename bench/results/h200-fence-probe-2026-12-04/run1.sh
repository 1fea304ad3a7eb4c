#!/usr/bin/env bash
# device tool: run command="bash bench/results/h200-fence-probe-2026-12-04/run1.sh"
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/probe-out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
date -u +%Y-%m-%dT%H:%MZ
nvcc -O3 -arch=sm_90 -o /tmp/probe probe.cu && /tmp/probe | tee "$OUT/probe.txt"
