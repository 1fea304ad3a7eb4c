#!/usr/bin/env bash
# Run 7 (H200, 2026-12-04): is the 5-stage ring's gain the larger L1 its smaller shared-memory
# carveout leaves? First a check that the padding takes effect. Batch 1: the default (5 stages), 5 stages with 32 KiB of unused shared memory
# (smem_pad.py: as much shared memory as 6 stages take), and 6 stages; alternating, two rounds.
# To make build-carry/ (git-ignored), in the repository root after scripts/setup.sh:
#   F=src/model/cuda_engine.cpp; cp $F /tmp/engine-orig.cpp &&
#   python3 bench/results/h200-lm-head-2026-12-04/smem_pad.py $F && cmake --build build --target thrive &&
#   mkdir -p build-carry && cp build/thrive build-carry/thrive-pad; cp /tmp/engine-orig.cpp $F &&
#   cmake --build build --target thrive && cp build/thrive build-carry/   (libraries as run4.sh's header says)
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run7.sh" carry=["build-carry"]
# Out ($OUT): e2e-{st5,pad,st6}-2.json, e2e-stderr.log; round 1's JSONs stay in /tmp.
source "$(dirname "$0")/common.sh"
prepare thrive thrive-pad
# the padding takes effect: 100 KiB more cannot fit, so that launch must fail
THRIVE_DL_PAD_KIB=100 timeout 90 build-carry/thrive-pad e2e --device cuda --model $model --batch 1 --prompt 512 --gen 2 \
  > /dev/null 2> /tmp/pad-check.log && echo "pad check: ran (padding NOT in effect)" || echo "pad check: refused as expected: $(tail -c 200 /tmp/pad-check.log)"
for round in 1 2; do
  e2e st5-$round /tmp thrive 1
  export THRIVE_DL_PAD_KIB=32
  e2e pad-$round /tmp thrive-pad 1
  unset THRIVE_DL_PAD_KIB
  e2e st6-$round /tmp thrive 1 --persistent-stages 6
done
cp /tmp/e2e-*-2.json "$OUT/"
