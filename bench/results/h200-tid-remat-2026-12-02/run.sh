#!/usr/bin/env bash
# H200: the ring's tile issue reading %tid.x afresh (engine_tid_volatile, 8db99aa) against the
# kernel before it (`old`: the same source with threadIdx.x there, by sed), alternating builds of
# `thrive`, batch 1 (and batch 4 for the new kernel), prompt 512, 64 tokens, best kernels, graphs.
# Then the persistent-kernel tests (FILTER) and the GPU outer-loop test alone.
#   device tool: run command="bash bench/results/h200-tid-remat-2026-12-02/run.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-*.json, e2e-stderr.log, gtest.log, system.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
src=kernels/cuda/engine/qwen3_engine.cu
cp $src /tmp/engine-base.cu
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
  -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
  -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" > "$OUT/build.log" 2>&1 &&
  cmake --build build-device -j "$(nproc)" --target thrive model_test_cuda_engine cli_test_cuda_system >> "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
model=/tmp/qwen3-1.7b-random
[ -f $model/config.json ] || timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null
for r in ${RUNS:-new-b1 old-b1 new-b1b old-b1b new-b4}; do
  cp /tmp/engine-base.cu $src
  case $r in old*) sed -i 's/const unsigned tid = engine_tid_volatile();/const unsigned tid = threadIdx.x;/' $src ;; esac
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  batch=${r#*-b}; batch=${batch%b}
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch "$batch" --prompt 512 --gen 64 --kernels best \
    --graphs on --json > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $r: exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
done
cp /tmp/engine-base.cu $src
cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1
timeout 300 ./build-device/tests/model_test_cuda_engine --gtest_filter="${FILTER:-*Persistent*:*GqaGroups*:*GreedyLoop*}" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest.log" | head -20
timeout 200 ./build-device/tests/cli_test_cuda_system > "$OUT/system.log" 2>&1
echo "outer-loop test alone: exit $?"; grep -E "^\[  (PASSED|FAILED) |Failure" "$OUT/system.log" | head
