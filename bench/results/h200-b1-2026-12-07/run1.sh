#!/usr/bin/env bash
# Session 41: issue 6's batch-1 target (<= 1.2 ms per decode step on the H200) with the default
# (EC12 tiles at batch 1), two runs, then bf16 tiles once for comparison, then batch 256 if time is left. Exits at once on any
# other GPU: its figures would not answer the question, and the device time is short. The optional
# runs start only before BF16_BEFORE (default 200) and B256_BEFORE (330) seconds into the script;
# B1_RUNS (default 2) EC12 batch-1 runs come first.
#   Build here first: cmake --build build --target thrive; cp build/thrive build-carry/thrive-main
#   device tool: run command="bash bench/results/h200-b1-2026-12-07/run1.sh" carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case $gpu in *H200*) ;; *) echo "not an H200 ($gpu): nothing run"; exit 3 ;; esac
prepare thrive-main
for r in $(seq "${B1_RUNS:-2}"); do e2e "ec12-b1-$r" "$OUT" thrive-main 1; done
[ $SECONDS -lt "${BF16_BEFORE:-200}" ] && e2e "bf16-b1" "$OUT" thrive-main 1 --persistent-weights bf16
# the batch-256 targets (decode >= 30,000 tok/s, prefill >= 150,000) on the same card, last measured
# on an H200 at dc54186 (34,410 tok/s decode); session 42
[ $SECONDS -lt "${B256_BEFORE:-330}" ] && e2e "best-b256" "$OUT" thrive-main 256
(cd "$OUT" && tar czf e2e.tgz e2e-*.json e2e-stderr.log && rm -f e2e-*.json e2e-stderr.log)
