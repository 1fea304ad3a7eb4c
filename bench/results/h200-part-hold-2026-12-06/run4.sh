#!/usr/bin/env bash
# Call 4 (2026-12-06, session 30): call 1's hold0-1 run (THRIVE_DL_HOLD=0, the patch's code with
# no hold) ended at the 90 s timeout with no JSON and its stderr did not come back. Run it again,
# three times, with the committed binary between, printing each run's time and stderr tail.
#   device tool: run command="bash bench/results/h200-part-hold-2026-12-06/run4.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-hold
for r in 1 2 3; do
  s=$(date +%s); THRIVE_DL_HOLD=0 e2e "hold0-$r" "$OUT" thrive-hold 1; echo "    $(( $(date +%s) - s )) s"
  s=$(date +%s); e2e "base-$r" "$OUT" thrive-base 1; echo "    $(( $(date +%s) - s )) s"
done
tail -20 "$OUT/e2e-stderr.log"
