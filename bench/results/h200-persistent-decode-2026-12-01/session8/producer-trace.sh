#!/usr/bin/env bash
# Session 8: a trace (clock64) of the persistent decode kernel with the producer warp's TMA ring
# (producer-warp-ring-attempt.patch, then producer-tile-trace.patch: layer 10 of the 40th launch, blocks 0 and 100, thread 0's tiles and
# stage marks and the producer's copies), at batch 1, prompt 512, 64 tokens.
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session8/producer-trace.sh"
#                carry=[".sysroot"]
# Out ($OUT): build.log, pt.txt; summary: python3 .../session8/producer-trace.py FILE
here=bench/results/h200-persistent-decode-2026-12-01/session8
grep -q EngineDlRing kernels/cuda/engine/qwen3_engine.cu || git apply "$here/producer-warp-ring-attempt.patch" || exit 1
git apply "$here/producer-tile-trace.patch" || exit 1
source scripts/device-prologue.sh
bin=./build-device/thrive; model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
timeout 150 $bin e2e --device cuda --model $model --batch 1 --prompt 512 --kernels best --graphs on --gen 64 > "$OUT/pt.txt" 2>&1
echo "== trace: $(grep -c '^TT' $OUT/pt.txt) lines"; grep -E "ms/step" "$OUT/pt.txt" | head -2
python3 "$here/producer-trace.py" "$OUT/pt.txt" | fold -w 4000
