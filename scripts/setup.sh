#!/usr/bin/env bash
# Installs THRIVE's Debian 12 build dependencies (as root) and builds it (Release)
# into ./build. Safe to run again: apt skips what is installed, cmake rebuilds
# only what changed.
case "${1:-}" in -h | --help) sed -n '2,4p' "$0" | cut -c3-; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake g++ libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
          libsqlite3-dev libgtest-dev libgmock-dev libcurl4-openssl-dev python3 python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages ${missing[*]}; run as root (or install them) first" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Warnings are errors in every build the scripts make, so that run.sh and test.sh share one build
# configuration (test.sh used to add the flag alone, and its build started again from scratch);
# THRIVE_CMAKE_ARGS="-DTHRIVE_ENABLE_WERROR=OFF" turns it off (a later -D wins).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTHRIVE_ENABLE_WERROR=ON ${THRIVE_CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"
