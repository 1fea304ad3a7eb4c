#!/usr/bin/env bash
# Run HERE (not on the GPU machine) before scripts/device-check.sh: the device has no
# SQLite headers or library and cannot install anything, so Debian's libsqlite3-dev is
# unpacked into .sysroot/ (git-ignored), which the device tool carries.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f .sysroot/usr/lib/x86_64-linux-gnu/libsqlite3.a ]; then
  mkdir -p .sysroot
  (cd .sysroot && apt-get download libsqlite3-dev && for f in *.deb; do dpkg -x "$f" .; done)
fi
echo "ready: carry .sysroot when calling scripts/device-check.sh on the device"
