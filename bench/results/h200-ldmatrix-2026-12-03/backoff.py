#!/usr/bin/env python3
"""Timing experiment (run 3): back off between the polls of tagged words in the persistent decode
kernel. Usage: backoff.py FILE MODE NS. MODE "o": only the o stage's wait for the attention output
(up to 256 threads in each of the ~60 blocks without attention parts poll its 8 KiB while the
parts run); MODE "all": every tagged-word wait (engine_ll_wait and engine_ll_wait8: the parts'
qkv rows, the merge's partial results, the o input). NS: __nanosleep after each miss. Edits FILE
in place; exits 1 if an anchor is missing."""
import sys

from srcedit import SourceEdit

if len(sys.argv) != 4 or not sys.argv[3].isdigit():
    sys.exit(__doc__)
path, mode, ns = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = SourceEdit(path)
sub = src.sub

if mode == "all":
    # both poll loops: sleep after the timeout check, on every miss
    sub("""  for (int spin = 0; (unsigned)(w >> 32) != tag; ++spin) {
    engine_poll_timeout(spin, t0);
""", f"""  for (int spin = 0; (unsigned)(w >> 32) != tag; ++spin) {{
    engine_poll_timeout(spin, t0);
    __nanosleep({ns});
""")
    sub("""      break;
    engine_poll_timeout(spin, t0);
  }
  return make_uint4((unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3]);""",
        f"""      break;
    engine_poll_timeout(spin, t0);
    __nanosleep({ns});
  }}
  return make_uint4((unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3]);""")
elif mode == "o":
    sub("""// Shared memory of one attention group (128 threads""", f"""// engine_ll_wait8 with a {ns} ns sleep after each miss (timing experiment)
__device__ __forceinline__ uint4 engine_ll_wait8_nap(const unsigned long long* p, unsigned tag) {{
  unsigned long long w[4], t0 = 0;
  for (int spin = 0;; ++spin) {{
    asm volatile("ld.relaxed.gpu.global.v2.b64 {{%0, %1}}, [%2];" : "=l"(w[0]), "=l"(w[1]) : "l"(p) : "memory");
    asm volatile("ld.relaxed.gpu.global.v2.b64 {{%0, %1}}, [%2];" : "=l"(w[2]), "=l"(w[3]) : "l"(p + 2) : "memory");
    if ((unsigned)(w[0] >> 32) == tag && (unsigned)(w[1] >> 32) == tag && (unsigned)(w[2] >> 32) == tag &&
        (unsigned)(w[3] >> 32) == tag)
      break;
    engine_poll_timeout(spin, t0);
    __nanosleep({ns});
  }}
  return make_uint4((unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3]);
}}
// Shared memory of one attention group (128 threads""")
    sub("engine_ll_wait8(at.out_ll + i / 2, tag)", "engine_ll_wait8_nap(at.out_ll + i / 2, tag)")
else:
    sys.exit(f"mode {mode!r}: expected o or all")
src.save()
