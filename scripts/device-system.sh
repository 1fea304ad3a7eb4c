#!/usr/bin/env bash
# The outer loop (issue 7) on the GPU machine: build, write a random Qwen3-1.7B checkpoint, then
# `thrive optimize --system --device cuda` from the engine with baseline kernels and no graphs
# (no flash attention, fusions or GEMV either), at batch 256, prompt 512.
#   device tool: run command="bash scripts/device-system.sh" carry=[".sysroot", ".device-home"]
# Environment: SEED_HOME=FILE.tgz (a memory with tuned kernels, where the inner loop starts),
# BATCH (256), PROMPT (512), GEN (32), METRIC (mix:0.5), BUDGET (7), RT and AT (thresholds,
# default 0.3 each, the issue's defaults), ROUNDS (inner-loop rounds per kernels-specialist call,
# default 2), LOOP_TIMEOUT_S (default 480).
# Out ($OUT): build.log, system.json (the --json document), system.log (the iterations as they
# happen: progress survives a timeout).
set -uo pipefail
source "$(dirname "$0")/device-prologue.sh"
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
[ -f $model/model.safetensors ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 || exit 1
THRIVE_ROUNDS=${ROUNDS:-2} timeout "${LOOP_TIMEOUT_S:-480}" $bin optimize --system --device cuda --model $model \
  --batch "${BATCH:-256}" --prompt "${PROMPT:-512}" --gen "${GEN:-32}" --metric "${METRIC:-mix:0.5}" \
  --budget "${BUDGET:-7}" --r-t "${RT:-0.3}" --a-t "${AT:-0.3}" --json > "$OUT/system.json" 2> "$OUT/system.log"
echo "optimize --system: exit $? (124: stopped by LOOP_TIMEOUT_S)"
grep -vE "^\s*\[inner loop\]" "$OUT/system.log" | cut -c1-240 | tail -60
