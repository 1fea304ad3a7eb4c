#!/usr/bin/env bash
# Run 4 (prepared 2026-12-03, not yet run): does the ring's in-flight weight traffic delay the
# attention parts? trace.py's trace of layer 14 (batch 1, prompt 512, 4 tokens, graphs off) three
# ways: the default ring (NS 6), --persistent-stages 2 (fewer copies in flight at the stage's start),
# and NS 6 with waitall.py (each part's block first waits for its own copies to land). Compare the
# parts' entry-to-query and merge durations (trace_summary.py's d: rows).
#   device tool: run command="bash bench/results/h200-ldmatrix-2026-12-03/run4.sh" carry=[".sysroot"]
# Out ($OUT): build.log, trace-ns6.txt, trace-ns2.txt, trace-waitall.txt.
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=bench/results/h200-ldmatrix-2026-12-03
src=kernels/cuda/engine/qwen3_engine.cu
BUILD_TARGETS=thrive source scripts/device-prologue.sh
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
cp $src /tmp/engine-run4-base.cu
trace() {  # name, then e2e flags
  local name=$1; shift
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { echo "$name: build failed"; tail -20 "$OUT/build.log"; return; }
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 4 \
    --kernels best --graphs off --persistent on "$@" > /tmp/trace-raw.txt 2>&1
  echo "$name run: exit $?"
  grep -vE "^TR[BP] " /tmp/trace-raw.txt | tail -3
  grep -E "^TR[BP] " /tmp/trace-raw.txt > "$OUT/trace-$name.txt"
  echo "== $name: $(wc -l < "$OUT/trace-$name.txt") lines"
  python3 $here/trace_summary.py "$OUT/trace-$name.txt" | sed -n '/^median over/,$p'
}
python3 $here/trace.py $src || exit 1
trace ns6
trace ns2 --persistent-stages 2
python3 $here/waitall.py $src || exit 1
trace waitall
cp /tmp/engine-run4-base.cu $src
