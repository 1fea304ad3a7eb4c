#!/usr/bin/env python3
"""Timing experiment (prepared for a next call, run4.sh): in the blocks that run an attention part,
every thread waits for all its in-flight ring copies (cp.async.wait_all) before the attention stage.
Those parts then start later, but with no weight traffic of their own SM in flight. If the
entry-to-query time of trace.py's trace falls from about 3.5 µs, the ring's copies were what delayed
the parts' row loads. Usage: waitall.py FILE (alone, or after trace.py; edits in place; exits 1 if
the anchor is missing). Timing only."""
import sys

from srcedit import SourceEdit

if len(sys.argv) != 2:
    sys.exit(__doc__)
src = SourceEdit(sys.argv[1])
old = "    if constexpr (TD > 0) engine_dl_attention_stage_tc<G, TD>(at, S, attn_sm);\n"
src.sub(old, "    if ((int)blockIdx.x < (int)(at.B * at.NKV) * S) asm volatile(\"cp.async.wait_all;\" ::: \"memory\");\n" + old)
src.save()
