#!/usr/bin/env bash
# The persistent decode kernel's ring depth against the layered path on the GPU machine: build,
# then `thrive e2e` at batch BATCH (default 1), prompt 512, 64 tokens, best kernels, graphs, for each line of
# FLAGS (default: --persistent-stages 2, 3, 4, the automatic depth, and --persistent off), printing
# ms/step and the eager per-layer stage split (µs).
#   device tool: run command="bash scripts/device-persistent-stages.sh" carry=[".sysroot", ".device-home"]
# Out ($OUT): build.log, e2e-b<batch><flags>.json.
set -uo pipefail
source "$(dirname "$0")/device-prologue.sh"
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
flags=${FLAGS-"--persistent on --persistent-stages 2
--persistent on --persistent-stages 3
--persistent on --persistent-stages 4
--persistent on
--persistent off"}
while IFS= read -r f; do
  [ -n "$f" ] || continue
  n=$(echo "$f" | tr -d ' -')
  timeout 150 $bin e2e --device cuda --model $model --batch ${BATCH:-1} --prompt 512 --kernels best --graphs on --json \
    --gen 64 $f > "$OUT/e2e-b${BATCH:-1}$n.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-b${BATCH:-1}$n.json" "b${BATCH:-1} $f" --layer
done <<< "$flags"
