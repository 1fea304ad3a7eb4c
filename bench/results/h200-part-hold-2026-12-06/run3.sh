#!/usr/bin/env bash
# Call 3 (2026-12-06, session 30): attention splits 9 (the automatic count at prompt 512), 10, 12,
# 14 and 16 at the 128-block default, three rounds alternating, batch 1.
#   device tool: run command="bash bench/results/h200-part-hold-2026-12-06/run3.sh" carry=["build-carry"]
# Out ($OUT): e2e-*.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base
for round in 1 2 3; do
  for s in 9 10 12 14 16; do e2e "s$s-$round" "$OUT" thrive-base 1 --persistent-splits $s; done
done
