#!/usr/bin/env bash
# Run 2 (H200): per-block timeline of layer 14 in the stage-timed eager steps (trace_patch.py:
# thread 0 of each block, 12 points, printed after the layer loop), batch 1, prompt 512, with
# each line of FLAGS (default: the engine's defaults, then --persistent-qkv-prefetch on).
# Timing only: the kernel source is restored at the end.
#   device tool: run command="bash bench/results/h200-l2-window-2026-12-02/trace.sh" carry=[".sysroot"]
# (Run 2 ran with run1-prefetch.patch applied, which the second flag line needs.)
# Out ($OUT): build.log, trace-N.txt (raw TR lines), trace-N-summary.txt.
set -uo pipefail
here=bench/results/h200-l2-window-2026-12-02
src=kernels/cuda/engine/qwen3_engine.cu
cd "$(dirname "$0")/../../.."
cp $src /tmp/engine-untraced.cu
python3 $here/trace_patch.py $src || exit 1
BUILD_TARGETS=thrive source scripts/device-prologue.sh
cp /tmp/engine-untraced.cu $src
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
flags=${FLAGS-"--persistent on
--persistent on --persistent-qkv-prefetch on"}
i=0
while IFS= read -r f; do
  [ -n "$f" ] || continue
  i=$((i + 1))
  echo "== trace $i: $f"
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 4 --kernels best \
    --graphs on $f 2>&1 | grep "^TR " > "$OUT/trace-$i.txt"
  python3 $here/trace_summary.py "$OUT/trace-$i.txt" | tee "$OUT/trace-$i-summary.txt"
done <<< "$flags"
