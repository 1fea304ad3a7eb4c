#!/usr/bin/env bash
# Upper bounds of the attention stage's handoffs (2026-12-06, session 31): race.patch lets the
# persistent kernel skip a handoff's wait (THRIVE_DL_RACE, bits: 1 = the o stage reads the attention
# output's words without waiting for their tags, 2 = the parallel merge reads the parts' results
# without waiting, 4 = the parts read their qkv rows without waiting). The results are wrong (a
# race); only the time means something: what a design that removes that handoff could gain at
# most (e.g. the o projection inside the parts removes 1, the unified max 2).
#   Build here first: the committed tree -> build-carry/thrive-base; with race.patch applied
#   (git apply) -> build-carry/thrive-new (cmake --build build -j 2 --target thrive).
#   device tool: run command="bash bench/results/attention-race-bound-2026-12-06/run1.sh" carry=["build-carry"]
# Out ($OUT): e2e-*.json (the tool returns a limited number of files: read the printed lines).
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-new thrive-base
for r in 1 2; do
  e2e "base-$r" "$OUT" thrive-base 1
  for v in 0 1 2 3 4 7; do THRIVE_DL_RACE=$v e2e "race$v-$r" "$OUT" thrive-new 1; done
done
