#!/usr/bin/env bash
# Run 2 (H200, 2026-12-04): where run 1's fused MLP loses. Batch 1 (prompt 512, 64 tokens, CUDA
# graphs), alternating two rounds: the kernel before (thrive-base), the fused MLP with fewer
# registers live across the layers (thrive), and the same with the red.add of the down sums
# replaced by plain stores (thrive-nored: wrong results, timing only: what the reductions cost).
#   device tool: run command="bash bench/results/h200-splitk-down-2026-12-04/run2.sh" carry=["build-carry"]
#   build-carry/ as run1.sh's header says; thrive-nored: built with `red.relaxed.gpu.global.add.v4.f32`
#   replaced by `st.relaxed.gpu.global.v4.f32` in engine_red_add_v4.
# Out ($OUT): e2e-<name>.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-base thrive-nored
for r in 1 2; do
  e2e b1-base-$r "$OUT" thrive-base 1
  e2e b1-fused-$r "$OUT" thrive 1
  e2e b1-nored-$r "$OUT" thrive-nored 1
done
