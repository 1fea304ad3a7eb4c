#!/usr/bin/env bash
# Prepared 2026-12-06 (session 31), run in session 32 (README's run 2, run2-out/): the bound on removing the
# attention handoffs' *loads*, not only their waits (run 1). race2.patch (it replaces race.patch;
# ptxas: 140/224 bytes of spills in the hot entry, as the committed kernel) adds to
# THRIVE_DL_RACE's bits: 8 = the o stage loads nothing (zeros for its input), 16 = the merge loads
# nothing, 32 = the parts load no qkv rows. 8 bounds what the o projection inside the parts could
# gain from the o stage's loads, 16 what the unified max could gain from the merge's, 56 all three.
#   Build here first: the committed tree -> build-carry/thrive-base; with race2.patch applied
#   (git apply; cmake --build build -j 2 --target thrive) -> build-carry/thrive-new.
#   device tool: run command="bash bench/results/attention-race-bound-2026-12-06/run2.sh" carry=["build-carry"]
# Out ($OUT): e2e-*.json (the tool returns a limited number of files: read the printed lines).
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-new thrive-base
for r in 1 2; do
  e2e "base-$r" "$OUT" thrive-base 1
  for v in 0 7 8 16 24 56; do THRIVE_DL_RACE=$v e2e "race$v-$r" "$OUT" thrive-new 1; done
done
