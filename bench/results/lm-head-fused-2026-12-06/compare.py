#!/usr/bin/env python3
"""Every e2e-*.json under DIR: ms/step, the eager final_norm, lm_head and sampling stages, the exact
rows a token; then each run's tokens against the exact lm_head's (batch 1) or the base build's
(batch 4). Usage: compare.py DIR"""
import glob
import json
import os
import sys

d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(d, "e2e-*.json"))):
    name = os.path.basename(f)[4:-5]
    try:
        runs[name] = json.load(open(f))
    except (OSError, ValueError) as e:
        print(name, "no result", e)
for name, r in runs.items():
    st = {s["stage"]: 1000 * s["ms"] / max(s["calls"], 1) for s in r.get("decode_stages", [])}
    print(f"{name}: {r['decode_ms_per_step']:.4f} ms/step, eager {r['decode_eager_ms_per_step']:.4f}; lm_head {r.get('lm_head')}, "
          f"exact rows/token {r.get('lm_head_exact_rows_per_token', 0):.1f}; eager µs a call: final_norm "
          f"{st.get('final_norm', 0):.1f}, lm_head {st.get('lm_head', 0):.1f}, sampling {st.get('sampling', 0):.1f}; "
          f"nonfinite {r.get('nonfinite_logits')}")
for name, r in runs.items():
    ref = "thrive-exact-b1" if "-b1" in name else "thrive-base-b4"
    if name == ref or ref not in runs:
        continue
    a, b = r["tokens"], runs[ref]["tokens"]
    diff = [(i, t) for i, (ra, rb) in enumerate(zip(a, b)) for t, (x, y) in enumerate(zip(ra, rb)) if x != y]
    same = not diff and len(a) == len(b) and all(len(x) == len(y) for x, y in zip(a, b))
    print(f"{name} vs {ref}: {sum(len(x) for x in a)} tokens, " + ("identical" if same else f"first difference (sequence, token) {diff[:1]}"))
