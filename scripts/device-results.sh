#!/usr/bin/env bash
# The README's H200 table in one call on the GPU machine: build, (optionally) seed the memory from
# an earlier call, run the tune grids of a file, let the search agent fill every remaining shape
# (`thrive optimize`, bounded in time), then `thrive bench --device cuda --op all` re-measures the
# best kernel in memory for every shape next to the eager baseline and the copy ceiling.
#   device tool: run command="bash scripts/device-results.sh" carry=[".sysroot", ".device-home"]
# Environment: GRIDS (tune grids file; default bench/tune/grids-results.txt), ROUNDS (default 1),
# OPTIMIZE_TIMEOUT_S (default 200), TUNE_TIMEOUT_S (per grid, default 60), SEED_HOME=FILE.tgz.
# Out ($OUT, at most 8 files): build.log, tune-logs.tgz, optimize-cuda.log, bench-cuda.txt,
# bench-cuda.json, home.tgz (the memory afterwards).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
OUT="$OUT" TUNE_TIMEOUT_S=${TUNE_TIMEOUT_S:-60} bash scripts/device-tune.sh "${GRIDS:-bench/tune/grids-results.txt}" || exit 1
timeout "${OPTIMIZE_TIMEOUT_S:-200}" ./build-device/thrive optimize --device cuda --op all --rounds "${ROUNDS:-1}" \
  > "$OUT/optimize-cuda.log" 2>&1
echo "optimize exit $? (124: stopped by OPTIMIZE_TIMEOUT_S; what it recorded so far stays in memory)"
./build-device/thrive bench --device cuda --op all --json-out "$OUT/bench-cuda.json" > "$OUT/bench-cuda.txt" 2>&1
echo "bench exit $?"; cat "$OUT/bench-cuda.txt"
tar -czf "$OUT/home.tgz" -C "$THRIVE_HOME" .
