#!/usr/bin/env python3
"""Decode-step timeline from an Nsight Systems cuda_gpu_trace CSV (nsys stats --report
cuda_gpu_trace --format csv): the steps are the spans between consecutive launches of
engine_embed (each decode step's first kernel); for the last STEPS of them, prints per kernel in
launch order the median duration and the median gap since the previous kernel ended (µs), then
the per-step totals: kernels, busy time, gap time, span. Usage: decode_timeline.py FILE.csv [STEPS]
"""
import csv
import statistics
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    steps_wanted = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rows = []
    with open(sys.argv[1], newline="") as f:
        for r in csv.DictReader(f):
            name = r.get("Name", "")
            if "[CUDA mem" in name or "[CUDA memset" in name:
                continue
            try:
                rows.append((int(r["Start (ns)"]), int(r["Duration (ns)"]), name))
            except (KeyError, ValueError):
                continue
    rows.sort()
    starts = [i for i, r in enumerate(rows) if r[2].startswith("engine_embed")]
    if len(starts) < 3:
        print(f"only {len(starts)} engine_embed launches in the trace: no decode steps")
        return 1
    # Decode steps: the last engine_embed spans, each up to the next engine_embed (the last step
    # ends at the argmax that closes it).
    spans = []
    for a, b in zip(starts[:-1], starts[1:]):
        spans.append(rows[a:b])
    last = starts[-1]
    end = last
    while end < len(rows) and not rows[end][2].startswith("engine_argmax"):
        end += 1
    spans.append(rows[last:end + 1])
    spans = [s for s in spans if len(s) == len(spans[-1])][-steps_wanted:]
    if not spans:
        print("no complete decode steps")
        return 1
    n = len(spans[0])
    print(f"{len(spans)} decode steps of {n} kernels each (median over steps, µs)")
    print(f"{'#':>4} {'kernel':<48} {'duration':>9} {'gap':>7}")
    busy = gaps = 0.0
    for k in range(n):
        durs = [s[k][1] / 1e3 for s in spans]
        gap = [(s[k][0] - (s[k - 1][0] + s[k - 1][1])) / 1e3 if k else 0.0 for s in spans]
        d, g = statistics.median(durs), statistics.median(gap)
        busy += d
        gaps += g
        if k < 40 or k >= n - 8:
            print(f"{k:>4} {spans[0][k][2][:48]:<48} {d:>9.2f} {g:>7.2f}")
        elif k == 40:
            print("   ... (layers repeat)")
    span = statistics.median([(s[-1][0] + s[-1][1] - s[0][0]) / 1e3 for s in spans])
    print(f"per step: busy {busy:.1f} µs, gaps {gaps:.1f} µs, span {span:.1f} µs")
    # Per kernel name: total duration per step
    by = {}
    for k in range(n):
        name = spans[0][k][2].split("(")[0][:40]
        by.setdefault(name, [0.0, 0.0, 0])
        by[name][0] += statistics.median([s[k][1] / 1e3 for s in spans])
        by[name][1] += statistics.median([(s[k][0] - (s[k - 1][0] + s[k - 1][1])) / 1e3 if k else 0.0 for s in spans])
        by[name][2] += 1
    print(f"{'kernel':<40} {'calls':>5} {'busy µs':>9} {'gaps µs':>8}")
    for name, (d, g, c) in sorted(by.items(), key=lambda x: -x[1][0]):
        print(f"{name:<40} {c:>5} {d:>9.1f} {g:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
