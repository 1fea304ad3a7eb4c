#!/usr/bin/env bash
# Run 3 (H200, 2026-12-04): what in the fused MLP's down GEMV costs the time (runs 1-2: the
# reductions' targets do not matter). Batch 1, prompt 512, 64 tokens, CUDA graphs: the kernel
# before (thrive-base), the fused MLP (thrive), the fused MLP with no reductions at all
# (thrive-nostore: the loop's `n < H` test made `n < 0`), and with neither reductions nor the
# ldmatrix/mma (thrive-nomma: a dependent add per k-step instead). Wrong results, timing only.
#   device tool: run command="bash bench/results/h200-splitk-down-2026-12-04/run3.sh" carry=["build-carry"]
#   build-carry/ as run1.sh's header says; thrive-nostore and thrive-nomma: the kept patch with the
#   edits above (nostore: `if (n < H) engine_red_add_v4` made `if (n < 0) ...`; nomma: also the
#   ldmatrix and mma of the down GEMV replaced by `af[0..3] = b0 ^ kr; c[p][0] += float(af[0] & 0x3fff)`).
# Out ($OUT): e2e-<name>.json, e2e-stderr.log.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-base thrive-nostore thrive-nomma
e2e b1-base "$OUT" thrive-base 1
e2e b1-fused "$OUT" thrive 1
e2e b1-nostore "$OUT" thrive-nostore 1
e2e b1-nomma "$OUT" thrive-nomma 1
