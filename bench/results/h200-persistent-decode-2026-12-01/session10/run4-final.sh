#!/usr/bin/env bash
# Session 10, run 4: the committed tree's CUDA tests, batch 1, 4 and 256 end to end and the
# Hugging Face comparison (scripts/device-e2e.sh), then one variant timed at batch 1 with the
# persistent-kernel tests: the attention parts' key and value loads through L2 only (__ldcg: the
# L1, 28 KiB beside the ring, then keeps the threads' spilled registers instead of once-read keys).
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session10/run4-final.sh"
#                carry=[".sysroot"]
# Out ($OUT): device-e2e.sh's files, then gtest-ldcg.log, e2e-ldcg.json.
cd "$(dirname "$0")/../../../.."
TESTS="CudaEngine|Gqa|Attention|Persistent|Greedy|Cuda" RUNS="b1-best b4-best b256-best" GEN=64 bash scripts/device-e2e.sh
OUT=${OUT:-/tmp/thrive-out}
src=kernels/cuda/engine/qwen3_engine.cu
sed -i 's/kv\[u\] = \*(const uint4\*)(kb + (long long)j \* stride), vv\[u\] = \*(const uint4\*)(vb + (long long)j \* stride);/kv[u] = __ldcg((const uint4*)(kb + (long long)j * stride)), vv[u] = __ldcg((const uint4*)(vb + (long long)j * stride));/' $src
git diff --stat -- $src
cmake --build build-device -j "$(nproc)" --target thrive model_test_cuda_engine >> "$OUT/build.log" 2>&1 || exit 1
./build-device/tests/model_test_cuda_engine --gtest_filter="*Persistent*:*GreedyLoop*" > "$OUT/gtest-ldcg.log" 2>&1
echo "gtest ldcg: exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest-ldcg.log" | head
for i in 1 2; do
  timeout 150 ./build-device/thrive e2e --device cuda --model /tmp/qwen3-1.7b-random --batch 1 --prompt 512 --gen 64 \
    --kernels best --graphs on --json > "$OUT/e2e-ldcg$i.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-ldcg$i.json" "  ldcg$i" --layer
done
git checkout -- $src
