#!/usr/bin/env bash
# Where a batch-1 decode step's time goes on the GPU machine (issue 6's 1.2 ms target): build,
# write the random Qwen3-1.7B checkpoint, run `thrive e2e` at batch 1, prompt 512 with the
# variants in VARIANTS, profile the first decode step's kernels with Nsight Compute (GPU time,
# DRAM bytes and throughput, registers, occupancy limit), and where Nsight Systems is installed
# trace the default configuration (CUDA graph nodes one by one) and print, for the decode steps'
# kernels in launch order, the median duration and the gap after the previous kernel
# (scripts/decode_timeline.py).
#   device tool: run command="bash scripts/device-decode-profile.sh" carry=[".sysroot", ".device-home"]
# Environment: SEED_HOME=FILE.tgz, VARIANTS (lines "name|e2e flags"; empty: none), SKIP_NCU=1, NCU_ROWS (GEMV
# rows per warp to profile, default "1 2"), SKIP_NSYS=1.
# Out ($OUT): build.log, e2e-b1-*.json, ncu-b1-rows*.csv, decode-timeline.txt (with nsys).
set -uo pipefail
source "$(dirname "$0")/device-prologue.sh"
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null || exit 1
common="--device cuda --model $model --batch 1 --prompt 512 --kernels best --graphs on --json"
variants=${VARIANTS-"best|
r2|--gemv-rows 2
nopdl|--pdl off"}
while IFS='|' read -r name flags; do
  [ -n "$name" ] || continue
  timeout 150 $bin e2e $common --gen 64 $flags > "$OUT/e2e-b1-$name.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e b1-$name ($flags): exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-b1-$name.json" "  b1-$name"
done <<< "$variants"
# Per-kernel GPU time of the first decode step's GEMVs and attention (Nsight Compute, one kernel
# at a time, caches flushed between them as a weight stream sees them; clocks left as they are).
# At batch 1 only decode runs the GEMV path and the engine's decode attention, so the first 15 matching
# launches are the first 3 layers of the first decode step (with the persistent kernel: its launches).
if [ "${SKIP_NCU:-0}" != 1 ] && command -v ncu > /dev/null; then
  for rows in ${NCU_ROWS:-1 2}; do
    timeout 200 ncu --clock-control none --kernel-name "regex:engine_gemv|engine_decode_attention|engine_decode_layers" --launch-count 15 \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__occupancy_limit_registers,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active \
      --csv $bin e2e --device cuda --model $model --batch 1 --prompt 512 --gen 3 --graphs off --gemv-rows $rows \
      > "$OUT/ncu-b1-rows$rows.csv" 2>> "$OUT/e2e-stderr.log"
    echo "ncu rows $rows: exit $?"
    python3 - "$OUT/ncu-b1-rows$rows.csv" <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.DictReader(lines))
by = {}
for r in rows:
    key = (r["ID"], r["Kernel Name"][:34])
    by.setdefault(key, {})[r["Metric Name"]] = r["Metric Value"]
for (i, name), m in by.items():
    print(f"  {name:<34} {m.get('gpu__time_duration.sum','?'):>8} ns  dram {m.get('dram__bytes_read.sum','?'):>10}"
          f"  {m.get('dram__throughput.avg.pct_of_peak_sustained_elapsed','?'):>6}% peak  regs {m.get('launch__registers_per_thread','?')}"
          f"  blk/SM(regs) {m.get('launch__occupancy_limit_registers','?')}  grid {m.get('launch__grid_size','?')}"
          f"  warps {m.get('sm__warps_active.avg.pct_of_peak_sustained_active','?')}%")
PY
  done
fi
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
