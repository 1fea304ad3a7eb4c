#!/usr/bin/env bash
# Run 1 (H200, 2026-12-03): does an L2 prefetch of the gate/up weights during attention shorten the
# batch-1 step? Binaries built on a CPU machine and carried (no device build): thrive-base (the
# committed kernel) and thrive-pf<SKIP><CNT> (pfgu.py SKIP CNT), then the step time of each
# (batch 1, prompt 512, 64 tokens, CUDA graphs, persistent kernel), alternating, two rounds. Also
# the spill loads and stores of the G = 2, D = 128 tensor-core entry by source line (nvcc -lineinfo
# and nvdisasm there; spill_lines.py).
# To make build-carry/ (git-ignored), in the repository root after scripts/setup.sh:
#   F=kernels/cuda/engine/qwen3_engine.cu; H=bench/results/h200-gu-prefetch-2026-12-03; cp $F /tmp/orig.cu
#   mkdir -p build-carry/lib && cmake --build build --target thrive && cp build/thrive build-carry/thrive-base
#   for v in "2 2" "2 3" "2 4"; do set -- $v; python3 $H/pfgu.py $F $1 $2 && cmake --build build --target thrive &&
#     cp build/thrive build-carry/thrive-pf$1$2; cp /tmp/orig.cu $F; done; cmake --build build --target thrive
#   cp -L /lib/x86_64-linux-gnu/{libspdlog.so.1.10,libfmt.so.9,libsqlite3.so.0} build-carry/lib/
#   device tool: run command="bash bench/results/h200-gu-prefetch-2026-12-03/run1.sh" carry=["build-carry"]
# Out ($OUT): e2e-<name>-<round>.json (8), e2e-stderr.log, spill-lines.txt (the first 8 files).
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=bench/results/h200-gu-prefetch-2026-12-03
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build-carry/lib THRIVE_HOME=/tmp/thrive-home
ldd build-carry/thrive-base | grep "not found" && exit 1
model=/tmp/qwen3-1.7b-random
timeout 60 build-carry/thrive-base model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || { echo "init failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for round in 1 2; do
  for r in base pf22 pf23 pf24; do
    timeout 90 build-carry/thrive-$r e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
      --graphs on --persistent on --json > /tmp/e2e-$r-$round.json 2>> /tmp/e2e-stderr.log || echo "$r round $round: exit $?"
    python3 scripts/e2e_summary.py /tmp/e2e-$r-$round.json "  $r-$round" --layer
  done
done
cp /tmp/e2e-*-2.json "$OUT/"
tail -20 /tmp/e2e-stderr.log > "$OUT/e2e-stderr.log"
work=$(mktemp -d)
nvcc -arch=sm_90 -std=c++17 -cubin -lineinfo -I kernels/cuda kernels/cuda/engine/qwen3_engine.cu -o $work/q.cubin 2> /dev/null &&
  { nvdisasm -g -c -fun engine_decode_layers_tc_g2_d128 $work/q.cubin > $work/g2.sass 2> $work/err ||
    { echo "nvdisasm -fun: $(head -c 200 $work/err); all entries instead"; nvdisasm -g -c $work/q.cubin > $work/g2.sass; }; } &&
  python3 $here/spill_lines.py $work/g2.sass kernels/cuda/engine/qwen3_engine.cu 40 | tee "$OUT/spill-lines.txt" | head -45
