#!/usr/bin/env bash
# The GEMV consumers' per-tile cost (2026-12-06, session 33). Two variants of engine_dl_gemv
# against the committed kernel, alternating in one call:
#   thrive-ldsm: ldmatrix-first.patch (a full tile's four ldmatrix.x4 issued before its four MMAs,
#                which go to two accumulator chains; ptxas: 140/224 bytes of spills, as committed)
#   thrive-redb: batched-reduction.patch (the same, plus the cross-warp sums of up to 16 row groups
#                at T = 1 (4 at T = 4) in one block barrier instead of one barrier a group; the
#                GEMV's sums buffer grows from 8 to 32 KiB; ptxas 148/232)
#   Build here first: committed tree -> build-carry/thrive-base; each patch applied alone (git apply)
#   -> build-carry/thrive-<name> (cmake --build build -j 2 --target thrive model_test_cuda_engine;
#   the redb test binary -> build-carry/model_test_cuda_engine-redb).
#   device tool: run command="bash bench/results/gemv-consumer-2026-12-06/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-ldsm thrive-redb
timeout 200 build-carry/model_test_cuda_engine-redb --gtest_filter='*Persistent*:*Gqa*' > "$OUT/test-redb.log" 2>&1
echo "redb tests exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/test-redb.log" | head -20
for r in 1 2; do
  for b in base ldsm redb; do e2e "$b-b1-$r" "$OUT" thrive-$b 1; done
done
for b in base ldsm redb; do e2e "$b-b4" "$OUT" thrive-$b 4; done
