#!/usr/bin/env bash
# Release build on the GPU machine (no SQLite there: headers and the static library come
# from .sysroot/, filled by scripts/device-prepare.sh). Usage: device-build.sh OUT_DIR [TARGET...]
# (no target: everything; e.g. `thrive` alone for timing runs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/thrive-out}
shift || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
mkdir -p "$out"
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=OFF \
  -DSQLite3_INCLUDE_DIR="$PWD/.sysroot/usr/include" \
  -DSQLite3_LIBRARY="$PWD/.sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a" > "$out/build.log" 2>&1 &&
  cmake --build build-device -j "$(nproc)" "${targets[@]}" >> "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
