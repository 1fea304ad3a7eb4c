#!/usr/bin/env bash
# Run 3 (H200): the tagged-word stage handoffs (o -> gate/up, gate/up -> down, down -> next qkv;
# run3-handoffs.patch against the kernel before) A/B against the kernel before, alternating builds
# of `thrive` (new, old, new, old: `old` = the working tree's kernel with the patch reversed), batch
# 1 (and 4 for the new kernel), prompt 512, 64 tokens, best kernels, graphs; then the persistent,
# GQA and greedy-loop tests of the new kernel.
#   device tool: run command="bash bench/results/h200-l2-window-2026-12-02/run3.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-*.json, e2e-stderr.log, gtest.log.
set -uo pipefail
here=bench/results/h200-l2-window-2026-12-02
src=kernels/cuda/engine/qwen3_engine.cu
cd "$(dirname "$0")/../../.."
BUILD_TARGETS="thrive model_test_cuda_engine" source scripts/device-prologue.sh
cp $src /tmp/engine-new.cu
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
for r in ${RUNS:-new-b1 old-b1 new-b1b old-b1b new-b4}; do
  cp /tmp/engine-new.cu $src
  case $r in old*) patch -s -R -p1 < $here/run3-handoffs.patch || exit 1 ;; esac
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  batch=${r#*-b}; batch=${batch%b}
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch "$batch" --prompt 512 --gen 64 --kernels best \
    --graphs on --json > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $r: exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
done
cp /tmp/engine-new.cu $src
timeout 300 ./build-device/tests/model_test_cuda_engine --gtest_filter="${FILTER:-*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*}" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest.log" | head -20
