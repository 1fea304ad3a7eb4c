#!/usr/bin/env bash
# Run 4 (H200): (1) the per-tile trace of layer 14 (tile_trace_patch.py; timing only), batch 1,
# prompt 512; (2) batch-1 A/B of the kernel as committed (`base`), `kvnext` (kvnext_patch.py) and
# base with --persistent-kv-prefetch off, prompt 512, 64 tokens, best kernels, graphs, in the order
# base, kvnext, base-kvoff, kvnext2, base2. The kernel source is restored at the end.
#   device tool: run command="bash bench/results/h200-l2-window-2026-12-02/run4.sh" carry=[".sysroot"]
# Out ($OUT): build.log, tile-trace.txt, tile-trace-summary.txt, e2e-*.json, e2e-stderr.log.
set -uo pipefail
here=bench/results/h200-l2-window-2026-12-02
src=kernels/cuda/engine/qwen3_engine.cu
cd "$(dirname "$0")/../../.."
cp $src /tmp/engine-base.cu
python3 $here/tile_trace_patch.py $src || exit 1
BUILD_TARGETS=thrive source scripts/device-prologue.sh
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 4 --kernels best \
  --graphs on 2>&1 | grep "^TT " > "$OUT/tile-trace.txt"
python3 $here/tile_trace_summary.py "$OUT/tile-trace.txt" > "$OUT/tile-trace-summary.txt"
head -45 "$OUT/tile-trace-summary.txt"
for r in base kvnext base-kvoff kvnext2 base2; do
  cp /tmp/engine-base.cu $src
  case $r in kvnext*) python3 $here/kvnext_patch.py $src || exit 1 ;; esac
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; cp /tmp/engine-base.cu $src; exit 1; }
  flags=""; case $r in *kvoff) flags="--persistent-kv-prefetch off" ;; esac
  # shellcheck disable=SC2086
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
    --graphs on --json $flags > "$OUT/e2e-$r.json" 2>> "$OUT/e2e-stderr.log"
  python3 scripts/e2e_summary.py "$OUT/e2e-$r.json" "  $r" --layer
done
cp /tmp/engine-base.cu $src
