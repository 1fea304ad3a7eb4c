#!/usr/bin/env bash
# Twentieth pass, call 1 (H200, 2026-12-04): the stage handoffs by relaxed counts and tagged data
# (kDlTaggedHandoffs = true) against the fenced counts and plain data (false), batch 1 and 4,
# alternating; the persistent kernel's GPU tests with the tagged handoffs; the tile loops' spill
# loads of both (cuobjdump on the device: this machine's toolkit has none).
#   device tool: run command="bash bench/results/h200-tagged-handoffs-2026-12-04/run1.sh" carry=["build-carry"]
#   build-carry/: thrive and model_test_cuda_engine built from the working tree (cmake --build build
#   --target thrive model_test_cuda_engine), thrive-fenced the same with kDlTaggedHandoffs = false;
#   lib/ = libfmt.so.9, libspdlog.so.1.10, libsqlite3.so.0 from the CPU machine (Debian 12).
# Out ($OUT): e2e-{tagged,fenced}{1,2}.json, e2e-{tagged,fenced}-b4.json, tests.txt, spills.txt.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-fenced model_test_cuda_engine
e2e tagged1 "$OUT" thrive 1
e2e fenced1 "$OUT" thrive-fenced 1
e2e tagged2 "$OUT" thrive 1
e2e fenced2 "$OUT" thrive-fenced 1
e2e tagged-b4 "$OUT" thrive 4
e2e fenced-b4 "$OUT" thrive-fenced 4
timeout 300 build-carry/model_test_cuda_engine \
  --gtest_filter='*Persistent*:*GqaGroups*:*GreedyLoop*:*BatchOne*' > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$OUT/tests.txt" | head -30
# spills: the embedded kernel source, both settings, with the device's nvcc and cuobjdump
here=bench/results/h200-tagged-handoffs-2026-12-04
for v in true false; do
  sed "s/^constexpr bool kDlTaggedHandoffs = true;/constexpr bool kDlTaggedHandoffs = $v;/" kernels/cuda/engine/qwen3_engine.cu > /tmp/q-$v.cu
  nvcc -arch=sm_90 -std=c++17 -cubin -Xptxas -v -I kernels/cuda /tmp/q-$v.cu -o /tmp/q-$v.cubin 2> /tmp/q-$v.ptxas || echo "nvcc $v failed"
  echo "== kDlTaggedHandoffs = $v: $(grep -A2 "entry function 'engine_decode_layers_tc_g2_d128'" /tmp/q-$v.ptxas | tail -1)" >> "$OUT/spills.txt"
  cuobjdump -sass -fun engine_decode_layers_tc_g2_d128 /tmp/q-$v.cubin > /tmp/q-$v.sass
  python3 bench/results/h200-tid-remat-2026-12-02/tile_loop_spills.py /tmp/q-$v.sass "tagged=$v" >> "$OUT/spills.txt"
done
cat "$OUT/spills.txt"
