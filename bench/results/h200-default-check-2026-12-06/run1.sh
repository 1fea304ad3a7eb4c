#!/usr/bin/env bash
# The committed kernel (0e155c9's code, identical to 8a3e289's: build-carry/thrive-base) at batch 1
# and 4, its automatic block count (128 on 132 SMs), two rounds: the first figure of that default
# on an H200 if the device tool gives one. device tool: kind nvidia-h200,
#   command="bash bench/results/h200-default-check-2026-12-06/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base
for r in 1 2; do
  e2e "b1-$r" "$OUT" thrive-base 1
  e2e "b4-$r" "$OUT" thrive-base 4
done
