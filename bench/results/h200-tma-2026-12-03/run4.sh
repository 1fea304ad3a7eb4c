#!/usr/bin/env bash
# Run 4 (H200): the TMA-only weight stream (tma-only.patch applied to 051776b: the cp.async path
# removed from the persistent kernel, the tensor maps' base in shared memory, the mbarrier phase
# folded into the stage register) against the kernel of 051776b (old-engine.cu, made first with
# `git show 051776b:kernels/cuda/engine/qwen3_engine.cu > bench/results/h200-tma-2026-12-03/old-engine.cu`;
# cp.async, --persistent-tma off so that the host adds no tensor maps), alternating, at batch 1 (and once at batch 4); then the persistent, GQA,
# greedy-loop and batch-1 tests on the TMA kernel (the persistent cases that ask for cp.async,
# 13-15, are left out: this kernel has no cp.async path).
#   device tool: run command="bash bench/results/h200-tma-2026-12-03/run4.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-*.json, e2e-stderr.log, gtest.log.
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=bench/results/h200-tma-2026-12-03
BUILD_TARGETS="thrive model_test_cuda_engine" source scripts/device-prologue.sh
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
cp kernels/cuda/engine/qwen3_engine.cu /tmp/tma-engine.cu
e2e() {  # name batch flags...
  local r=$1 b=$2; shift 2
  timeout 90 ./build-device/thrive e2e --device cuda --model $model --batch "$b" --prompt 512 --gen 64 --kernels best \
    --graphs on --json "$@" > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
}
use() {  # kernel file
  cp "$1" kernels/cuda/engine/qwen3_engine.cu
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { echo "build failed"; exit 1; }
}
e2e b1-tma 1
e2e b4-tma 4
timeout 240 ./build-device/tests/model_test_cuda_engine \
  --gtest_filter="${FILTER:-*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*:-*CudaEnginePersistent.*/13:*CudaEnginePersistent.*/14:*CudaEnginePersistent.*/15}" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest.log" | head -20
use $here/old-engine.cu
e2e b1-old 1 --persistent-tma off
use /tmp/tma-engine.cu
e2e b1-tma2 1
use $here/old-engine.cu
e2e b1-old2 1 --persistent-tma off
e2e b4-old 4 --persistent-tma off
use /tmp/tma-engine.cu
