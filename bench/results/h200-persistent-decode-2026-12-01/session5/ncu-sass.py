# Session 5: the persistent kernel's SASS with Nsight Compute's stall samples per instruction
# (from run 2's ncu-persistent.ncu-rep): column list, then every line with samples in [lo, hi) and
# every LDL/STL/LDGSTS/DEPBAR/BAR/HMMA/LDSM line's samples with its two largest stall reasons.
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next(i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r))
cols = rows[head]
src = next(i for i, c in enumerate(cols) if c.strip() == "Source")
allc = next(i for i, c in enumerate(cols) if "Warp Stall Sampling (All" in c)
reasons = [i for i, c in enumerate(cols) if c.startswith("stall_") or "Stall" in c and i != allc]
print("columns:", [cols[i] for i in reasons][:60])
def num(v):
    try: return float(v.replace(",", ""))
    except ValueError: return 0.0
body = rows[head + 1:]
total = sum(num(r[allc]) for r in body if len(r) > allc) or 1
lo, hi = int(sys.argv[2]), int(sys.argv[3])
for i, r in enumerate(body):
    if len(r) <= allc: continue
    s = num(r[allc]); text = r[src]
    key = any(k in text for k in ("LDL", "STL", "LDGSTS", "DEPBAR", "BAR.", "HMMA", "LDSM", "WARPSYNC", "LDG", "CCTL"))
    if (lo <= i < hi) or (key and s > 0):
        top = sorted(((num(r[j]), cols[j]) for j in reasons if j < len(r)), reverse=True)[:2]
        print(f"{i:5d} {100*s/total:5.2f}% {text[:70]:70s} " + " ".join(f"{n}={v:.0f}" for v, n in top if v > 0))
