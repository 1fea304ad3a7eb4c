#!/usr/bin/env bash
# L2 agents (2026-12-06, session 32): agent.patch runs the persistent kernel on its 128 worker
# blocks plus 4 agent blocks (kDlAgents, 132 in all: every SM of an H100 or H200) that prefetch,
# for each layer, THRIVE_DL_PF gate/up row groups a worker into L2 (cp.async.bulk.prefetch.L2),
# past the first group (the ring's lead), at attention's start (THRIVE_DL_PFMODE 0: block 0's last
# qkv rows carry the layer's tag) or at the qkv stage's start (1). PF 0: the agents only poll.
#   Build here: the committed tree -> build-carry/thrive-base; with agent.patch applied ->
#   build-carry/thrive-agent. device tool: run command="bash bench/results/l2-agents-2026-12-06/run1.sh"
#   carry=["build-carry"]
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive-agent thrive-base
tok() { python3 -c "import json,sys,hashlib; print(hashlib.md5(str(json.load(open(sys.argv[1]))['tokens']).encode()).hexdigest()[:12])" "$1" 2>/dev/null; }
for r in 1 2; do
  e2e "base-$r" "$OUT" thrive-base 1
  for v in 0 2 4 5; do THRIVE_DL_PF=$v e2e "pf$v-$r" "$OUT" thrive-agent 1; done
  THRIVE_DL_PF=4 THRIVE_DL_PFMODE=1 e2e "pf4m1-$r" "$OUT" thrive-agent 1
done
echo "tokens (md5 of the JSON tokens):"; for f in "$OUT"/e2e-*.json; do echo "$(basename $f): $(tok $f)"; done
