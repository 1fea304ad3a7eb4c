#!/usr/bin/env bash
# Run the `thrive tune` grids listed in a file (default bench/tune/grids.txt) on the GPU
# machine, after building like scripts/device-check.sh. Logs and raw JSON land in $OUT.
#   device tool: run command="bash scripts/device-tune.sh [grids-file]" carry=[".sysroot"]
# Environment: TUNE_TIMEOUT_S (per grid, default 240), BUILD_ONLY=1, FIRST=N (only the first N
# grids), SKIP=N (skip the first N), SEED_HOME=FILE.tgz (start from a THRIVE_HOME brought back
# from an earlier call, e.g. carried as .device-home/home.tgz). The device tool returns at most 8
# files, so the per-grid logs and JSON land in $OUT/tune-logs.tgz and the memory (memory.db and the
# kernel archive) in $OUT/home.tgz, which a later call can seed from.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/thrive-out}
grids=${1:-bench/tune/grids.txt}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
if [ -n "${SEED_HOME:-}" ] && [ -f "$SEED_HOME" ]; then
  mkdir -p "$THRIVE_HOME" && tar -xzf "$SEED_HOME" -C "$THRIVE_HOME" && echo "memory seeded from $SEED_HOME"
fi
logs=$(mktemp -d)
bash scripts/device-build.sh "$OUT" || exit 1
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
n=${SKIP:-0}
grep -v '^\s*#' "$grids" | grep -v '^\s*$' | tail -n +$((${SKIP:-0} + 1)) | head -n "${FIRST:-1000}" | while IFS='|' read -r op shape grid; do
  op=$(echo $op); shape=$(echo $shape); grid=$(echo $grid)
  n=$((n + 1))
  log="$logs/tune-$n-$op-${shape//[^A-Za-z0-9]/_}.log"
  timeout "${TUNE_TIMEOUT_S:-240}" ./build-device/thrive tune --device cuda --op "$op" --shape "$shape" \
    --grid "$grid" --base defaults --top 8 --json-out "${log%.log}.json" > "$log" 2>&1
  echo "== $op $shape ($grid): exit $?"
  sed -n '/^Top/,$p' "$log" | head -11
done
tar -czf "$OUT/tune-logs.tgz" -C "$logs" .
tar -czf "$OUT/home.tgz" -C "$THRIVE_HOME" .
exit 0
