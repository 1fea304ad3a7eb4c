#!/usr/bin/env bash
# The cold-versus-warm demo (issue 5) on the GPU machine: build, then `thrive demo --device cuda`
# for each op:shape:target triple of DEMOS, each on a fresh demo home, bounded in time.
#   device tool: run command="bash scripts/device-demo.sh" carry=[".sysroot"]
# Environment: DEMOS (default "rmsnorm_residual:T=4096:4.93 gqa_decode_attention:B=256,L=1024:16";
# 4.93x is the seed's target), START (default simplest: the CUDA templates' defaults are earlier
# H200 winners, so a cold run started there has nothing left to find), PHASES (default 3),
# ROUNDS (default 6), DEMO_TIMEOUT_S (per demo, default 200).
# Out ($OUT): build.log, demo-<op>.log and demo-<op>.json per demo.
set -uo pipefail
source "$(dirname "$0")/device-prologue.sh"
for d in ${DEMOS:-rmsnorm_residual:T=4096:4.93 gqa_decode_attention:B=256,L=1024:16}; do
  IFS=: read -r op shape target <<< "$d"
  home=$(mktemp -d)
  timeout "${DEMO_TIMEOUT_S:-200}" ./build-device/thrive demo --device cuda --op "$op" --shape "$shape" \
    --target-speedup "$target" --phases "${PHASES:-3}" --rounds "${ROUNDS:-6}" --start "${START:-simplest}" --demo-home "$home" \
    --json-out "$OUT/demo-$op.json" > "$OUT/demo-$op.log" 2>&1
  echo "demo $op $shape target $target: exit $? (124: stopped by DEMO_TIMEOUT_S)"
  cut -c1-200 "$OUT/demo-$op.log" | tail -40
done
