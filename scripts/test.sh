#!/usr/bin/env bash
# Quick start, command 2: install, build, and run the whole test suite (CTest).
# GPU tests skip, visibly, where no GPU is present.
case "${1:-}" in -h | --help) sed -n '2,3p' "$0" | cut -c3-; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh  # (warnings are errors there, as in run.sh's build)
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 900
# ctest prints a skip's reason only with -V: list the reasons here, each with how many tests gave it.
if grep -q "Skipped" Testing/Temporary/LastTest.log; then
  echo "Skipped tests, by reason:"
  # GoogleTest writes "FILE:LINE: Skipped", then the reason on the next line
  awk '/: Skipped$/ { if ((getline reason) > 0) print reason }' Testing/Temporary/LastTest.log | sort | uniq -c || true
fi
