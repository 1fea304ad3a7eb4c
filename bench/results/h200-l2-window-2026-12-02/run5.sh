#!/usr/bin/env bash
# Run 5 (H200): the KV-cache prefetch off by default (the committed kernel, unchanged): batch 1
# with the defaults twice, then with --persistent-kv-prefetch on; batch 4 with the defaults and
# with the prefetch on; prompt 512, 64 tokens, best kernels, graphs. Then the persistent, batch-1,
# GQA and greedy-loop tests (which set the prefetch both ways or take the default).
#   device tool: run command="bash bench/results/h200-l2-window-2026-12-02/run5.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-*.json, e2e-stderr.log, gtest.log.
set -uo pipefail
cd "$(dirname "$0")/../../.."
BUILD_TARGETS="thrive model_test_cuda_engine" source scripts/device-prologue.sh
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
for r in b1-default b1-kvon b1-default2 b4-default b4-kvon; do
  batch=${r%%-*}; batch=${batch#b}
  flags=""; case $r in *kvon) flags="--persistent-kv-prefetch on" ;; esac
  # shellcheck disable=SC2086
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch "$batch" --prompt 512 --gen 64 --kernels best \
    --graphs on --json $flags > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
done
timeout 200 ./build-device/tests/model_test_cuda_engine --gtest_filter="${FILTER:-*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*}" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest.log" | head -20
