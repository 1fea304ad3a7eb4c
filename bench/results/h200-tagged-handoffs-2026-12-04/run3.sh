#!/usr/bin/env bash
# Twentieth pass, call 3 (H200, 2026-12-04): the committed kernel at the session's end (batch 1
# twice, batch 4 once) and a tiny checkpoint's `e2e --kernels best` call-site origins with an
# empty memory (Toolbox::engine_best's reasons).
#   device tool: run command="bash bench/results/h200-tagged-handoffs-2026-12-04/run3.sh" carry=["build-carry"]
#   build-carry/: thrive = `cmake --build build --target thrive` at the commit named in the README;
#   lib/ as run1.sh.
# Out ($OUT): e2e-head{1,2}.json, e2e-head-b4.json, e2e-tiny.json.
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive
e2e head1 "$OUT" thrive 1
e2e head2 "$OUT" thrive 1
e2e head-b4 "$OUT" thrive 4
build-carry/thrive model init --preset tiny --out /tmp/tiny --seed 0 > /dev/null
timeout 120 build-carry/thrive e2e --device cuda --model /tmp/tiny --batch 2 --prompt 8 --gen 4 --kernels best --json \
  > "$OUT/e2e-tiny.json" 2>> "$OUT/e2e-stderr.log"; echo "tiny: exit $?"
python3 -c "import json,sys; [print(' ', s['call_site'], '|', s['origin']) for s in json.load(open(sys.argv[1]))['registry']]" "$OUT/e2e-tiny.json" 2>&1 | head -12
