#!/usr/bin/env bash
# Run 3 (H200, 2026-12-04): run 2's ring-depth result checked: the automatic depth (6 at batch 1)
# against --persistent-stages 5, alternating, three rounds, and 4 twice; batch 4 (automatic depth 5)
# against 4, alternating, two rounds. Same binary and settings as run2.sh (--lm-head gemm: the
# committed engine's lm_head).
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run3.sh" carry=["build-carry"]
# Out ($OUT): e2e-b1-{auto,st5}-3.json, e2e-b4-{auto,st4}-2.json, e2e-stderr.log; the other rounds'
# JSONs stay in /tmp (their summaries are printed).
source "$(dirname "$0")/common.sh"
prepare thrive
run() { e2e "$1" /tmp thrive "$2" --persistent on --lm-head gemm "${@:3}"; }
for round in 1 2 3; do
  run b1-auto-$round 1
  run b1-st5-$round 1 --persistent-stages 5
  [ $round -lt 3 ] && run b1-st4-$round 1 --persistent-stages 4
done
for round in 1 2; do
  run b4-auto-$round 4
  run b4-st4-$round 4 --persistent-stages 4
done
cp /tmp/e2e-b1-auto-3.json /tmp/e2e-b1-st5-3.json /tmp/e2e-b4-auto-2.json /tmp/e2e-b4-st4-2.json "$OUT/"
