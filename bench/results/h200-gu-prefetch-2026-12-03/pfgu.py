#!/usr/bin/env python3
"""Timing experiment (run 1): as the attention stage starts, each block of the persistent decode
kernel asks L2 to prefetch (cp.async.bulk.prefetch.L2, 64 KiB pieces) CNT of its gate/up row
groups after the first SKIP: weights the ring will only reach after attention, the o stage and
the o barrier, while the DRAM otherwise idles once the ring's NS - 1 tiles have landed. A row
group of Wgu is 16 rows x H bf16, contiguous (64 KiB at H = 2048). If the gate/up GEMV then takes
those tiles from L2, the step should shorten by up to a third of their DRAM time (session7/ run 1
of h200-persistent-decode-2026-12-01: a prefetched stream ran at 1.1-1.65x the DRAM rate).
Usage: pfgu.py FILE SKIP CNT (edits FILE in place; exits 1 if the anchor is missing). Timing only."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h200-ldmatrix-2026-12-03"))
from srcedit import SourceEdit  # noqa: E402

if len(sys.argv) != 4 or not (sys.argv[2].isdigit() and sys.argv[3].isdigit()):
    sys.exit(__doc__)
skip, cnt = int(sys.argv[2]), int(sys.argv[3])
src = SourceEdit(sys.argv[1])
old = "    // attention\n    if (stamp) stamps[kDlStages * l + kDlAttn] = engine_globaltimer_ns();\n"
src.sub(old, f"""    if (threadIdx.x == 0) {{  // (experiment pfgu.py) L2 prefetch of gate/up row groups past the ring
      long long q0, q1;
      engine_dl_groups(2 * (long long)I, q0, q1);
      const long long a0 = q0 + {skip}, a1 = q1 < a0 + {cnt} ? q1 : a0 + {cnt};
      const unsigned long long gb = (unsigned long long)W[kDlWgu];
      for (long long off = a0 * 16 * H * 2; off < a1 * 16 * H * 2; off += 65536) {{
        const long long left = a1 * 16 * H * 2 - off;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(gb + off), "r"((unsigned)(left < 65536 ? left : 65536))
                     : "memory");
      }}
    }}
""" + old)
src.save()
