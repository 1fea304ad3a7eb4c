# Summary of producer-trace.sh's "TT slot index code cycles" lines (producer-tile-trace.patch):
# slots 0/1 are thread 0 (a consumer) of blocks 0/100, slots 2/3 their producer thread; cycles
# (clock64, about 1.98 GHz) since the block's first consumer record. Prints, per block, one
# time-ordered line per event in µs: consumer stage marks (100 + stage: wait ended, 200 + stage:
# signalled, 201: attention parts done), consumer tiles "t<i> wait w m" (µs waiting for the full
# barrier, µs of ldmatrix + MMA) and producer events "P<gemv>: empty-wait done" / "I<gemv>: issued".
import sys
names = {100: "QKV", 101: "ATTN", 102: "O", 103: "GU", 104: "DOWN", 200: "qkv-sig", 201: "attn-done", 202: "o-sig",
         203: "gu-sig", 204: "down-sig"}
ghz = 1.98e3
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("TT ")]
for blk, label in ((0, "block 0"), (1, "block 100")):
    ev = []
    cons = [(int(r[3]), int(r[4])) for r in rows if int(r[1]) == blk]
    tile, start, landed = 0, None, None
    for code, t in cons:
        if code in names:
            ev.append((t, names[code]))
        elif code == 2:
            start = t
        elif code == 3:
            landed = t
        elif code == 5 and start is not None:
            ev.append((start, f"t{tile} w{(landed - start) / ghz:.2f} m{(t - landed) / ghz:.2f}"))
            tile += 1
    for r in rows:
        if int(r[1]) == blk + 2:
            code, t = int(r[3]), int(r[4])
            ev.append((t, f"{'I' if code % 10 == 6 else 'P'}{code // 10}"))
    ev.sort()
    print(label)
    print("  " + "  ".join(f"{t / ghz:.2f}:{e}" for t, e in ev))
