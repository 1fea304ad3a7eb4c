#!/usr/bin/env bash
# Run 2 (H200, 2026-12-04): flag-only checks of the persistent kernel as committed (run 1's carried
# binary with --lm-head gemm, which is the committed engine's lm_head): the ring depth
# (--persistent-stages 4, 5 against the automatic 6) and the attention split count
# (--persistent-splits 6, 12, 16 against the automatic 9) with the KV prefetch off (its default since
# 2026-12-02; the depth was last compared with it on). Batch 1, prompt 512, 64 tokens, CUDA graphs,
# no memory seeded; the automatic setting first and last.
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run2.sh" carry=["build-carry"]
#   (build-carry/ as run1.sh's header makes it)
# Out ($OUT): e2e-<name>.json (7), e2e-stderr.log.
source "$(dirname "$0")/common.sh"
prepare thrive
run() { e2e "$1" "$OUT" thrive 1 --persistent on --lm-head gemm "${@:2}"; }
run auto
run st5 --persistent-stages 5
run st4 --persistent-stages 4
run sp6 --persistent-splits 6
run sp12 --persistent-splits 12
run sp16 --persistent-splits 16
run auto-2
