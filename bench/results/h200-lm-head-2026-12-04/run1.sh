#!/usr/bin/env bash
# Run 1 (H200, 2026-12-04): lm_head at batch <= 4 by the engine's streaming GEMV (engine_lm_head,
# the final RMSNorm inside it at decode) against cuBLASLt, with binaries built on a CPU machine and
# carried (no device build): the CUDA engine's GPU tests (the new CudaEngineLmHead included), then
# `thrive e2e` at batch 1 (prompt 512, 64 tokens, CUDA graphs, the persistent kernel, no memory
# seeded) alternating --lm-head gemv / gemm / gemv with evict_first.py's L2 hint, two rounds; batch 4
# once each way; then the Hugging Face comparison (scripts/hf_compare.py: batch 1 runs the GEMV).
# To make build-carry/ (git-ignored): build in a worktree of 5de7da5, the tree the patch was made
# on (it does not apply to later ones, whose README and CLI changed), and run this script from the
# current tree. In the repository root after scripts/setup.sh:
#   R=$PWD; H=$R/bench/results/h200-lm-head-2026-12-04; git worktree add /tmp/lmwt 5de7da5 && cd /tmp/lmwt &&
#   git apply $H/lm-head-gemv-attempt.patch && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && F=kernels/cuda/engine/qwen3_engine.cu
#   cp $F /tmp/orig.cu && python3 $H/evict_first.py $F && cmake --build build --target thrive &&
#     mkdir -p $R/build-carry/lib && cp build/thrive $R/build-carry/thrive-ef; cp /tmp/orig.cu $F && cmake --build build -j8
#   cp build/thrive build/tests/model_test_cuda_engine $R/build-carry/ && cd $R
#   cp -L /lib/x86_64-linux-gnu/{libspdlog.so.1.10,libfmt.so.9,libsqlite3.so.0} build-carry/lib/
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run1.sh" carry=["build-carry"]
# Out ($OUT): gtest-cuda-engine.txt, e2e-b1-{gemv,gemm,ef}-2.json, e2e-b4-{gemv,gemm}.json,
# hf-compare.json, e2e-stderr.log (8 files; round 1's JSONs stay in /tmp, their summaries are printed).
source "$(dirname "$0")/common.sh"
prepare thrive thrive-ef model_test_cuda_engine
timeout 300 build-carry/model_test_cuda_engine > "$OUT/gtest-cuda-engine.txt" 2>&1
echo "model_test_cuda_engine: exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|FAILED  \]" "$OUT/gtest-cuda-engine.txt" | head -20
for round in 1 2; do
  e2e b1-gemv-$round /tmp thrive 1 --lm-head gemv
  e2e b1-gemm-$round /tmp thrive 1 --lm-head gemm
  e2e b1-ef-$round /tmp thrive-ef 1 --lm-head gemv
done
e2e b4-gemv /tmp thrive 4 --lm-head gemv
e2e b4-gemm /tmp thrive 4 --lm-head gemm
cp /tmp/e2e-b1-*-2.json /tmp/e2e-b4-*.json "$OUT/"
timeout 200 python3 scripts/hf_compare.py --model $model --thrive build-carry/thrive --steps 32 --out "$OUT/hf-compare.json"
echo "hf_compare exit $?"
