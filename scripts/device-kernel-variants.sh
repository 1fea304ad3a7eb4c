#!/usr/bin/env bash
# A/B variants of the engine's source on the GPU machine: for each line "name|edit[|flags]" of
# KVARIANTS, apply the edit to kernels/cuda/engine/qwen3_engine.cu (embedded at build time) and
# src/model/cuda_engine.cpp (the engine's host side), rebuild, run `thrive e2e` at batch BATCH
# (default 1), prompt 512, 64 tokens with the line's flags (default: E2E_FLAGS, itself by default
# "--persistent on"), print ms/step and the eager stage split, then restore the source. The edit is
# a sed script applied to both files, or, after "!", a shell command run in the repository root
# (e.g. "!patch -s -R -p1 < bench/results/FOLDER/change.patch" or "!python3 bench/results/FOLDER/
# edit.py kernels/cuda/engine/qwen3_engine.cu"); empty: the source as it is. A variant whose edit
# changes nothing (but for an empty one) is reported and skipped; lines may repeat a name, for
# alternating runs (their JSON files get -2, -3, ... suffixes). With NCU=1, first profile the base
# version's persistent kernel (one launch: the first decode step) with Nsight Compute's warp-state
# and source sections and print the 40 SASS lines with the most stall samples.
#   device tool: run command="KVARIANTS='...' bash scripts/device-kernel-variants.sh" carry=[".sysroot", ".device-home"]
# Out ($OUT): build.log, e2e-variant-*.json, ncu-persistent.ncu-rep, ncu-source-top.txt (NCU=1).
set -uo pipefail
source "$(dirname "$0")/device-prologue.sh"
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
src=kernels/cuda/engine/qwen3_engine.cu
host=src/model/cuda_engine.cpp
[ -d $model ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
common="--device cuda --model $model --batch ${BATCH:-1} --prompt 512 --kernels best --graphs on --json --gen 64"
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  timeout 300 ncu --clock-control none --kernel-name "regex:engine_decode_layers" --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --import-source no -o "$OUT/ncu-persistent" -f \
    $bin e2e --device cuda --model $model --batch 1 --prompt 512 --gen 3 --graphs off --persistent on > /dev/null 2>> "$OUT/e2e-stderr.log"
  echo "ncu: exit $?"
  ncu --import "$OUT/ncu-persistent.ncu-rep" --page details --csv 2>/dev/null |
    grep -E "DRAM Throughput|Duration|Warp Cycles|Issue Slots|L2 Hit|Mem Busy|Max Bandwidth" | head -20
  ncu --import "$OUT/ncu-persistent.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu-source.csv" 2>&1
  python3 - "$OUT/ncu-source.csv" > "$OUT/ncu-source-top.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r)), None)
if head is None:
    print("no header row; first lines:", [r[:6] for r in rows[:3]]); sys.exit()
cols = rows[head]
src = next(i for i, c in enumerate(cols) if c.strip() == "Source")
stall = next((i for i, c in enumerate(cols) if "Warp Stall Sampling (All" in c), None)
if stall is None:
    print("no stall column:", cols[:20]); sys.exit()
def num(v):
    try: return float(v.replace(",", ""))
    except ValueError: return 0.0
body = [(i, r) for i, r in enumerate(rows[head + 1:]) if len(r) > max(src, stall)]
total = sum(num(r[stall]) for _, r in body) or 1
print(f"{len(body)} SASS lines, {total:.0f} stall samples")
for i, r in sorted(body, key=lambda x: -num(x[1][stall]))[:40]:
    print(f"{i:5d} {100 * num(r[stall]) / total:5.1f}%  {r[src][:110]}")
PY
  head -42 "$OUT/ncu-source-top.txt"
  rm -f "$OUT/ncu-source.csv"
fi
cp $src /tmp/engine-src-base.cu
cp $host /tmp/engine-host-base.cpp
variants=${KVARIANTS-"base|"}
declare -A seen
while IFS='|' read -r name script flags; do
  [ -n "$name" ] || continue
  cp /tmp/engine-src-base.cu $src
  cp /tmp/engine-host-base.cpp $host
  if [ -n "$script" ]; then
    if [ "${script:0:1}" = "!" ]; then
      bash -c "${script:1}" || { echo "variant $name: the edit failed"; continue; }
    else
      sed -i "$script" $src $host
    fi
    if cmp -s $src /tmp/engine-src-base.cu && cmp -s $host /tmp/engine-host-base.cpp; then
      echo "variant $name: the edit changes nothing, skipped"
      continue
    fi
  fi
  seen[$name]=$(( ${seen[$name]:-0} + 1 ))
  file="$OUT/e2e-variant-$name.json"
  [ "${seen[$name]}" -gt 1 ] && file="$OUT/e2e-variant-$name-${seen[$name]}.json"
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { echo "variant $name: build failed"; tail -20 "$OUT/build.log"; continue; }
  # shellcheck disable=SC2086
  timeout 150 $bin e2e $common ${flags:-${E2E_FLAGS:---persistent on}} > "$file" 2>> "$OUT/e2e-stderr.log"
  echo "variant $name: exit $?"
  python3 scripts/e2e_summary.py "$file" "  $name" --layer
done <<< "$variants"
cp /tmp/engine-src-base.cu $src
cp /tmp/engine-host-base.cpp $host
cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1
