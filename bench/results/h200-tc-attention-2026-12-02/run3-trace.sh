#!/usr/bin/env bash
# Run 3 (H200): a timeline of one layer's attention stage (layer 14 of the stage-timed eager steps,
# batch 1, prompt 512) with run3-trace.patch applied: device printf of %globaltimer at the qkv
# GEMV's end and the o stage's input (blocks 0, 11, 22, ...), and in each part of KV head 0
# (thread 0 and the first thread of the warp holding the new position): entry, query ready, tiles
# done, part barrier, partials stored, slice merged (ns after entry). Timing only; the patch is
# reverted at the end.
#   device tool: run command="bash bench/results/h200-tc-attention-2026-12-02/run3-trace.sh" carry=[".sysroot"]
# Out ($OUT): trace.txt.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
here=bench/results/h200-tc-attention-2026-12-02
git apply "$here/run3-trace.patch" || exit 1
{ cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
    -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
    -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" &&
    cmake --build build-device -j "$(nproc)" --target thrive; } > "$OUT/build.log" 2>&1 ||
  { tail -20 "$OUT/build.log"; git checkout kernels/cuda/engine/qwen3_engine.cu; exit 1; }
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null
for flags in "" "--persistent-stages 2"; do
  echo "== e2e $flags"
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 4 --kernels best \
    --graphs on $flags 2>&1 | grep DBG > "$OUT/trace$flags.txt"
  python3 - "$OUT/trace$flags.txt" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
print(len(lines), "lines")
q = [int(re.search(r"t=(\d+)", l).group(1)) for l in lines if "qkvend" in l]
o = [int(re.search(r"t=(\d+)", l).group(1)) for l in lines if "oin" in l]
p = [l for l in lines if "part" in l]
n = len(q) // 2  # two eager steps
for step in range(2):
    qs, os_ = q[step * n:(step + 1) * n], o[step * n:(step + 1) * n]
    t0 = min(qs)
    print(f"step {step}: qkv end, us after the first block: {[round((t - t0) / 1e3, 2) for t in qs]}")
    print(f"  o input landed: {[round((t - t0) / 1e3, 2) for t in os_]}")
    for l in p[step * len(p) // 2:(step + 1) * len(p) // 2]:
        T0 = int(re.search(r"T0=(\d+)", l).group(1))
        rest = re.sub(r"T0=\d+ ", "", l)
        print(f"  entry +{(T0 - t0) / 1e3:.2f} us: {rest}")
PY
done
git checkout kernels/cuda/engine/qwen3_engine.cu
