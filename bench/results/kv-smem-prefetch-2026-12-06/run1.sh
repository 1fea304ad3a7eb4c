#!/usr/bin/env bash
# The KV-cache prefetch into shared memory (2026-12-06, session 31; kvs.patch, THRIVE_DL_KVS=1 in
# this experiment's binary): each block's first attention part gets its keys' K and V rows by bulk
# copies into a 32 KiB buffer, issued right after the previous layer's attention, so its first
# tiles do not wait on a DRAM round trip behind the weight stream. Why: attention-race-bound
# (this session) found the stage's handoff waits worth at most 0.5%.
#   Build here first: the committed tree -> build-carry/thrive-base; with kvs.patch applied
#   (cmake --build build -j 2 --target thrive model_test_cuda_engine) -> build-carry/thrive-new and
#   build-carry/model_test_cuda_engine.
#   device tool: run command="bash bench/results/kv-smem-prefetch-2026-12-06/run1.sh" carry=["build-carry"]
# Out ($OUT): tests.txt, e2e-*.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-new thrive-base
THRIVE_DL_KVS=1 timeout 150 build-carry/model_test_cuda_engine --gtest_filter='*Persistent*:*GreedyLoop*' > "$OUT/tests.txt" 2>&1
echo "tests (kvs on): exit $?"; grep -E "PASSED|FAILED|tests ran" "$OUT/tests.txt" | head
for r in 1 2 3; do
  e2e "base-$r" "$OUT" thrive-base 1
  THRIVE_DL_KVS=0 e2e "new0-$r" "$OUT" thrive-new 1
  THRIVE_DL_KVS=1 e2e "kvs-$r" "$OUT" thrive-new 1
done
e2e base-b4 "$OUT" thrive-base 4
THRIVE_DL_KVS=1 e2e kvs-b4 "$OUT" thrive-new 4
