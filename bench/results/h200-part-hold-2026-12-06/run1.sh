#!/usr/bin/env bash
# Call 1 (2026-12-06, session 30): the attention blocks hold back their ring's lead (hold.patch).
# A block that runs an attention part does not issue the o / gate-up tiles during its qkv GEMV
# (empty commit groups instead); it issues them (the NS - 1 owed tiles) later, so that the part's
# chain of round trips meets an empty load queue on its SM. THRIVE_DL_HOLD picks where:
#   0: no hold (the patch's code cost only); 1: after the part; 2: warps 8-15 (no part) at the
#   stage's start, warps 0-7 after the part; 3: after the o stage's input is in shared memory.
#   device tool: run command="bash bench/results/h200-part-hold-2026-12-06/run1.sh" carry=["build-carry"]
#   build-carry/: thrive-base (40f9df9), thrive-hold (40f9df9 + hold.patch), lib/ as in
#   ../h200-lm-head-2026-12-04/common.sh.
# Out ($OUT): e2e-*.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-hold
for round in 1 2; do
  e2e "base-$round" "$OUT" thrive-base 1
  for m in 0 1 2 3; do
    [ $round = 2 ] && [ $m = 0 ] && continue
    THRIVE_DL_HOLD=$m e2e "hold$m-$round" "$OUT" thrive-hold 1
  done
done
