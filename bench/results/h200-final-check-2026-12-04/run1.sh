#!/usr/bin/env bash
# The session's closing check on the H200 (2026-12-04, eighteenth pass): the tree at the commit
# that adds this script (the CUDA engine's kernel as at 52d2eb2; this session changed the
# checkpoint loader (NaN/offset checks), the memory store and the CLI). The CUDA engine's GPU
# tests, batch 1 and 4 (prompt 512, 64 tokens, CUDA graphs), and the Hugging Face comparison.
#   device tool: run command="bash bench/results/h200-final-check-2026-12-04/run1.sh" carry=["build-carry"]
#   build-carry/: thrive and model_test_cuda_engine built from that commit (cmake --build build
#   --target thrive model_test_cuda_engine; copy them there); lib/ = libfmt.so.9,
#   libspdlog.so.1.10, libsqlite3.so.0 from the CPU machine (Debian 12).
# Out ($OUT): tests.txt, e2e-b1.json, e2e-b4.json, hf-compare.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive model_test_cuda_engine
timeout 300 build-carry/model_test_cuda_engine > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/tests.txt" | head -20
e2e b1 "$OUT" thrive 1
e2e b4 "$OUT" thrive 4
timeout 200 python3 scripts/hf_compare.py --model $model --thrive build-carry/thrive --steps 32 --out "$OUT/hf-compare.json"
echo "hf_compare exit $?"
