#!/usr/bin/env bash
# EC12 (session 39), second call: the GPU tests again with the test binary rebuilt (run 1's binary
# was stale: built from the test source before its last edit, so its fallback case poked weights
# that fit), the persistent kernel's other suites (every one now runs EC12 tiles by default), and
# batch 1 with the CLI default (auto: EC12 at batch 1) against bf16 tiles, alternating.
#   Build here first, as run1.sh says; device tool: run command="bash bench/results/ec12-2026-12-07/run2.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-ec12
timeout 300 build-carry/model_test_cuda_engine --gtest_filter='*PersistentWeights*:*CudaEnginePersistent/*:*GreedyLoop*:*NonFinite*' > "$OUT/gpu-tests.log" 2>&1
echo "GPU tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/gpu-tests.log" | head -12
for r in 1 2; do
  e2e "auto-b1-$r" "$OUT" thrive-ec12 1
  e2e "bf16-b1-$r" "$OUT" thrive-ec12 1 --persistent-weights bf16
done
python3 - "$OUT" <<'PY'
import json, sys
d = sys.argv[1]
for n in ("auto-b1-1", "bf16-b1-1"):
    j = json.load(open(f"{d}/e2e-{n}.json")); print(n, j.get("persistent_weights"), j.get("ec12_bytes"), j.get("ec12_patches"), j.get("gpu_memory_allocated_bytes"))
a, b = (json.load(open(f"{d}/e2e-{n}.json"))["tokens"] for n in ("auto-b1-1", "bf16-b1-1"))
a, b = (x[0] if isinstance(x[0], list) else x for x in (a, b))
first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
print("tokens auto vs bf16:", "same" if first is None else f"part at token {first} of {len(a)}")
PY
