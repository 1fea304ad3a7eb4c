#!/usr/bin/env python3
"""Summary of tile_trace_patch.py's TT lines: per eager step, for the blocks with the most common
tile count, per tile index: the median (min, max) over blocks of the gap since the previous tile
landed and of the issue's duration (µs)."""
import collections, statistics as st, sys
rows = [l.split() for l in (open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin) if l.startswith("TT ")]
steps, cur = [], collections.defaultdict(list)
for r in rows:
    b, n, a, e = int(r[1]), int(r[2]), int(r[3]), int(r[4])
    if n == 0 and b in cur:
        steps.append(cur); cur = collections.defaultdict(list)
    cur[b].append((a, e))
if cur: steps.append(cur)
for si, blocks in enumerate(steps):
    common = collections.Counter(len(v) for v in blocks.values()).most_common(1)[0][0]
    sel = {b: v for b, v in blocks.items() if len(v) == common}
    print(f"step {si}: {len(blocks)} blocks, {len(sel)} with {common} tiles (layer 14)")
    issue_all = [(e - a) / 1e3 for v in blocks.values() for a, e in v]
    print(f"  issue duration over all tiles: median {st.median(issue_all):.3f} µs, max {max(issue_all):.3f}")
    for n in range(common):
        gap = [(v[n][0] - v[n - 1][0]) / 1e3 for v in sel.values()] if n else [0.0]
        iss = [(v[n][1] - v[n][0]) / 1e3 for v in sel.values()]
        print(f"  tile {n:2}: landed {st.median(gap):6.3f} after the previous (min {min(gap):6.3f}, max {max(gap):6.3f}); "
              f"issue {st.median(iss):6.3f} (max {max(iss):6.3f})")
