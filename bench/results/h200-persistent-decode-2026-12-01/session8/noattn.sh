#!/usr/bin/env bash
# Session 8: the persistent decode kernel without its attention work (every part counts itself
# done at once; wrong logits, timing only), with the producer warp's TMA ring
# (producer-warp-ring-attempt.patch) and with the committed cp.async ring: how fast the GEMV
# stages and their transitions run on their own under each ring.
#   device tool: run command="bash bench/results/h200-persistent-decode-2026-12-01/session8/noattn.sh"
#                carry=[".sysroot"]
# CPASYNC=0 skips the second. Out ($OUT): build.log, e2e-variant-noattn-*.json (via
# scripts/device-kernel-variants.sh).
here=bench/results/h200-persistent-decode-2026-12-01/session8
sed_noattn='s/if (engine_decode_attention_part<G, true, 2, true>(at, s, g, b, S, tid, sm\[half\], sync))/if (true)/'
git apply "$here/producer-warp-ring-attempt.patch" || exit 1
KVARIANTS="noattn-producer|$sed_noattn" bash scripts/device-kernel-variants.sh
git checkout kernels/cuda/engine/qwen3_engine.cu src/model/cuda_engine.cpp include/thrive/backend/backend.hpp src/backend/cuda_backend.cpp
[ "${CPASYNC:-1}" = 1 ] && KVARIANTS="noattn-cpasync|$sed_noattn" bash scripts/device-kernel-variants.sh
