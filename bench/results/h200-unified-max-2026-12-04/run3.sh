#!/usr/bin/env bash
# Nineteenth pass, call 3 (H200, 2026-12-04): what the stage signals' fences cost. thrive-nofence
# drops thread 0's __threadfence() before every count (the GEMV stages' engine_dl_signal and the
# unified-max parts' count), thrive-nofence-gemv only the GEMV stages'. Without the fence the
# counts no longer order the data (a race: timing only, not a candidate). Alternating with the
# committed kernel, batch 1.
#   device tool: run command="bash bench/results/h200-unified-max-2026-12-04/run3.sh" carry=["build-carry"]
#   build-carry/: thrive (the committed tree), thrive-nofence, thrive-nofence-gemv (the same tree
#   with those fences deleted from kernels/cuda/engine/qwen3_engine.cu, thrive rebuilt); lib/ as run1.sh.
# Out ($OUT): e2e.tar.gz (e2e-*.json), e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-nofence thrive-nofence-gemv
E=/tmp/e2e-run3; mkdir -p $E
for round in 1 2; do
  e2e base$round $E thrive 1
  e2e nofence$round $E thrive-nofence 1
  e2e nofence-gemv$round $E thrive-nofence-gemv 1
done
tar -czf "$OUT/e2e.tar.gz" -C $E .
