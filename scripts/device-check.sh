#!/usr/bin/env bash
# One call on the GPU machine: build (Release, SQLite linked statically from .sysroot),
# run the whole test suite (GPU tests included), optimize every op on the GPU, benchmark
# the winners next to the eager baselines, and run compute-sanitizer on the best kernel
# of each op. Results land in $OUT (bench/results/ after copying back).
#   device tool: run command="bash scripts/device-check.sh" carry=[".sysroot"]
# Environment: ROUNDS (default 8), SKIP_TESTS=1, SKIP_OPTIMIZE=1, SKIP_SANITIZER=1, PROFILE=1
# (scripts/device-profile.sh after the benchmark), OPS (default
# all), SEED_HOME=FILE.tgz (start from the memory an earlier call brought back, e.g.
# scripts/device-tune.sh's home.tgz carried as .device-home/home.tgz). The device tool returns at
# most 8 files: the sanitizer logs come back as $OUT/sanitize.tgz, the memory as $OUT/home.tgz.
set -uo pipefail
stamp=$(date -u +%Y-%m-%d)
runs_suite=1  # device-prologue.sh: BUILD_TARGETS only with SKIP_TESTS=1
source "$(dirname "$0")/device-prologue.sh"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  # McpSdk needs the MCP SDK from PyPI, which the device (no network) cannot install; CI runs it.
  (cd build-device && ctest --output-on-failure -j 8 --timeout 900 -E McpSdk) > "$OUT/ctest.log" 2>&1
  echo "ctest exit $?"; tail -15 "$OUT/ctest.log"
fi

if [ "${SKIP_OPTIMIZE:-0}" != 1 ]; then
  ./build-device/thrive optimize --device cuda --op "${OPS:-all}" --rounds "${ROUNDS:-8}" --json \
    > "$OUT/optimize-cuda-$stamp.log" 2>&1
  echo "optimize exit $?"; grep -A40 "^Pass 1 results" "$OUT/optimize-cuda-$stamp.log" | head -45
fi
./build-device/thrive bench --device cuda --op "${OPS:-all}" --json-out "$OUT/bench-cuda-$stamp.json" \
  > "$OUT/bench-cuda-$stamp.txt" 2>&1
echo "bench exit $?"; cat "$OUT/bench-cuda-$stamp.txt"

if [ "${PROFILE:-0}" = 1 ]; then OUT="$OUT" bash scripts/device-profile.sh; fi

if [ "${SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer > /dev/null; then
  san=$(mktemp -d)
  ./build-device/thrive leaderboard --json > "$san/leaderboard.json"
  python3 - "$san/leaderboard.json" > "$san/sanitize.list" <<'PY'
import json, sys
seen = set()
for k in json.load(open(sys.argv[1])):
    if k["backend"] == "cuda" and k["op"] not in seen:
        seen.add(k["op"]); print(k["op"], k["kernel_id"], k["shape"])
PY
  while read -r op id shape; do
    f="$THRIVE_HOME/kernels/$op/$id.cu"
    for tool in memcheck racecheck; do
      THRIVE_CANDIDATE_TIMEOUT_S=600 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 \
        ./build-device/thrive verify --device cuda --op "$op" --kernel "$f" > "$san/sanitize-$op-$tool.log" 2>&1
      echo "compute-sanitizer $tool $op: exit $?"
    done
  done < "$san/sanitize.list"
  tar -czf "$OUT/sanitize.tgz" -C "$san" .
fi
tar -czf "$OUT/home.tgz" -C "$THRIVE_HOME" .
