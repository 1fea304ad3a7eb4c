#!/usr/bin/env bash
# Nineteenth pass, call 2 (H200, 2026-12-04): the CUDA engine's GPU tests with the unified max as
# the default (its test's fallback case at a bound of 60 instead of 300), split counts and ring
# depths with it, batch 4, and the Hugging Face comparison.
#   device tool: run command="bash bench/results/h200-unified-max-2026-12-04/run2.sh" carry=["build-carry"]
#   build-carry/ as in run1.sh.
# Out ($OUT): tests.txt, e2e.tar.gz (e2e-*.json), hf-compare.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive model_test_cuda_engine
E=/tmp/e2e-run2; mkdir -p $E
timeout 420 build-carry/model_test_cuda_engine > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$OUT/tests.txt" | head -30
e2e um-s6 $E thrive 1 --persistent-splits 6
e2e um-s12 $E thrive 1 --persistent-splits 12
e2e um-ns4 $E thrive 1 --persistent-stages 4
e2e um-ns6 $E thrive 1 --persistent-stages 6
e2e um $E thrive 1
e2e um-b4 $E thrive 4
e2e merge-b4 $E thrive 4 --persistent-softmax merge
tar -czf "$OUT/e2e.tar.gz" -C $E .
timeout 200 python3 scripts/hf_compare.py --model $model --thrive build-carry/thrive --steps 32 --out "$OUT/hf-compare.json"
echo "hf_compare exit $?"
