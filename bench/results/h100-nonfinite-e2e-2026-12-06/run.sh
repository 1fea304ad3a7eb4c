#!/usr/bin/env bash
# The e2e harness's skipped-logit count and context rule on both devices (session 28): a tiny
# checkpoint whose tied lm_head rows 3 and 7 hold bf16's largest value (their logits overflow in
# every row), max_position_embeddings 16. For each --gen (and with --dump, which runs one more
# prefill), `thrive e2e` on cuda and on cpu with the same prompts: the JSON's nonfinite_logits
# must be equal (2 rows x 2 logits x gen greedy calls; 0 with --gen 0). Then the context rule:
# --prompt 16 --gen 1 runs, --prompt 16 --gen 2 is a usage error (exit 2).
#   device tool: run command="bash bench/results/h100-nonfinite-e2e-2026-12-06/run.sh" carry=[".sysroot"]
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=/tmp/nf-home
bash scripts/device-build.sh "$OUT" thrive || exit 1
bin=./build-device/thrive
M=/tmp/nf-model
$bin model init --preset tiny --out $M --seed 29 --force > /dev/null || exit 1
python3 - $M <<'PY'
import json, struct, sys
d = sys.argv[1]
with open(d + "/model.safetensors", "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    e = json.loads(f.read(n))["model.embed_tokens.weight"]
    H, begin = e["shape"][1], e["data_offsets"][0]
    for r in (3, 7):
        f.seek(8 + n + begin + r * H * 2)
        f.write(struct.pack("<H", 0x7F7F) * H)
c = json.load(open(d + "/config.json"))
c["max_position_embeddings"] = 16
json.dump(c, open(d + "/config.json", "w"), indent=2)
PY
echo '[[1, 2, 4, 5], [6, 8, 9, 10]]' > /tmp/nf-prompts.json
fail=0
for gen in 6 1 0 "6 --dump /tmp/nf-dump"; do
  for dev in cuda cpu; do
    $bin e2e --device $dev --model $M --batch 2 --prompt 4 --prompts-file /tmp/nf-prompts.json --gen $gen --json \
      > "$OUT/e2e-$dev-gen${gen%% *}$([ "${gen#* }" != "$gen" ] && echo -dump).json" 2> /tmp/nf-err-$dev.txt
    echo "e2e $dev --gen $gen: exit $? $(grep -c warning /tmp/nf-err-$dev.txt) warning line(s)"
  done
  python3 - "$OUT" "${gen%% *}" "$([ "${gen#* }" != "$gen" ] && echo -dump)" <<'PY' || fail=1
import json, sys
out, gen, suffix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
g = json.load(open(f"{out}/e2e-cuda-gen{gen}{suffix}.json"))
c = json.load(open(f"{out}/e2e-cpu-gen{gen}{suffix}.json"))
want = 2 * 2 * gen
print(f"  gen {gen}{suffix}: nonfinite cuda {g['nonfinite_logits']} cpu {c['nonfinite_logits']} (expected {want}); "
      f"tokens cuda {g['tokens']} cpu {c['tokens']}")
bad = [t for row in g["tokens"] for t in row if t in (3, 7)]
sys.exit(0 if g["nonfinite_logits"] == c["nonfinite_logits"] == want and not bad else 1)
PY
done
# the context rule on a clean checkpoint (random prompts may hold the poisoned ids)
C=/tmp/nf-clean
$bin model init --preset tiny --out $C --seed 29 --force > /dev/null || exit 1
python3 -c "import json; c = json.load(open('$C/config.json')); c['max_position_embeddings'] = 16; json.dump(c, open('$C/config.json', 'w'))"
$bin e2e --device cuda --model $C --batch 1 --prompt 16 --gen 1 > /dev/null 2> /tmp/nf-ctx1.txt
rc=$?; echo "e2e cuda --prompt 16 --gen 1: exit $rc (expected 0)"; [ -s /tmp/nf-ctx1.txt ] && head -3 /tmp/nf-ctx1.txt
[ $rc = 0 ] || fail=1
$bin e2e --device cuda --model $C --batch 1 --prompt 16 --gen 2 > /dev/null 2> /tmp/nf-ctx2.txt
rc=$?; echo "e2e cuda --prompt 16 --gen 2: exit $rc (expected 2): $(cat /tmp/nf-ctx2.txt)"
[ $rc = 2 ] || fail=1
echo "check: $([ $fail = 0 ] && echo passed || echo FAILED)"
