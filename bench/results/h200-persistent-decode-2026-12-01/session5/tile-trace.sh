#!/usr/bin/env bash
# Session 5: a per-tile trace of the persistent decode kernel, layer 10 of its 40th launch, blocks 0
# and 100 (block 100 has no attention part at batch 1). PATCH (default tile-trace.patch: %globaltimer
# at each tile's landing, µs; tile-clock-trace.patch: clock64 cycles at each tile's start, landing,
# issue of the next tile and end of its MMAs) is applied to the engine's source, then `thrive e2e`
# runs at batch 1, prompt 512, 64 tokens for each line of TT_FLAGS (default "--persistent on").
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session5/tile-trace.sh"
#                carry=[".sysroot"]
# Out ($OUT): build.log, tt-<flags>.txt (the e2e text with the kernel's "TT block index code value"
# lines); summary: python3 bench/results/h200-persistent-decode-2026-12-01/session5/tile-trace.py FILE
here=bench/results/h200-persistent-decode-2026-12-01/session5
git apply "$here/${PATCH:-tile-trace.patch}" || exit 1
source scripts/device-prologue.sh
bin=./build-device/thrive; model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
while IFS= read -r f; do
  n=$(echo "$f" | tr -d ' -')
  timeout 150 $bin e2e --device cuda --model $model --batch 1 --prompt 512 --kernels best --graphs on --gen 64 $f > "$OUT/tt-$n.txt" 2>&1
  echo "== $f: $(grep -c '^TT' $OUT/tt-$n.txt) trace lines"; grep -E "ms/step|decode" "$OUT/tt-$n.txt" | head -3
  python3 "$here/tile-trace.py" "$OUT/tt-$n.txt"
done <<< "${TT_FLAGS:-"--persistent on"}"
