#!/usr/bin/env bash
# Quick start, command 1: install, build, and run the main job
# (`thrive optimize --op all`). Extra arguments go to `thrive optimize`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./build/thrive optimize --op all "$@"
