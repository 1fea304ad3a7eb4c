#!/usr/bin/env bash
# The screened greedy lm_head (2026-12-06, session 34; include/thrive/model/lm_head_screen.hpp):
# its GPU tests, then thrive e2e on the random Qwen3-1.7B checkpoint (prompt 512, 64 tokens, best
# kernels, graphs) with --lm-head screened (the new default) and exact (cuBLASLt's logits and
# engine_argmax, the path before), alternating in one call: batch 1 twice each, batch 4 once each.
#   Build here first: cmake --build build -j 2 --target thrive model_test_cuda_engine, then
#   build/thrive and build/tests/model_test_cuda_engine -> build-carry/ (libraries in build-carry/lib).
#   device tool: run command="bash bench/results/lm-head-screen-2026-12-06/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive
timeout 240 build-carry/model_test_cuda_engine \
  --gtest_filter='*ScreenedLmHead*:*NonFinite*:*GreedyLoop*:*BatchOne*:*CudaEngineStages*' > "$OUT/tests.log" 2>&1
echo "tests exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/tests.log" | head -30
for r in 1 2; do
  for m in screened exact; do e2e "$m-b1-$r" "$OUT" thrive 1 --lm-head $m; done
done
for m in screened exact; do e2e "$m-b4" "$OUT" thrive 4 --lm-head $m; done
python3 - "$OUT" <<'PY'
import json, glob, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "e2e-*.json"))):
    try:
        d = json.load(open(f))
    except Exception as e:
        print(os.path.basename(f), "no result", e); continue
    st = {r["stage"]: r["ms"] for r in d.get("decode_stages", [])}
    print(f"{os.path.basename(f)}: {d['decode_ms_per_step']:.4f} ms/step, lm_head {d.get('lm_head')}, "
          f"exact rows/token {d.get('lm_head_exact_rows_per_token', 0):.1f}, stages lm_head {st.get('lm_head', 0):.4f} "
          f"sampling {st.get('sampling', 0):.4f} ms (eager, over the profiled steps)")
# the two paths' tokens, every sequence, every step
for s in sorted(glob.glob(os.path.join(sys.argv[1], "e2e-screened-*.json"))):
    e = s.replace("e2e-screened-", "e2e-exact-")
    try:
        a, b = json.load(open(s))["tokens"], json.load(open(e))["tokens"]
    except Exception as x:
        print(os.path.basename(s), "no pair", x); continue
    diff = [(i, t) for i, (ra, rb) in enumerate(zip(a, b)) for t, (x, y) in enumerate(zip(ra, rb)) if x != y]
    print(f"{os.path.basename(s)} vs exact: {sum(len(r) for r in a)} tokens, "
          + ("identical" if not diff and len(a) == len(b) else f"first difference (sequence, token) {diff[:1]}"))
PY
