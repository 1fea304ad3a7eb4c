#!/usr/bin/env bash
# The screening kernel's residency (2026-12-06, session 34): 3 blocks a SM (committed: launch
# bounds (256, 3), 78 registers) against 4 (four-blocks-a-sm.patch: (256, 4), 64 registers, 4 bytes
# of spills), batch 1, two rounds alternating in one call, --lm-head screened.
#   Build here first: the committed tree -> build-carry/thrive, the patch applied -> build-carry/thrive-4sm.
#   device tool: run command="bash bench/results/lm-head-screen-2026-12-06/run2.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-4sm
for r in 1 2; do
  for b in thrive thrive-4sm; do e2e "$b-b1-$r" "$OUT" $b 1 --lm-head screened; done
done
