#!/usr/bin/env bash
# The committed tree's wider GPU tests (2026-12-06, session 34, the call after run3.sh on the same
# H200): the persistent kernel's, the GQA groups', the long prompts' and the tiny-model matrix.
# Run as one command line in that call (the device tool's command), kept here to repeat it; the
# log is stored as run3-out/run4-tests2.log.
#   device tool: run command="bash bench/results/lm-head-screen-2026-12-06/run4.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
timeout 240 build-carry/model_test_cuda_engine --gtest_filter='*Persistent*:*Gqa*:*LongPrompts*:*CudaEngine.*' > "$OUT/tests2.log" 2>&1
echo "exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests2.log" | head
