#!/usr/bin/env python3
"""Summary of trace_patch.py's TR lines (stdin or a file): per eager step, each point's spread over
the blocks (µs after the earliest qkv start) and each interval's duration over the blocks (median,
min, max), with blocks split by their qkv row groups (1 or 2 at Qwen3-1.7B on 132 SMs)."""
import statistics as st, sys
names = ["qkv start", "qkv normed", "qkv done", "attn parts done", "o input", "o done", "gu wait done",
         "gu normed", "gu done", "down wait done", "swiglu ready", "down done"]
lines = [l.split() for l in (open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin) if l.startswith("TR ")]
steps, cur = [], {}
for l in lines:
    b = int(l[1])
    if b in cur:
        steps.append(cur); cur = {}
    cur[b] = [int(x) for x in l[2:]]
if cur: steps.append(cur)
def row(label, xs):
    xs = sorted(xs)
    return f"  {label:<28} median {st.median(xs):7.2f}  min {xs[0]:7.2f}  max {xs[-1]:7.2f}"
for si, blocks in enumerate(steps):
    n = len(blocks)
    grid = max(blocks) + 1
    groups = {b: (256 * (b + 1)) // grid - (256 * b) // grid for b in blocks}
    t0 = min(v[0] for v in blocks.values())
    print(f"step {si}: {n} blocks; points, µs after the earliest qkv start")
    for k, nm in enumerate(names):
        print(row(nm, [(v[k] - t0) / 1e3 for v in blocks.values()]))
    print("  intervals, µs (all blocks | blocks with 1 qkv group | with 2)")
    for k in range(1, len(names)):
        d = {b: (v[k] - v[k - 1]) / 1e3 for b, v in blocks.items()}
        one = [x for b, x in d.items() if groups[b] == 1]
        two = [x for b, x in d.items() if groups[b] == 2]
        extra = f" | 1: {st.median(one):6.2f} | 2: {st.median(two):6.2f}" if one and two else ""
        print(row(f"{names[k - 1]} -> {names[k]}", list(d.values())) + extra)
    slow = sorted(blocks, key=lambda b: blocks[b][2])[-5:]
    print(f"  last 5 blocks to finish qkv: {slow}; first 5: {sorted(blocks, key=lambda b: blocks[b][2])[:5]}")
