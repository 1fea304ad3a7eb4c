#!/usr/bin/env bash
# Where a batch-1 decode step's time goes on the GPU machine (issue 6's 1.2 ms target): build,
# write the random Qwen3-1.7B checkpoint, run `thrive e2e` at batch 1, prompt 512 with the
# variants in VARIANTS, then trace the default configuration with Nsight Systems (CUDA graph
# nodes traced one by one) and print, for the decode steps' kernels in launch order, the median
# duration and the median gap after the previous kernel (scripts/decode_timeline.py).
#   device tool: run command="bash scripts/device-decode-profile.sh" carry=[".sysroot", ".device-home"]
# Environment: SEED_HOME=FILE.tgz, VARIANTS (lines "name|e2e flags"), SKIP_NSYS=1.
# Out ($OUT): build.log, e2e-b1-*.json, decode-timeline.txt.
set -uo pipefail
source "$(dirname "$0")/device-prologue.sh"
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
common="--device cuda --model $model --batch 1 --prompt 512 --kernels best --graphs on --json"
variants=${VARIANTS:-"best|
pf0|--l2-prefetch 0
pf16|--l2-prefetch 16
pf48|--l2-prefetch 48"}
while IFS='|' read -r name flags; do
  [ -n "$name" ] || continue
  timeout 150 $bin e2e $common --gen 64 $flags > "$OUT/e2e-b1-$name.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e b1-$name ($flags): exit $?"
  python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
print(f\"  decode {d['decode_ms_per_step']:.3f} ms/step ({d['decode_tokens_per_s']:.0f} tok/s), eager profiled {d['decode_eager_ms_per_step']:.3f} ms; prefill {d['prefill_tokens_per_s']:.0f} tok/s\")
" "$OUT/e2e-b1-$name.json"
done <<< "$variants"
if [ "${SKIP_NSYS:-0}" != 1 ]; then
  if command -v nsys > /dev/null; then
    dir=$(mktemp -d)
    timeout 240 nsys profile --cuda-graph-trace=node --trace=cuda -o "$dir/b1" --force-overwrite true \
      $bin e2e $common --gen 24 > /dev/null 2>> "$OUT/e2e-stderr.log"
    echo "nsys: exit $?"
    timeout 120 nsys stats --report cuda_gpu_trace --format csv --output "$dir/b1" "$dir/b1.nsys-rep" > /dev/null 2>&1
    python3 scripts/decode_timeline.py "$dir"/b1_cuda_gpu_trace*.csv | tee "$OUT/decode-timeline.txt"
  else
    echo "nsys not found: no timeline"
  fi
fi
