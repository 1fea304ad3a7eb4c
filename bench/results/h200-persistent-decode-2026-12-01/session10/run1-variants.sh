#!/usr/bin/env bash
# Session 10, run 1: where the attention stage's time goes (timing only, batch 1).
#   base    the committed kernel
#   attn2   the attention stage run twice a layer (the second pass is idempotent: the same tagged
#           words with the same tags and values, the same KV-cache row; it waits for nothing, its
#           qkv rows and partial results are already there, and its code and data are warm)
#   noattn  no attention parts and no wait for their output (wrong tokens; timing only)
#   u1      one key slot a lane per round of loads instead of two (a smaller attention code)
#   batched session9/batched-ll-waits.patch (all G + 2 qkv pieces of a part in flight at once)
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session10/run1-variants.sh"
#                carry=[".sysroot"]
# Out ($OUT): build.log, e2e-variant-*.json (scripts/device-kernel-variants.sh).
here=bench/results/h200-persistent-decode-2026-12-01
attn2='s/^    engine_dl_attention_stage<G>(at, S, attn_sm);$/&\n    __syncthreads();\n    engine_dl_attention_stage<G>(at, S, attn_sm);/'
noattn='s/^    engine_decode_attention_part<G, true, 2, true>(at, s, g, b, S, tid, sm\[half\], sync);$//;s/engine_ll_wait8(at.out_ll + i \/ 2, tag)/make_uint4(0u, 0u, 0u, 0u)/'
u1='s/engine_decode_attention_part<G, true, 2, true>/engine_decode_attention_part<G, true, 1, true>/'
KVARIANTS="base|
attn2|$attn2
noattn|$noattn
u1|$u1" bash scripts/device-kernel-variants.sh
git apply "$here/session9/batched-ll-waits.patch" || exit 1
KVARIANTS="batched|" bash scripts/device-kernel-variants.sh
git checkout kernels/cuda/engine/qwen3_engine.cu
