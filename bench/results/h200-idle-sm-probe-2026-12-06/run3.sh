#!/usr/bin/env bash
# Call 3 (2026-12-06, session 30): the CUDA engine's whole GPU test binary at 6d34b96 (the kernel
# and engine as at 40f9df9; 301cb33's test-only expect_refused helper had not run on a GPU).
#   device tool: run command="bash bench/results/h200-idle-sm-probe-2026-12-06/run3.sh" carry=["build-carry"]
#   build-carry/model_test_cuda_engine built here at 6d34b96; lib/ as in ../h200-lm-head-2026-12-04/common.sh.
# Out ($OUT): tests.txt.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 500 build-carry/model_test_cuda_engine > "$OUT/tests.txt" 2>&1
echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran|SKIPPED \]" "$OUT/tests.txt" | head -20
