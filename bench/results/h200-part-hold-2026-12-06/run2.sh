#!/usr/bin/env bash
# Call 2 (2026-12-06, session 30, same machine as call 1 if still warm): the committed kernel's
# run-time knobs re-swept at the 128-block default (the 2026-12-04 sweeps ran at 132 blocks):
# ring depth 6, attention splits 8, 12 and 16 (16 x 8 KV heads = one part a block), and the
# unified-max softmax; the default twice, alternating.
#   device tool: run command="bash bench/results/h200-part-hold-2026-12-06/run2.sh" carry=["build-carry"]
# Out ($OUT): e2e-*.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base
e2e default-1 "$OUT" thrive-base 1
e2e ns6 "$OUT" thrive-base 1 --persistent-stages 6
e2e s8 "$OUT" thrive-base 1 --persistent-splits 8
e2e s12 "$OUT" thrive-base 1 --persistent-splits 12
e2e s16 "$OUT" thrive-base 1 --persistent-splits 16
e2e unified "$OUT" thrive-base 1 --persistent-softmax unified
e2e default-2 "$OUT" thrive-base 1
