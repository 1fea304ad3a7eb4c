#!/usr/bin/env bash
# Run 1 (H200; run it at commit b33fae7, which has the --persistent-tma flag): the persistent kernel's weight tiles by TMA (one cp.async.bulk.tensor a warp
# slice, mbarriers) against cp.async (--persistent-tma off), alternating, at batch 1 and 4; the
# attention split count at batch 1 with TMA; prompt 512, 64 tokens, best kernels, graphs. Then the
# persistent, batch-1, GQA and greedy-loop tests (the persistent cases run both tile paths).
#   device tool: run command="bash bench/results/h200-tma-2026-12-03/run1.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-*.json, e2e-stderr.log, gtest.log.
set -uo pipefail
cd "$(dirname "$0")/../../.."
BUILD_TARGETS="thrive model_test_cuda_engine" source scripts/device-prologue.sh
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
for r in ${RUNS:-b1-tma b1-cpa b1-tma2 b1-cpa2 b1-tma-s6 b1-tma-s12 b1-tma-s16 b4-tma b4-cpa}; do
  batch=${r%%-*}; batch=${batch#b}
  flags=""
  case $r in *cpa*) flags="--persistent-tma off" ;; esac
  case $r in *-s[0-9]*) flags="$flags --persistent-splits ${r##*-s}" ;; esac
  # shellcheck disable=SC2086
  timeout 90 ./build-device/thrive e2e --device cuda --model $model --batch "$batch" --prompt 512 --gen 64 --kernels best \
    --graphs on --json $flags > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
done
timeout 240 ./build-device/tests/model_test_cuda_engine --gtest_filter="${FILTER:-*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*}" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest.log" | head -20
