#!/usr/bin/env bash
# Session 10, run 2: Nsight Compute's per-instruction warp-state samples of one batch-1 launch of
# the persistent decode kernel (the first decode step, eager), exported as the SASS source page
# (address, instruction, samples by stall reason), to find where the attention stage's cycles go.
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session10/run2-profile.sh"
#                carry=[".sysroot"]
# Out ($OUT): build.log, ncu-sass.csv.gz, ncu-details.txt.
source "$(dirname "$0")/../../../../scripts/device-prologue.sh"
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
timeout 400 ncu --clock-control none --kernel-name "regex:engine_decode_layers" --launch-count 1 \
  --section WarpStateStats --section SourceCounters --import-source no -o "$OUT/ncu" -f \
  $bin e2e --device cuda --model $model --batch 1 --prompt 512 --gen 3 --graphs off --persistent on > /dev/null 2> "$OUT/e2e-stderr.log"
echo "ncu: exit $?"
ncu --import "$OUT/ncu.ncu-rep" --page details --csv > "$OUT/ncu-details.txt" 2>&1
ncu --import "$OUT/ncu.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/ncu-sass.csv.gz"
zcat "$OUT/ncu-sass.csv.gz" | head -3 | cut -c1-1500
rm -f "$OUT/ncu.ncu-rep"
