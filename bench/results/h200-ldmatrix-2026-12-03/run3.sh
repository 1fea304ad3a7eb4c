#!/usr/bin/env bash
# Run 3 (H200, 2026-12-03): two timing experiments on the persistent decode kernel at batch 1.
# The trace runs first, then the variants.
# (1) Backing off between polls of tagged words (backoff.py): "onap" sleeps 128 ns after each miss
#     in the o stage's wait for the attention output only, "allnap" in every tagged-word wait;
#     alternating with the committed kernel (scripts/device-kernel-variants.sh).
# (2) A trace of layer 14's attention stage (trace.py: %globaltimer kept in device memory, printed
#     after the last layer), batch 1, prompt 512, 4 tokens, CUDA graphs off; trace_summary.py
#     prints the phases. Timing only: the sources are restored at the end.
#   device tool: run command="bash bench/results/h200-ldmatrix-2026-12-03/run3.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-variant-*.json (6), trace.txt (an empty e2e-stderr.log is removed: the
# device tool returns at most 8 files, and in call 3 trace.txt was the ninth).
# (After call 3: the trace run's exit status and non-trace output are printed, a failed trace build
# skips the trace run, and the empty stderr log is removed.)
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=bench/results/h200-ldmatrix-2026-12-03
src=kernels/cuda/engine/qwen3_engine.cu
BUILD_TARGETS=thrive source scripts/device-prologue.sh
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
cp $src /tmp/engine-trace-base.cu
python3 $here/trace.py $src || exit 1
if cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1; then
  timeout 150 ./build-device/thrive e2e --device cuda --model /tmp/qwen3-1.7b-random --batch 1 --prompt 512 --gen 4 \
    --kernels best --graphs off --persistent on > /tmp/trace-raw.txt 2>&1
  echo "trace run: exit $?"
  grep -vE "^TR[BP] " /tmp/trace-raw.txt | tail -5
  grep -E "^TR[BP] " /tmp/trace-raw.txt > "$OUT/trace.txt"
  echo "trace: $(wc -l < "$OUT/trace.txt") lines"
  python3 $here/trace_summary.py "$OUT/trace.txt"
else
  echo "trace build failed"; tail -20 "$OUT/build.log"
fi
cp /tmp/engine-trace-base.cu $src
BUILD_TARGETS=thrive KVARIANTS="base||--persistent on
onap|!python3 $here/backoff.py $src o 128|--persistent on
allnap|!python3 $here/backoff.py $src all 128|--persistent on
base||--persistent on
onap|!python3 $here/backoff.py $src o 128|--persistent on
allnap|!python3 $here/backoff.py $src all 128|--persistent on" bash scripts/device-kernel-variants.sh
[ -s "$OUT/e2e-stderr.log" ] || rm -f "$OUT/e2e-stderr.log"
