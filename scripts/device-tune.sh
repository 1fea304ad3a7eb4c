#!/usr/bin/env bash
# Run the `thrive tune` grids listed in a file (default bench/tune/grids.txt) on the GPU
# machine, after building like scripts/device-check.sh. Logs and raw JSON land in $OUT.
#   device tool: run command="bash scripts/device-tune.sh [grids-file]" carry=[".sysroot"]
# Environment: TUNE_TIMEOUT_S (per grid, default 240), BUILD_ONLY=1.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/thrive-out}
grids=${1:-bench/tune/grids.txt}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
bash scripts/device-build.sh "$OUT" || exit 1
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
n=0
grep -v '^\s*#' "$grids" | grep -v '^\s*$' | while IFS='|' read -r op shape grid; do
  op=$(echo $op); shape=$(echo $shape); grid=$(echo $grid)
  n=$((n + 1))
  log="$OUT/tune-$n-$op-${shape//[^A-Za-z0-9]/_}.log"
  timeout "${TUNE_TIMEOUT_S:-240}" ./build-device/thrive tune --device cuda --op "$op" --shape "$shape" \
    --grid "$grid" --base defaults --top 8 --json-out "${log%.log}.json" > "$log" 2>&1
  echo "== $op $shape ($grid): exit $?"
  sed -n '/^Top/,$p' "$log" | head -11
done
