#!/usr/bin/env bash
# Run 4 (H200, 2026-12-04): the automatic ring depth of the persistent kernel changed to 5 (at most;
# it was as many as fit, 6 at batch 1), built on a CPU machine and carried: the CUDA engine's GPU
# tests, `thrive e2e` with the defaults (no --persistent-stages) at batch 1 twice and batch 4 once
# (prompt 512, 64 tokens, CUDA graphs, no memory seeded), and the Hugging Face comparison.
# To make build-carry/ (git-ignored), in the repository root after scripts/setup.sh:
#   mkdir -p build-carry/lib && cmake --build build -j8 && cp build/thrive build/tests/model_test_cuda_engine build-carry/
#   cp -L /lib/x86_64-linux-gnu/{libspdlog.so.1.10,libfmt.so.9,libsqlite3.so.0} build-carry/lib/
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run4.sh" carry=["build-carry"]
# Out ($OUT): gtest-cuda-engine.txt, e2e-b1-default{,-2}.json, e2e-b4-default.json, hf-compare.json,
# e2e-stderr.log.
source "$(dirname "$0")/common.sh"
prepare thrive model_test_cuda_engine
timeout 300 build-carry/model_test_cuda_engine > "$OUT/gtest-cuda-engine.txt" 2>&1
echo "model_test_cuda_engine: exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|FAILED  \]" "$OUT/gtest-cuda-engine.txt" | head -20
e2e b1-default "$OUT" thrive 1
e2e b4-default "$OUT" thrive 4
e2e b1-default-2 "$OUT" thrive 1
timeout 200 python3 scripts/hf_compare.py --model $model --thrive build-carry/thrive --steps 32 --out "$OUT/hf-compare.json"
echo "hf_compare exit $?"
