#!/usr/bin/env bash
# EC12 weight tiles (2026-12-07, session 39): the persistent kernel's GPU tests of the weight
# coding, then batch 1 with EC12 tiles (the new default) against bf16 tiles, alternating, EC12 with
# 6 ring stages, and batch 4 both ways; the greedy tokens of each pair compared.
#   Build here first: cmake --build build --target thrive model_test_cuda_engine model_test_weight_coding,
#   then cp build/thrive build-carry/thrive-ec12; cp build/tests/model_test_{cuda_engine,weight_coding} build-carry/
#   device tool: run command="bash bench/results/ec12-2026-12-07/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-ec12
timeout 60 build-carry/model_test_weight_coding > "$OUT/weight-coding-tests.log" 2>&1; echo "weight coding tests: exit $?"
timeout 200 build-carry/model_test_cuda_engine --gtest_filter='*PersistentWeights*' > "$OUT/gpu-tests.log" 2>&1
echo "GPU tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/gpu-tests.log" | head -8
for r in 1 2; do
  e2e "ec12-b1-$r" "$OUT" thrive-ec12 1
  e2e "bf16-b1-$r" "$OUT" thrive-ec12 1 --persistent-weights bf16
done
e2e "ec12-b4" "$OUT" thrive-ec12 4
e2e "bf16-b4" "$OUT" thrive-ec12 4 --persistent-weights bf16
python3 - "$OUT" <<'PY'
import json, sys
d = sys.argv[1]
def tok(n): return json.load(open(f"{d}/e2e-{n}.json"))["tokens"]
for a, b in [("ec12-b1-1", "bf16-b1-1"), ("ec12-b1-2", "bf16-b1-2"), ("ec12-b4", "bf16-b4")]:
    try: print(f"tokens {a} vs {b}: {'same' if tok(a) == tok(b) else 'DIFFERENT'}")
    except Exception as e: print(a, b, "unreadable:", e)
PY
