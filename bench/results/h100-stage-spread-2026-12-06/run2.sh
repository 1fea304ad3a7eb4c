#!/usr/bin/env bash
# Prepared 2026-12-06 (session 30), not run: the A/B that decides whether stage-spread.patch can
# land (its one call measured the untimed step 0.3-0.9% slower, inside what one call can tell).
# Batch 1 and 4, the patched and the committed binary alternating four rounds.
#   Build here first (both at the same commit, the patch applied for -new):
#     cmake --build build -j 2 --target thrive && cp build/thrive build-carry/thrive-base
#     git apply bench/results/h100-stage-spread-2026-12-06/stage-spread.patch
#     cmake --build build -j 2 --target thrive && cp build/thrive build-carry/thrive-new
#   device tool: run command="bash bench/results/h100-stage-spread-2026-12-06/run2.sh" carry=["build-carry"]
# Out ($OUT): e2e-*.json (the tool returns a limited number of files: read the printed lines).
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-new thrive-base
for r in 1 2 3 4; do
  e2e "new-$r" "$OUT" thrive-new 1
  e2e "base-$r" "$OUT" thrive-base 1
done
e2e new-b4 "$OUT" thrive-new 4
e2e base-b4 "$OUT" thrive-base 4
# (added 2026-12-06, session 31, when run) the CUDA engine's GPU tests of the patched build
# (build-carry/model_test_cuda_engine: `cmake --build build --target model_test_cuda_engine` with
# the patch applied)
timeout 300 build-carry/model_test_cuda_engine > "$OUT/tests.txt" 2>&1
echo "tests: exit $?"; grep -E "PASSED|FAILED|tests ran" "$OUT/tests.txt" | head
