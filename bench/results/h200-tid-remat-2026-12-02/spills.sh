#!/usr/bin/env bash
# ptxas spill counts of the persistent kernel's entries and the GEMV tile loops' spill loads of
# the G = 2, D = 128 tensor-core entry (Qwen3-1.7B), for REVS (default: e1ed0f6 and 8db99aa),
# with this machine's nvcc (13.0) and cuobjdump. Writes tile-loop-spills.txt beside this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
work=$(mktemp -d)
out="$here/tile-loop-spills.txt"
echo "# $(nvcc --version | tail -1); nvcc -arch=sm_90 -std=c++17 -cubin -Xptxas -v; cuobjdump -sass" > "$out"
for rev in ${REVS:-e1ed0f6 8db99aa}; do
  mkdir -p "$work/$rev"
  git -C "$repo" archive "$rev" kernels/cuda | tar -x -C "$work/$rev"
  nvcc -arch=sm_90 -std=c++17 -cubin -Xptxas -v -I "$work/$rev/kernels/cuda" \
    "$work/$rev/kernels/cuda/engine/qwen3_engine.cu" -o "$work/$rev/q.cubin" 2> "$work/$rev/ptxas.txt"
  echo "== $rev: ptxas, engine_decode_layers_tc_g2_d128" >> "$out"
  grep -A2 "Compiling entry function 'engine_decode_layers_tc_g2_d128'" "$work/$rev/ptxas.txt" | tail -1 >> "$out"
  cuobjdump -sass -fun engine_decode_layers_tc_g2_d128 "$work/$rev/q.cubin" > "$work/$rev/g2.sass"
  python3 "$here/tile_loop_spills.py" "$work/$rev/g2.sass" "$rev engine_decode_layers_tc_g2_d128" >> "$out"
done
rm -rf "$work"
cat "$out"
