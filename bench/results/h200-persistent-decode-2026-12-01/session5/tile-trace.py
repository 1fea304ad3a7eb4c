# Summary of tile-trace.sh's "TT block index code value" lines: per traced block, the stage marks
# (10 + stage: its wait ended; 20 + stage: it signalled; 21: its attention parts were done) and
# each tile's interval since the previous mark. Values are µs (tile-trace.patch, %globaltimer) or
# SM cycles (tile-clock-trace.patch, clock64: codes 2 iteration start, 3 landed, 4 next issued,
# 5 multiplied; printed as cycles between the phases).
import sys
names = {10: "QKV", 11: "ATTN", 12: "O", 13: "GU", 14: "DOWN", 20: "qkv-sig", 21: "attn-done", 22: "o-sig",
         23: "gu-sig", 24: "down-sig"}
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("TT ")]
for blk, label in (("0", "block 0"), ("1", "block 100")):
    out, prev = [], None
    for r in (r for r in rows if r[1] == blk):
        code, t = int(r[3]), float(r[4])
        if code in names:
            out.append(f"{names[code]}@{t:g}")
        elif code == 2 and prev is not None:
            out.append(f"[{t - prev:g}")
        elif code in (3, 4, 5):
            out.append(f"{'w' if code == 3 else 'i' if code == 4 else 'm'}{t - prev:g}" + ("]" if code == 5 else ""))
        else:
            out.append(f"+{t - prev:g}" if prev is not None else "")
        prev = t
    print(label, " ".join(out))
