#!/usr/bin/env bash
# Session 33 (2026-12-06): run1.sh again (the committed kernel, build-carry/thrive-base, at its
# automatic 128 blocks, batch 1 and 4), with the ldmatrix-first variant of
# bench/results/gemv-consumer-2026-12-06/ (build-carry/thrive-ldsm) alternating at batch 1.
# device tool: kind nvidia-h200, command="bash bench/results/h200-default-check-2026-12-06/run2.sh"
#   carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-ldsm
for r in 1 2; do
  e2e "b1-$r" "$OUT" thrive-base 1
  e2e "ldsm-b1-$r" "$OUT" thrive-ldsm 1
done
e2e "b4-1" "$OUT" thrive-base 4
