#!/usr/bin/env bash
# Run 2 (H200): kernel variants of the L2 lookahead on one machine. The lookahead was measured
# slower and is not in the engine: this script first applies run2-kernel.patch and host.patch
# (made against e1ed0f6) to the working tree. For each of VARIANTS (default "old warp bulk"):
# old = the kernel without the lookahead (the host patch stays: the old kernel ignores the
# lookahead's bits), warp = run2-kernel.patch (warp 0 refills out of line, its lanes
# prefetch.global.L2 each line), bulk = the same with ENGINE_DL_AHEAD_BULK (lane 0's
# cp.async.bulk.prefetch.L2 of 64 KiB chunks). Each variant: rebuild `thrive`, then `thrive e2e`
# at batch 1 (prompt 512, 64 tokens) for each lookahead of AHEAD_<variant> (KiB; default 0).
#   device tool: run command="bash bench/results/h200-l2-ahead-2026-12-02/run2-variants.sh" carry=[".sysroot"]
# Out ($OUT): build.log, e2e-VARIANT-aKIB.json, e2e-stderr.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
src=kernels/cuda/engine/qwen3_engine.cu
git apply "$here/run2-kernel.patch" "$here/host.patch" || exit 1
cp $src /tmp/engine-base.cu
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
  -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
  -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" > "$OUT/build.log" 2>&1 || exit 1
model=/tmp/qwen3-1.7b-random
for v in ${VARIANTS:-old warp bulk}; do
  cp /tmp/engine-base.cu $src
  case $v in
    old) patch -s -R $src < "$here/run2-kernel.patch" || exit 1 ;;
    bulk) sed -i '1i #define ENGINE_DL_AHEAD_BULK' $src ;;
  esac
  t0=$(date +%s)
  cmake --build build-device -j "$(nproc)" --target thrive >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "variant $v: built in $(( $(date +%s) - t0 )) s"
  [ -f $model/config.json ] || timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 --force > /dev/null
  var=AHEAD_$v
  for a in ${!var:-0}; do
    for b in ${BATCHES:-1}; do
      name=$v-b$b-a$a
      timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch $b --prompt 512 --gen 64 --kernels best \
        --graphs on --json --persistent-l2-ahead $a > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log"
      echo "e2e $name: exit $?"
      python3 scripts/e2e_summary.py "$OUT/e2e-$name.json" "  $name" --layer
    done
  done
done
cp /tmp/engine-base.cu $src
