#!/usr/bin/env python3
"""Timing variant (run 1): engine_lm_head's weight loads with an L2 evict-first policy
(createpolicy.fractional.L2::evict_first, as the persistent kernel's weight ring uses), so the 622 MB
vocabulary stream does not push the logits, the residual stream and the first layers' KV cache out
of L2 before the next step. Usage: evict_first.py FILE (edits FILE in place; exits 1 if the anchor
is missing). Timing only."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h200-ldmatrix-2026-12-03"))
from srcedit import SourceEdit  # noqa: E402

if len(sys.argv) != 2:
    sys.exit(__doc__)
src = SourceEdit(sys.argv[1])
src.sub("""#pragma unroll
  for (int u = 0; u < kLmU; ++u) {
    const long long k = kc + lane * 8 + u * 256;
    w[u] = n < N && k < K ? engine_ld_stream(W + n * K + k) : make_uint4(0u, 0u, 0u, 0u);
  }""", """  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#pragma unroll
  for (int u = 0; u < kLmU; ++u) {
    const long long k = kc + lane * 8 + u * 256;
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (n < N && k < K)
      asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
          : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(W + n * K + k), "l"(pol));
    w[u] = r;
  }""")
src.save()
