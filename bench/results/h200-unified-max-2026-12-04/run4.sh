#!/usr/bin/env bash
# Nineteenth pass, call 4 (H200, 2026-12-04): h handed to the next stage's RMSNorm input as tagged
# words (no o and down barriers, so no fences behind the ring) against the committed kernel
# (b333aa8), alternating; the persistent-kernel GPU tests with it; batch 4; and, if it is faster
# at batch 1, the Hugging Face comparison with it.
#   device tool: run command="bash bench/results/h200-unified-max-2026-12-04/run4.sh" carry=["build-carry"]
#   build-carry/: thrive (b333aa8), thrive-ll and model_test_cuda_engine (b333aa8 with
#   tagged-h-attempt.patch applied: git apply); lib/ as run1.sh.
# Out ($OUT): tests.txt, e2e.tar.gz (e2e-*.json), hf-compare.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-ll model_test_cuda_engine
E=/tmp/e2e-run4; mkdir -p $E
for round in 1 2; do
  e2e base$round $E thrive 1
  e2e ll$round $E thrive-ll 1
done
timeout 200 build-carry/model_test_cuda_engine --gtest_filter='*Persistent*:*Softmax*:*GqaGroups*:*GreedyLoop*' > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$OUT/tests.txt" | head -20
e2e ll-b4 $E thrive-ll 4
e2e base-b4 $E thrive 4
tar -czf "$OUT/e2e.tar.gz" -C $E .
faster=$(python3 -c "import json;l=lambda n:json.load(open('$E/e2e-'+n+'.json'))['decode_ms_per_step'];print(int(l('ll1')+l('ll2')<l('base1')+l('base2')))" 2>/dev/null)
if [ "$faster" = 1 ]; then
  timeout 150 python3 scripts/hf_compare.py --model $model --thrive build-carry/thrive-ll --steps 32 --out "$OUT/hf-compare.json"
  echo "hf_compare exit $?"
else
  echo "tagged h not faster: no Hugging Face comparison"
fi
