#!/usr/bin/env bash
# After run 1 (the one-launch kernel dropped): the committed two-kernel screened lm_head with every
# row whose sums might overflow a candidate in engine_argmax_screened. Its GPU tests: the screened
# lm_head's (with the new overflow-count test) and the non-finite logits'.
#   Build here first (as run1.sh); device tool: run command="bash bench/results/lm-head-fused-2026-12-06/run2.sh"
#   carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%Y-%m-%dT%H:%MZ
timeout 300 build-carry/model_test_cuda_engine --gtest_filter='*ScreenedLmHead*:*NonFinite*' > "$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran|^\[       OK \]" "$OUT/tests.log" | head -30
