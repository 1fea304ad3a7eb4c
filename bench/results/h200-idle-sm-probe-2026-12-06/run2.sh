#!/usr/bin/env bash
# Call 2 (2026-12-06, session 30): what the probe implies for the kernel. If every block holds its
# ring's lead through the qkv GEMV (global-hold.patch: the o and gate/up tiles of its lead owed,
# not issued), the GPU has nothing in flight when attention starts, so the parts' round trips run
# at the quiet latency; the warps with no part then issue the owed tiles one at a time
# (THRIVE_DL_HOLD=1: each once the previous one landed; 3: at most two pending) while the parts
# run, the parts' warps after their part (2: after the o stage's input). 0: the patch's code, no
# hold. Against the committed kernel (thrive-base), batch 1, alternating twice.
#   device tool: run command="bash bench/results/h200-idle-sm-probe-2026-12-06/run2.sh" carry=["build-carry"]
#   build-carry/: thrive-base (40f9df9), thrive-lazy (40f9df9 + global-hold.patch), lib/ as in
#   ../h200-lm-head-2026-12-04/common.sh.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-lazy
for round in 1 2; do
  e2e "base-$round" "$OUT" thrive-base 1
  for m in 0 1 2 3; do THRIVE_DL_HOLD=$m e2e "hold$m-$round" "$OUT" thrive-lazy 1; done
done
