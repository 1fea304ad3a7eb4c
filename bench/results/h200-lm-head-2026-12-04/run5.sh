#!/usr/bin/env bash
# Run 5 (H200, 2026-12-04): with the ring at 5 stages (run 4's build), do the attention splits or
# the KV prefetch want retuning? Batch 1, prompt 512, 64 tokens, CUDA graphs, no memory seeded:
# the default (9 splits), --persistent-splits 7, 8, 10, 12, --persistent-kv-prefetch on, the default again.
#   device tool: run command="bash bench/results/h200-lm-head-2026-12-04/run5.sh" carry=["build-carry"]
#   (build-carry/ as run4.sh's header makes it)
# Out ($OUT): e2e-<name>.json (7), e2e-stderr.log.
source "$(dirname "$0")/common.sh"
prepare thrive
e2e default "$OUT" thrive 1
e2e sp7 "$OUT" thrive 1 --persistent-splits 7
e2e sp8 "$OUT" thrive 1 --persistent-splits 8
e2e sp10 "$OUT" thrive 1 --persistent-splits 10
e2e sp12 "$OUT" thrive 1 --persistent-splits 12
e2e kvpf "$OUT" thrive 1 --persistent-kv-prefetch on
e2e default-2 "$OUT" thrive 1
