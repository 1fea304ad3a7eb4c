#!/usr/bin/env bash
# Session 10, run 3: the attention stage's 32-bit indices and late-built operands (this tree), then
# four 128-thread attention groups a block with 16 keys a part (g4k16: one round of key loads a
# part), against the session's starting kernel (BASE_REV, default 4e88145). Builds only `thrive`
# and the CUDA engine's tests; runs the persistent-kernel tests on this tree and on g4k16; times
# `thrive e2e` at batch 1, prompt 512, 64 tokens for each.
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session10/run3-check.sh"
#                carry=[".sysroot"]
# Out ($OUT): build.log, gtest-*.log, e2e-*.json.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
base=${BASE_REV:-4e88145}
src=kernels/cuda/engine/qwen3_engine.cu
host=src/model/cuda_engine.cpp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
  -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
  -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" > "$OUT/build.log" 2>&1 || exit 1
build() { cmake --build build-device -j "$(nproc)" --target thrive model_test_cuda_engine >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; return 1; }; }
gtests() {
  ./build-device/tests/model_test_cuda_engine --gtest_filter="${FILTER:-*Persistent*:*GreedyLoop*:*GqaGroups*:*CudaEngineStages*}" > "$OUT/gtest-$1.log" 2>&1
  echo "gtest $1: exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest-$1.log" | head -12
}
model=/tmp/qwen3-1.7b-random
e2e() {
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
    --graphs on --json > "$OUT/e2e-$1.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $1: exit $?"; python3 scripts/e2e_summary.py "$OUT/e2e-$1.json" "  $1" --layer
}
cp $src /tmp/src.cu; cp $host /tmp/host.cpp
build || exit 1
gtests new
timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null || exit 1
e2e new
sed -i 's/kDlAttnGroups = 2;/kDlAttnGroups = 4;/' $src $host
sed -i 's/kDlKeysPerPart = 32;/kDlKeysPerPart = 16;/' $host
build && { e2e g4k16; FILTER="*Persistent*:*GreedyLoop*" gtests g4k16; }
git show "$base:$src" > $src; git show "$base:$host" > $host
cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 && e2e base
cp /tmp/src.cu $src; cp /tmp/host.cpp $host
e2e_again() { cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 && e2e new2; }
e2e_again
