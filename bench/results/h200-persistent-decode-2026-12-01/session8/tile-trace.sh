#!/usr/bin/env bash
# Session 8: a per-tile trace (clock64) of the persistent decode kernel with the TMA weight ring
# issued by thread 0 (thread0-tma-ring-attempt.patch for the kernel, with the host and backend side
# of producer-warp-ring-attempt.patch and 512 threads a block: how run 4 was built), layer 10 of
# its 40th launch, blocks 0 and 100 (tma-tile-trace.patch on top), then the same build
# without the trace, then variants: TMA with 16 2-D copies a tile instead of one 3-D one
# ("tma2d"), and the cp.async kernel of the last commit before the ring (git HEAD's kernel
# source; the host side is compatible with it).
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session8/tile-trace.sh"
#                carry=[".sysroot"]
# Out ($OUT): build.log, tt.txt (the e2e text with the kernel's "TT block index code value"
# lines), e2e-variant-*.json; summary: python3 .../session8/tile-trace.py FILE
here=bench/results/h200-persistent-decode-2026-12-01/session8
src=kernels/cuda/engine/qwen3_engine.cu
cp $src /tmp/tma-src.cu
if ! grep -q EngineDlRing $src && ! grep -q "pump(unsigned need)" $src; then  # on the committed source: the attempt first
  git apply "$here/producer-warp-ring-attempt.patch" || exit 1
  git checkout $src && git apply "$here/thread0-tma-ring-attempt.patch" || exit 1
  sed -i 's/{"engine_decode_layers_g\([1248]\)", "544"/{"engine_decode_layers_g\1", "512"/' src/model/cuda_engine.cpp
  cp $src /tmp/tma-src.cu
fi
git apply "$here/tma-tile-trace.patch" || exit 1
source scripts/device-prologue.sh
bin=./build-device/thrive; model=/tmp/qwen3-1.7b-random
[ -d $model ] || timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || exit 1
timeout 150 $bin e2e --device cuda --model $model --batch 1 --prompt 512 --kernels best --graphs on --gen 64 > "$OUT/tt.txt" 2>&1
echo "== trace: $(grep -c '^TT' $OUT/tt.txt) lines"; grep -E "ms/step" "$OUT/tt.txt" | head -2
python3 "$here/tile-trace.py" "$OUT/tt.txt"
cp /tmp/tma-src.cu $src
KVARIANTS=${KV:-$'tma|\ntma2d|s/if (K % 64 == 0) {/if (false) {/;s/if (k % 64 == 0) return be.encode/if (false) return be.encode/'} bash scripts/device-kernel-variants.sh
if [ "${OLD:-1}" = 1 ]; then
  git show HEAD:$src > $src && KVARIANTS="cpasync|" bash scripts/device-kernel-variants.sh
  cp /tmp/tma-src.cu $src
fi
