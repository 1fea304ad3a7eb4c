#!/usr/bin/env bash
# Call 3 (2026-12-06): the closing check of the committed tree, built on the GPU machine
# (scripts/device-e2e.sh: the whole suite but McpSdk, the Hugging Face comparison, e2e at batch 1
# and 4), then the automatic block count against one block a SM at batch 1, alternating twice.
#   device tool: run command="bash bench/results/h200-gemv-drift-2026-12-06/run3.sh" carry=[".sysroot"]
# Out ($OUT): device-e2e.sh's files, e2e-b1-{sm,auto}{1,2}.json.
cd "$(dirname "$0")/../../.."
RUNS="b1-best b4-best" GEN=32 bash scripts/device-e2e.sh
for r in 1 2; do
  for v in sm auto; do
    flags=""; [ $v = sm ] && flags="--persistent-blocks 132"  # H100 and H200: 132 SMs
    # shellcheck disable=SC2086
    timeout 90 ./build-device/thrive e2e --device cuda --model /tmp/qwen3-1.7b-random --batch 1 --prompt 512 --gen 64 \
      --kernels best --graphs on --json $flags > "$OUT/e2e-b1-$v$r.json" 2>> "$OUT/e2e-stderr.log" || echo "$v$r: exit $?"
    python3 scripts/e2e_summary.py "$OUT/e2e-b1-$v$r.json" "  $v$r" --layer
  done
done
