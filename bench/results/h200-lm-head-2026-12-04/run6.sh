#!/usr/bin/env bash
# Run 6 (H200, 2026-12-04): why is a ring of 5 stages faster than 4 or 6? trace.py's trace of layer
# 14's attention stage (../h200-ldmatrix-2026-12-03/: batch 1, prompt 512, 4 tokens, graphs off)
# at --persistent-stages 4, 5 and 6, with a binary built on a CPU machine and carried.
# To make build-carry/thrive-trace (git-ignored), in the repository root after scripts/setup.sh
# (here in a separate worktree, so the working tree's kernel is not touched):
#   git worktree add /tmp/tracewt HEAD && cd /tmp/tracewt &&
#   python3 bench/results/h200-ldmatrix-2026-12-03/trace.py kernels/cuda/engine/qwen3_engine.cu &&
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build --target thrive &&
#   cp build/thrive /work/main/build-carry/thrive-trace   (libraries as run4.sh's header says)
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run6.sh" carry=["build-carry"]
# Out ($OUT): trace-st4.txt, trace-st5.txt, trace-st6.txt.
source "$(dirname "$0")/common.sh"
prepare thrive-trace
here=bench/results/h200-ldmatrix-2026-12-03
for ns in 4 5 6; do
  timeout 60 build-carry/thrive-trace e2e --device cuda --model $model --batch 1 --prompt 512 --gen 4 \
    --kernels best --graphs off --persistent on --persistent-stages $ns > /tmp/trace-raw.txt 2>&1
  echo "== stages $ns: exit $?"
  grep -E "^TR[BP] " /tmp/trace-raw.txt > "$OUT/trace-st$ns.txt"
  python3 $here/trace_summary.py "$OUT/trace-st$ns.txt" | sed -n '/^median over/,$p'
done
