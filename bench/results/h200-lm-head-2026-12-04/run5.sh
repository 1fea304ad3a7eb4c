#!/usr/bin/env bash
# Run 5 (H200, 2026-12-04): with the ring at 5 stages (run 4's build), do the attention splits or
# the KV prefetch want retuning? Batch 1, prompt 512, 64 tokens, CUDA graphs, no memory seeded:
# the default (9 splits), --persistent-splits 7, 8, 10, 12, --persistent-kv-prefetch on, the default again.
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run5.sh" carry=["build-carry"]
#   (build-carry/ as run4.sh's header makes it)
# Out ($OUT): e2e-<name>.json (7), e2e-stderr.log.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build-carry/lib THRIVE_HOME=/tmp/thrive-home
ldd build-carry/thrive | grep "not found" && exit 1
date -u +%Y-%m-%dT%H:%MZ
model=/tmp/qwen3-1.7b-random
[ -f $model/config.json ] || timeout 120 build-carry/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || { echo "init failed"; exit 1; }
e2e() {  # name, then flags
  local name=$1; shift
  timeout 90 build-carry/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
    --graphs on --json "$@" > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log" || echo "$name: exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$name.json" "  $name" --layer
}
e2e default
e2e sp7 --persistent-splits 7
e2e sp8 --persistent-splits 8
e2e sp10 --persistent-splits 10
e2e sp12 --persistent-splits 12
e2e kvpf --persistent-kv-prefetch on
e2e default-2
