#!/usr/bin/env bash
# Session 40, first call: batch 1 with main's EC12 tiles (thrive-main, the CLI default) against the
# bit-exact variant of branch ec12-exact (thrive-ec12x) and bf16 tiles, alternating, two rounds; the
# weight ring 6 deep (25 KiB EC12 tiles leave room for more stages than 32 KiB ones); batch 4
# with the branch's EC12 against bf16 (these two only while the call has time); the branch's GPU tests of the
# weight coding and the persistent kernel come before them.
#   Build here first: on branch ec12-exact, cmake --build build --target thrive model_test_cuda_engine;
#   cp build/thrive build-carry/thrive-ec12x; cp build/tests/model_test_cuda_engine
#   build-carry/model_test_cuda_engine-x; then on main the same, build/thrive as build-carry/thrive-main.
#   device tool: run command="bash bench/results/ec12-exact-h100-2026-12-07/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-main thrive-ec12x model_test_cuda_engine-x
for r in 1 2; do
  e2e "main-b1-$r" "$OUT" thrive-main 1
  e2e "exact-b1-$r" "$OUT" thrive-ec12x 1 --persistent-weights ec12
  e2e "bf16-b1-$r" "$OUT" thrive-main 1 --persistent-weights bf16
done
[ $SECONDS -lt 250 ] && timeout 120 build-carry/model_test_cuda_engine-x --gtest_filter='*PersistentWeights*:*CudaEnginePersistent.*' > "$OUT/gpu-tests-x.log" 2>&1
echo "GPU tests (ec12-exact): exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/gpu-tests-x.log" | head -12
# the rest only while the call has time left (the device budget was short, 2026-12-07)
if [ $SECONDS -lt 330 ]; then
  e2e "main-b1-s6" "$OUT" thrive-main 1 --persistent-stages 6
  e2e "exact-b1-s6" "$OUT" thrive-ec12x 1 --persistent-weights ec12 --persistent-stages 6
  e2e "exact-b4" "$OUT" thrive-ec12x 4 --persistent-weights ec12
  e2e "bf16-b4" "$OUT" thrive-main 4 --persistent-weights bf16
fi
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(n):
    p = f"{d}/e2e-{n}.json"
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
def tok(j):
    t = j["tokens"]
    return t[0] if isinstance(t[0], list) else t
for n in ("main-b1-1", "exact-b1-1", "bf16-b1-1", "main-b1-s6", "exact-b1-s6"):
    j = load(n)
    if j: print(n, j.get("persistent_weights"), j.get("persistent_stages"), j.get("ec12_patches"), j.get("decode_ms_per_step"))
for a, b in [("exact-b1-1", "bf16-b1-1"), ("main-b1-1", "bf16-b1-1"), ("exact-b4", "bf16-b4")]:
    x, y = load(a), load(b)
    if not (x and y): continue
    x, y = tok(x), tok(y)
    first = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
    print(f"tokens {a} vs {b}:", "same" if first is None else f"part at token {first} of {len(x)}")
PY
# the device tool returns at most 8 files
(cd "$OUT" && tar czf e2e.tgz e2e-*.json e2e-stderr.log && rm -f e2e-*.json e2e-stderr.log)
