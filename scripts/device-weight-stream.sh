#!/usr/bin/env bash
# The weight-streaming microbenchmark (bench/micro/weight_stream.cu) on the GPU machine: builds it
# with the machine's nvcc for sm_90 and runs it for K = 2048 and 6144 (Qwen3-1.7B's hidden and
# intermediate sizes). Needs no THRIVE build.
#   device tool: run command="bash scripts/device-weight-stream.sh"
# Out ($OUT): weight-stream.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
bin=$(mktemp -d)/weight_stream
nvcc -O3 -arch=sm_90 -std=c++17 -o "$bin" bench/micro/weight_stream.cu -lcuda || exit 1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  date -u +%Y-%m-%dT%H:%MZ
  for k in 2048 6144; do "$bin" "$k" "${REPS:-20}"; done
} 2>&1 | tee "$OUT/weight-stream.txt"
