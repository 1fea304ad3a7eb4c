#!/usr/bin/env bash
# Run 2 (H200, 2026-12-03): the committed candidate (ldmatrix-tid.patch applied to the persistent
# kernel) through scripts/device-e2e.sh: the whole test suite (GPU tests included), `thrive e2e` at
# batch 1, 4 and 256 (prompt 512, 64 tokens, best kernels, CUDA graphs) and the Hugging Face
# comparison; then one longer batch-1 decode (2,000 tokens) with nvidia-smi sampling the SM and
# memory clocks, the power draw and the clock-event (throttle) reasons every 100 ms, read-only: the
# question is what clock the latency-bound attention stage runs at while the weight stream holds
# DRAM busy.
#   device tool: run command="bash bench/results/h200-ldmatrix-2026-12-03/run2.sh" carry=[".sysroot"]
# Out ($OUT): device-e2e.sh's files (build.log, ctest.log, e2e-b1-best/b4-best/b256-best.json,
# e2e-stderr.log, hf-compare.json) and smi.csv; the long run's JSON stays in /tmp (8 files at most
# come back), its summary is printed. (After call 2: exit when device-e2e.sh fails, wait for the
# sampler, and clock fields that are not numbers read as 0.)
set -uo pipefail
cd "$(dirname "$0")/../../.."
RUNS="b1-best b4-best b256-best" GEN=64 bash scripts/device-e2e.sh || exit 1
OUT=${OUT:-/tmp/thrive-out}
# the reasons field's name since driver 535; the older name otherwise
reasons=clocks_event_reasons.active
nvidia-smi --query-gpu=$reasons --format=csv,noheader > /dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,$reasons \
  --format=csv,noheader -lms 100 > "$OUT/smi.csv" 2>&1 &
smi=$!
sleep 1
timeout 120 ./build-device/thrive e2e --device cuda --model /tmp/qwen3-1.7b-random --batch 1 --prompt 512 --gen 2000 \
  --kernels best --graphs on --json > /tmp/e2e-b1-long.json 2>> "$OUT/e2e-stderr.log"
echo "long run: exit $?"
sleep 1
kill $smi
wait $smi 2> /dev/null
python3 scripts/e2e_summary.py /tmp/e2e-b1-long.json "  b1-gen2000" --layer
python3 - "$OUT/smi.csv" <<'PY'
import sys, statistics
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 4]
def mhz(v):
    try:
        return float(v.split()[0])
    except (ValueError, IndexError):  # "[N/A]", "[Not Supported]"
        return 0.0
busy = [r for r in rows if mhz(r[1]) > 400]
print(f"smi samples {len(rows)}, with the SM clock above 400 MHz: {len(busy)}")
if busy:
    sm = [mhz(r[1]) for r in busy]; mem = [mhz(r[2]) for r in busy]
    pw = [float(r[3].split()[0]) for r in busy if r[3].split()[0].replace('.', '', 1).isdigit()]
    print(f"  SM MHz min {min(sm):.0f} median {statistics.median(sm):.0f} max {max(sm):.0f}; memory MHz median {statistics.median(mem):.0f}")
    if pw: print(f"  power W min {min(pw):.0f} median {statistics.median(pw):.0f} max {max(pw):.0f}")
    reasons = {}
    for r in busy: reasons[r[4].strip()] = reasons.get(r[4].strip(), 0) + 1
    print("  clock-event reasons (bitmask: samples):", reasons)
PY
