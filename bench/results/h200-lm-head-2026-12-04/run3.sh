#!/usr/bin/env bash
# Run 3 (H200, 2026-12-04): run 2's ring-depth result checked: the automatic depth (6 at batch 1)
# against --persistent-stages 5, alternating, three rounds, and 4 twice; batch 4 (automatic depth 5)
# against 4, alternating, two rounds. Same binary and settings as run2.sh (--lm-head gemm: the
# committed engine's lm_head).
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run3.sh" carry=["build-carry"]
# Out ($OUT): e2e-b1-{auto,st5}-3.json, e2e-b4-{auto,st4}-2.json, e2e-stderr.log; the other rounds'
# JSONs stay in /tmp (their summaries are printed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build-carry/lib THRIVE_HOME=/tmp/thrive-home
ldd build-carry/thrive | grep "not found" && exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
date -u +%Y-%m-%dT%H:%MZ
model=/tmp/qwen3-1.7b-random
[ -f $model/config.json ] || timeout 120 build-carry/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || { echo "init failed"; exit 1; }
e2e() {  # name, batch, then flags
  local name=$1 batch=$2; shift 2
  timeout 90 build-carry/thrive e2e --device cuda --model $model --batch $batch --prompt 512 --gen 64 --kernels best \
    --graphs on --persistent on --lm-head gemm --json "$@" > /tmp/e2e-$name.json 2>> "$OUT/e2e-stderr.log" || echo "$name: exit $?"
  python3 scripts/e2e_summary.py /tmp/e2e-$name.json "  $name" --layer
}
for round in 1 2 3; do
  e2e b1-auto-$round 1
  e2e b1-st5-$round 1 --persistent-stages 5
  [ $round -lt 3 ] && e2e b1-st4-$round 1 --persistent-stages 4
done
for round in 1 2; do
  e2e b4-auto-$round 4
  e2e b4-st4-$round 4 --persistent-stages 4
done
cp /tmp/e2e-b1-auto-3.json /tmp/e2e-b1-st5-3.json /tmp/e2e-b4-auto-2.json /tmp/e2e-b4-st4-2.json "$OUT/"
