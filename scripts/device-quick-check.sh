#!/usr/bin/env bash
# A short check on the GPU machine when device time is scarce: configure and build only the
# `thrive` binary and the CUDA engine's test executable (device-build.sh with those targets), run
# the engine tests matching FILTER (a gtest filter; default: the persistent kernel, the device
# decode loop, the GQA groups and the stage/bad-input case), then, with E2E=1, write the
# random Qwen3-1.7B checkpoint and run `thrive e2e` at batch 1, prompt 512, 64 tokens.
#   device tool: run command="bash scripts/device-quick-check.sh" carry=[".sysroot"]
# Out ($OUT): build.log, gtest.log, e2e-b1.json (E2E=1).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bash scripts/device-build.sh "$OUT" thrive model_test_cuda_engine || exit 1
filter=${FILTER:-"*Persistent*:*GreedyLoop*:*GqaGroups*:*CudaEngineStages*"}
./build-device/tests/model_test_cuda_engine --gtest_filter="$filter" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests ran" "$OUT/gtest.log" | head -20
if [ "${E2E:-0}" = 1 ]; then
  model=/tmp/qwen3-1.7b-random
  timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null || exit 1
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
    --graphs on --json > "$OUT/e2e-b1.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-b1.json" "  b1" --layer
fi
