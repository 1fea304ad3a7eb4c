#!/usr/bin/env python3
"""Variant `kvnext` (run 4): each layer's KV-cache prefetch into L2 moves off the qkv stage's path
(thread 32 issued it there, before the RMSNorm's block sum): layer 0's at the kernel's start, layer
l + 1's by the block's last thread as layer l's attention stage starts (idle there)."""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from source_edit import Edit  # noqa: E402
e = Edit(sys.argv[1])
once = e.once
once("    if (kv_prefetch && threadIdx.x == 32) engine_dl_prefetch_kv(a, tab, lens, l);\n",
     "    if (kv_prefetch && threadIdx.x == 32 && l == 0) engine_dl_prefetch_kv(a, tab, lens, 0);\n")
once("    const EngineAttention at = engine_dl_attention<G>(a, tab, lens, rope, qk_w, l, S, tag);\n",
     "    const EngineAttention at = engine_dl_attention<G>(a, tab, lens, rope, qk_w, l, S, tag);\n"
     "    if (kv_prefetch && threadIdx.x == blockDim.x - 1 && l + 1 < d.layers) engine_dl_prefetch_kv(a, tab, lens, l + 1);\n")
e.save()
