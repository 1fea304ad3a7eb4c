#!/usr/bin/env bash
# Run 1 (H200): the tensor-core attention parts of the persistent decode kernel. Builds `thrive`
# and the CUDA engine tests, runs the persistent, GQA, device-loop and stage tests, then `thrive e2e`
# on the random Qwen3-1.7B checkpoint (prompt 512, 64 tokens, best kernels, graphs): batch 1 with
# the tensor-core parts and with the CUDA-core parts (--persistent-attention cores), batch 4 with both.
#   device tool: run command="bash bench/results/h200-tc-attention-2026-12-02/run1-check.sh" carry=[".sysroot"]
# Out ($OUT): build.log, gtest.log, e2e-*.json.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
  -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
  -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" > "$OUT/build.log" 2>&1 &&
  cmake --build build-device -j "$(nproc)" --target thrive model_test_cuda_engine >> "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
model=/tmp/qwen3-1.7b-random
timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null &
init=$!
filter=${FILTER:-"*Persistent*:*GreedyLoop*:*GqaGroups*:*CudaEngineStages*"}
timeout 400 ./build-device/tests/model_test_cuda_engine --gtest_filter="$filter" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests ran" "$OUT/gtest.log" | head -30
grep -B2 -A12 "Failure" "$OUT/gtest.log" | head -60
wait $init || exit 1
e2e() {  # name, then flags
  local name=$1; shift
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --prompt 512 --gen 64 --kernels best \
    --graphs on --json "$@" > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $name: exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$name.json" "  $name" --layer
}
for r in ${RUNS:-b1-tc b1-cores b1-tc2 b4-tc b4-cores}; do
  case $r in
    b1-tc|b1-tc2) e2e $r --batch 1 ;;
    b1-cores) e2e $r --batch 1 --persistent-attention cores ;;
    b4-tc) e2e $r --batch 4 ;;
    b4-cores) e2e $r --batch 4 --persistent-attention cores ;;
  esac
done
tail -5 "$OUT/e2e-stderr.log"
