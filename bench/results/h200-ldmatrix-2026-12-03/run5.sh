#!/usr/bin/env bash
# Run 5 (H200, 2026-12-03): run4.sh's question with binaries built on this (CPU) machine and
# carried, as too little device time was left for a build there: does the ring's in-flight
# weight traffic delay the attention parts? trace.py's trace of layer 14 (batch 1, prompt 512,
# 4 tokens, graphs off), in order: the default ring (NS 6); NS 6 with waitall.py (each part's block
# first waits for its own ring copies to land); --persistent-stages 2. Then, where build-carry/ has
# them, the step time of the untraced kernel against the same with waitall.py alone (batch 1,
# 64 tokens, CUDA graphs), alternating: the net effect, drain wait included.
# To make build-carry/ (git-ignored), in the repository root after scripts/setup.sh:
#   cp kernels/cuda/engine/qwen3_engine.cu /tmp/orig.cu
#   python3 bench/results/h200-ldmatrix-2026-12-03/trace.py kernels/cuda/engine/qwen3_engine.cu
#   cmake --build build --target thrive && mkdir -p build-carry/lib && cp build/thrive build-carry/thrive-trace
#   python3 bench/results/h200-ldmatrix-2026-12-03/waitall.py kernels/cuda/engine/qwen3_engine.cu
#   cmake --build build --target thrive && cp build/thrive build-carry/thrive-trace-waitall
#   cp /tmp/orig.cu kernels/cuda/engine/qwen3_engine.cu && cmake --build build --target thrive
#   cp build/thrive build-carry/thrive-base
#   python3 bench/results/h200-ldmatrix-2026-12-03/waitall.py kernels/cuda/engine/qwen3_engine.cu
#   cmake --build build --target thrive && cp build/thrive build-carry/thrive-waitall
#   cp /tmp/orig.cu kernels/cuda/engine/qwen3_engine.cu && cmake --build build --target thrive
#   cp -L /lib/x86_64-linux-gnu/{libspdlog.so.1.10,libfmt.so.9,libsqlite3.so.0} build-carry/lib/
#   device tool: run command="bash bench/results/h200-ldmatrix-2026-12-03/run5.sh" carry=["build-carry"]
# Out ($OUT): trace-ns6.txt, trace-waitall.txt, trace-ns2.txt, e2e-{base,waitall}{,-2}.json,
# e2e-stderr.log.
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=bench/results/h200-ldmatrix-2026-12-03
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build-carry/lib THRIVE_HOME=/tmp/thrive-home
ldd build-carry/thrive-trace | grep "not found"
model=/tmp/qwen3-1.7b-random
timeout 60 build-carry/thrive-trace model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || { echo "init failed"; exit 1; }
trace() {  # name, binary, then e2e flags
  local name=$1 bin=$2; shift 2
  timeout 50 "$bin" e2e --device cuda --model $model --batch 1 --prompt 512 --gen 4 \
    --kernels best --graphs off --persistent on "$@" > /tmp/trace-raw.txt 2>&1
  echo "== $name: exit $?"
  grep -vE "^TR[BP] " /tmp/trace-raw.txt | tail -2
  grep -E "^TR[BP] " /tmp/trace-raw.txt > "$OUT/trace-$name.txt"
  python3 $here/trace_summary.py "$OUT/trace-$name.txt" | sed -n '/^median over/,$p' |
    grep -E "qkv_end_max|entry_med|query_med|query_max|partials_max|merged_max|o_in_med|o_in_max|d:"
}
trace ns6 build-carry/thrive-trace
trace waitall build-carry/thrive-trace-waitall
trace ns2 build-carry/thrive-trace --persistent-stages 2
for r in base waitall base-2 waitall-2; do
  bin=build-carry/thrive-${r%-2}
  [ -x "$bin" ] || { echo "no $bin: e2e skipped"; break; }
  timeout 60 "$bin" e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best --graphs on \
    --persistent on --json > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
done
