#!/usr/bin/env python3
"""Summarize trace.py's TRB/TRP lines (run 3): per launch of the persistent kernel (one tag), times
in µs after the first block's qkv GEMV ended (`ref`): the blocks' qkv ends and o-input times, and
per attention part its phases (median and max over the parts), then the medians over launches
but the first. Usage: trace_summary.py trace.txt"""
import statistics
import sys
from collections import defaultdict

COLS = ["entry", "rows", "query", "tiles", "barrier", "partials", "merge_in", "merged", "pw_rows", "pw_query", "pw_tiles"]


def main(path):
    blocks, parts = defaultdict(list), defaultdict(list)
    bad = 0
    for line in open(path, errors="replace"):
        f = line.split()
        try:
            if f and f[0] == "TRB" and len(f) in (5, 6):  # 6: with the has-o-rows flag (after call 3)
                blocks[f[1]].append((int(f[2]), int(f[3]), int(f[4]), int(f[5]) if len(f) == 6 else 1))
            elif f and f[0] == "TRP" and len(f) == 16:
                e = [int(x) for x in f[5:]]
                # a column older than the entry is an earlier launch's: not reached in this one
                e = [e[0]] + [v if v >= e[0] else 0 for v in e[1:]]
                parts[f[1]].append((int(f[2]), int(f[4], 16), e))
            elif f:
                bad += 1
        except ValueError:
            bad += 1
    if bad:
        print(f"{bad} lines skipped (not TRB/TRP records)")
    launches = [t for t in blocks if parts.get(t)]
    print(f"{len(launches)} launches with parts (of {len(blocks)} tags)")
    agg = defaultdict(list)
    for n, t in enumerate(launches):
        bl = [b for b in blocks[t] if b[1] > 0]
        if not bl:
            continue
        ref = min(b[1] for b in bl)
        us = lambda v: (v - ref) / 1000.0
        qe = sorted(us(b[1]) for b in bl)
        # the o input's time only where the block has o rows (the others skip that wait)
        oi = sorted(us(b[2]) for b in bl if b[2] > 0 and b[3]) or [float("nan")]
        row = {"qkv_end_med": statistics.median(qe), "qkv_end_max": qe[-1], "o_in_min": oi[0],
               "o_in_med": statistics.median(oi), "o_in_max": oi[-1]}
        for i, c in enumerate(COLS):
            vals = [us(p[2][i]) for p in parts[t] if p[2][i] > 0]
            if vals:
                row[c + "_med"], row[c + "_max"] = statistics.median(vals), max(vals)
        # per-part phase durations (µs): each point after the one before it (the new position's warp
        # only within its own three points)
        for a, b in ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (8, 9), (9, 10)):
            name = f"{COLS[b]}-{COLS[a]}"
            vals = [(p[2][b] - p[2][a]) / 1000.0 for p in parts[t] if p[2][a] > 0 and p[2][b] > 0]
            if vals:
                row["d:" + name + "_med"], row["d:" + name + "_max"] = statistics.median(vals), max(vals)
        if n < 4:
            print(f"launch {n} (tag {t}, {len(parts[t])} parts, {len(bl)} blocks):")
            print("  " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()))
        if n > 0:
            for k, v in row.items():
                agg[k].append(v)
    if agg:
        print(f"median over launches 1-{len(launches) - 1} (µs after the first qkv end; d: = durations within a part):")
        for k, v in agg.items():
            print(f"  {k:28s} {statistics.median(v):7.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
