#!/usr/bin/env python3
"""Spill loads (LDL) and stores (STL) of one kernel entry by source line: reads `nvdisasm -g -c
-fun ENTRY` output (cubin built with -lineinfo) and prints, per line of FILE, the count of each and
the line's text, most first. Usage: spill_lines.py LISTING.sass FILE.cu [TOP]"""
import collections
import re
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
src = open(sys.argv[2]).read().splitlines()
top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
name = sys.argv[2].rsplit("/", 1)[-1]
where, counts = None, collections.Counter()
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r'//## File "([^"]+)", line (\d+)', line)
    if m:
        where = (m.group(1).rsplit("/", 1)[-1], int(m.group(2)))
        continue
    for op in ("LDL", "STL"):
        if re.search(r"\s" + op + r"(\.|\s)", line):
            counts[(where, op)] += 1
lines = collections.defaultdict(lambda: [0, 0])
for (w, op), n in counts.items():
    lines[w][op == "STL"] += n
print(f"LDL {sum(v[0] for v in lines.values())}, STL {sum(v[1] for v in lines.values())} instructions")
for w, (ld, st) in sorted(lines.items(), key=lambda kv: -sum(kv[1]))[:top]:
    text = src[w[1] - 1].strip()[:90] if w and w[0] == name and 0 < w[1] <= len(src) else ""
    print(f"  {str(w):40} LDL {ld:3} STL {st:3}  {text}")
