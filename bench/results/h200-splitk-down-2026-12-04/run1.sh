#!/usr/bin/env bash
# Run 1 (H200, 2026-12-04): the fused MLP (gate/up -> SwiGLU -> split-K down with red.add, no
# wait between gate/up and down) against the kernel before it. The CUDA engine's GPU tests with the
# new build, then batch 1 (twice, alternating) and batch 4, prompt 512, 64 tokens, CUDA graphs.
#   device tool: run command="bash bench/results/h200-splitk-down-2026-12-04/run1.sh" carry=["build-carry"]
#   build-carry/: thrive-base = `thrive` built at 52d2eb2; thrive and model_test_cuda_engine built
#   at 52d2eb2 with fused-mlp-attempt.patch applied (git apply; cmake --build build --target thrive
#   model_test_cuda_engine; copy them there). Run 1 used the patch's first revision, which kept
#   the MLP buffers' pointers and the sums' address live across the layers (more spills, README.md);
#   the kept patch is run 2's. lib/ = libfmt.so.9, libspdlog.so.1.10, libsqlite3.so.0 from the CPU
#   machine (Debian 12).
# Out ($OUT): tests.txt, e2e-<name>.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-base model_test_cuda_engine
timeout 300 build-carry/model_test_cuda_engine > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests.txt" | head -20
e2e b1-base "$OUT" thrive-base 1
e2e b1-fused "$OUT" thrive 1
e2e b1-base-2 "$OUT" thrive-base 1
e2e b1-fused-2 "$OUT" thrive 1
e2e b4-base "$OUT" thrive-base 4
e2e b4-fused "$OUT" thrive 4
