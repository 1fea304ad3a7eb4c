#!/usr/bin/env bash
# Run 2 (H200): the tensor-core parts with two-term softmax weights (hi + lo bf16): the persistent
# tests, then batch-1 timings (prompt 512, 64 tokens): the tensor-core parts, with 2 ring stages
# (--persistent-stages 2: less weight traffic in flight during attention), without the KV
# prefetch, the CUDA-core parts; then timing-only kernel variants (scripts/device-kernel-variants.sh):
#   attn2   the tensor-core attention stage run twice a layer (the second pass is idempotent and
#           waits for nothing: the parts' own time)
#   nokv    the parts' key and value loads from the cache replaced by zeros (wrong tokens)
#   noattn  no attention stage and no wait for its output (wrong tokens)
#   device tool: run command="bash bench/results/h200-tc-attention-2026-12-02/run2-variants.sh" carry=[".sysroot"]
# Out ($OUT): build.log, gtest.log, e2e-*.json, e2e-variant-*.json.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
  -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
  -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" > "$OUT/build.log" 2>&1 &&
  cmake --build build-device -j "$(nproc)" --target thrive model_test_cuda_engine >> "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 120 ./build-device/thrive model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null &
timeout 300 ./build-device/tests/model_test_cuda_engine --gtest_filter="${FILTER:-*Persistent*}" > "$OUT/gtest.log" 2>&1
echo "gtest exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/gtest.log" | head -20
grep -A3 "Failure" "$OUT/gtest.log" | head -30
wait
e2e() {  # name, then flags
  local name=$1; shift
  timeout 150 ./build-device/thrive e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best \
    --graphs on --json "$@" > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $name: exit $?"
  python3 scripts/e2e_summary.py "$OUT/e2e-$name.json" "  $name" --layer
}
e2e tc
e2e tc-ns2 --persistent-stages 2
e2e tc-nopf --persistent-kv-prefetch off
e2e cores --persistent-attention cores
stage='    if constexpr (TD > 0) engine_dl_attention_stage_tc<G, TD>(at, S, attn_sm);'
attn2="s/^$stage\$/&\n    __syncthreads();\n$stage/"
nokv='s/\*(const uint4\*)(kb + jk \* stride + 32 \* i + 8 \* c)/make_uint4(0u, 0u, 0u, 0u)/;s/\*(const uint4\*)(vb + ja \* stride + r \* (D \/ 8) + 8 \* i)/make_uint4(0u, 0u, 0u, 0u)/;s/\*(const uint4\*)(vb + (ja + 1) \* stride + r \* (D \/ 8) + 8 \* i)/make_uint4(0u, 0u, 0u, 0u)/'
noattn="s/^$stage\$/    if constexpr (TD > 0) {}/;s/engine_ll_wait8(at.out_ll + i \/ 2, tag)/make_uint4(0u, 0u, 0u, 0u)/"
OUT=$OUT KVARIANTS="attn2|$attn2
nokv|$nokv
noattn|$noattn" bash scripts/device-kernel-variants.sh 2>&1 | grep -v "^name,\|^NVIDIA"
