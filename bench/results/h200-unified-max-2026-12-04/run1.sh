#!/usr/bin/env bash
# Nineteenth pass, call 1 (H200, 2026-12-04): the unified-max attention parts against the merge.
#   device tool: run command="bash bench/results/h200-unified-max-2026-12-04/run1.sh" carry=["build-carry"]
#   build-carry/: thrive and model_test_cuda_engine built from the working tree (cmake --build build
#   --target thrive model_test_cuda_engine; copied there); lib/ = libfmt.so.9, libspdlog.so.1.10,
#   libsqlite3.so.0 from the CPU machine (Debian 12).
# Out ($OUT): tests.txt (the persistent-kernel GPU tests), e2e-{um,merge}{1,2}.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive model_test_cuda_engine
e2e um1 "$OUT" thrive 1 --persistent-softmax unified
e2e merge1 "$OUT" thrive 1 --persistent-softmax merge
e2e um2 "$OUT" thrive 1 --persistent-softmax unified
e2e merge2 "$OUT" thrive 1 --persistent-softmax merge
timeout 240 build-carry/model_test_cuda_engine --gtest_filter='*Softmax*:*CudaEnginePersistent*' > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$OUT/tests.txt" | head -30
