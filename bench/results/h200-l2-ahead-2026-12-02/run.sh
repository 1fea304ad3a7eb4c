#!/usr/bin/env bash
# Run 1 (H200): the persistent decode kernel's L2 lookahead (--persistent-l2-ahead), first version
# (thread 0's cp.async.bulk.prefetch.L2, inlined in the ring's tile issue). The lookahead was
# measured slower and is not in the engine: this script first applies run1-kernel.patch and
# host.patch (made against e1ed0f6) to the working tree. Configures and
# builds `thrive` and the CUDA engine tests, runs the tests of FILTER (none when empty), then
# `thrive e2e` on the random Qwen3-1.7B checkpoint (prompt 512, GEN tokens, best kernels, graphs)
# for each of RUNS: name=flags, the flags' commas read as spaces.
#   device tool: run command="RUNS='...' bash bench/results/h200-l2-ahead-2026-12-02/run.sh" carry=[".sysroot"]
# Out ($OUT): build.log, gtest.log, e2e-NAME.json, e2e-stderr.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
git apply "$here/run1-kernel.patch" "$here/host.patch" || exit 1
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
[ -f $model/config.json ] || timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null &
init=$!
if [ -n "${FILTER:-}" ]; then
  timeout 400 ./build-device/tests/model_test_cuda_engine --gtest_filter="$FILTER" > "$OUT/gtest.log" 2>&1
  echo "gtest exit $?"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests ran" "$OUT/gtest.log" | head -30
  grep -B2 -A12 "Failure" "$OUT/gtest.log" | head -60
fi
wait $init || exit 1
for r in ${RUNS:-}; do
  name=${r%%=*}; flags=${r#*=}
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --prompt 512 --gen "${GEN:-64}" --kernels best \
    --graphs on --json ${flags//,/ } > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $name ($flags): exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$name.json" "  $name" --layer
done
tail -3 "$OUT/e2e-stderr.log" 2>/dev/null
