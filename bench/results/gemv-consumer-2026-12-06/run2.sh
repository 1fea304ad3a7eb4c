#!/usr/bin/env bash
# Session 33 (2026-12-06): the ring's cp.async copies with an L2 prefetch-size hint
# (prefetch-256b.patch: `.L2::256B`, PTX ISA cp.async's .level::prefetch_size: an L2 miss fetches
# the 256-byte block; a warp's copy instruction covers four 128-byte row pieces, and the
# neighbouring piece of each row is the next warp's), against the committed kernel, alternating;
# run 1's ldmatrix-first binary (build-carry/thrive-ldsm) twice more; plus both at batch 4 (the 128-block default's figures where the card is an H200).
#   Build here first: the committed tree -> build-carry/thrive-base; with the patch applied
#   (git apply) -> build-carry/thrive-pf256 (cmake --build build -j 2 --target thrive).
#   device tool: run command="bash bench/results/gemv-consumer-2026-12-06/run2.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-base thrive-pf256 thrive-ldsm
for r in 1 2 3; do
  e2e "base-b1-$r" "$OUT" thrive-base 1
  e2e "pf256-b1-$r" "$OUT" thrive-pf256 1
  [ $r -le 2 ] && e2e "ldsm-b1-$r" "$OUT" thrive-ldsm 1
done
e2e "base-b4" "$OUT" thrive-base 4
e2e "pf256-b4" "$OUT" thrive-pf256 4
