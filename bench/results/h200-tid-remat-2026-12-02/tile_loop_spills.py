#!/usr/bin/env python3
"""Counts the instructions, spill loads (LDL) and stores (STL) of the persistent kernel's GEMV
tile loops in a `cuobjdump -sass -fun ENTRY` listing. A tile loop is found from each group of
LDGSTS (the ring's cp.async tile issue: the prologue's, then qkv, o, gate/up, down) as the
first backward branch after it whose target lies before the group.
Usage: tile_loop_spills.py LISTING.sass [LABEL]"""
import re
import sys

ADDR = re.compile(r'/\*([0-9a-f]{4,})\*/\s+\S')
lines = [l for l in open(sys.argv[1]) if ADDR.search(l)]
addr = lambda l: int(ADDR.search(l).group(1), 16)
at = {addr(l): i for i, l in enumerate(lines)}
groups = []
for k, l in enumerate(lines):
    if 'LDGSTS' in l:
        if groups and k - groups[-1][-1] <= 40:
            groups[-1].append(k)
        else:
            groups.append([k])
names = ['prologue', 'qkv', 'o', 'gate/up', 'down']
label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
print(f'{label}: {len(lines)} instructions')
for n, g in enumerate(groups):
    for k in range(g[-1], min(len(lines), g[-1] + 600)):
        m = re.search(r'BRA\s+0x([0-9a-f]+)', lines[k])
        if m and int(m.group(1), 16) < addr(lines[g[0]]):
            body = lines[at[int(m.group(1), 16)]:k + 1]
            count = lambda op: sum(1 for x in body if re.search(r'\s' + op + r'(\.|\s)', x))
            name = names[n] if n < len(names) else f'group {n}'
            print(f'  {name:9} loop: {len(body):4} instructions, LDL {count("LDL")}, STL {count("STL")}')
            break
