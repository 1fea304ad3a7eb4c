#!/usr/bin/env bash
# Run 2 (H200, 2026-12-04): flag-only checks of the persistent kernel as committed (run 1's carried
# binary with --lm-head gemm, which is the committed engine's lm_head): the ring depth
# (--persistent-stages 4, 5 against the automatic 6) and the attention split count
# (--persistent-splits 6, 12, 16 against the automatic 9) with the KV prefetch off (its default since
# 2026-12-02; the depth was last compared with it on). Batch 1, prompt 512, 64 tokens, CUDA graphs,
# no memory seeded; the automatic setting first and last.
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run2.sh" carry=["build-carry"]
#   (build-carry/ as run1.sh's header makes it)
# Out ($OUT): e2e-<name>.json (7), e2e-stderr.log.
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
e2e() {  # name, then flags
  local name=$1; shift
  timeout 90 build-carry/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
    --graphs on --persistent on --lm-head gemm --json "$@" > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log" || echo "$name: exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$name.json" "  $name" --layer
}
e2e auto
e2e st5 --persistent-stages 5
e2e st4 --persistent-stages 4
e2e sp6 --persistent-splits 6
e2e sp12 --persistent-splits 12
e2e sp16 --persistent-splits 16
e2e auto-2
