# Summary of tile-trace.sh's "TT block index code value" lines for the TMA ring
# (tma-tile-trace.patch): per traced block, the stage marks (10 + stage: its wait ended; 20 + stage:
# it signalled; 21: its attention parts were done) and per tile the SM cycles (clock64) from the
# previous mark to the iteration's start "[", thread 0's refill of the ring "p", the wait for the
# tile's full barrier "w", the ldmatrix + MMAs "m]"; "I" marks each tile thread 0 issued.
import sys
names = {10: "QKV", 11: "ATTN", 12: "O", 13: "GU", 14: "DOWN", 20: "qkv-sig", 21: "attn-done", 22: "o-sig",
         23: "gu-sig", 24: "down-sig"}
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("TT ")]
for blk, label in (("0", "block 0"), ("1", "block 100")):
    out, prev = [], None
    for r in (r for r in rows if r[1] == blk):
        code, t = int(r[3]), float(r[4])
        d = t - prev if prev is not None else 0
        if code in names:
            out.append(f"{names[code]}@{t:g}")
        elif code == 2:
            out.append(f"[{d:g}")
        elif code == 4:
            out.append(f"p{d:g}")
        elif code == 3:
            out.append(f"w{d:g}")
        elif code == 5:
            out.append(f"m{d:g}]")
        elif code == 6:
            out.append(f"I{d:g}")
        prev = t
    print(label, " ".join(out))
