# Sourced by the scripts/device-*.sh entry points on the GPU machine: $OUT exists, THRIVE_HOME is
# set (and seeded from SEED_HOME=FILE.tgz when given), the GPU is named, the Release build is in
# build-device/ (scripts/device-build.sh; only the targets in BUILD_TARGETS when set, e.g.
# BUILD_TARGETS=thrive; a script that runs the whole test suite sets runs_suite=1 before sourcing
# this, and BUILD_TARGETS is then refused unless SKIP_TESTS=1, since ctest would find test
# executables missing or stale); exits on a failed build.
if [ "${runs_suite:-0}" = 1 ] && [ -n "${BUILD_TARGETS:-}" ] && [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "BUILD_TARGETS=$BUILD_TARGETS builds only those targets, and this script runs the whole test suite: unset it or set SKIP_TESTS=1" >&2
  exit 2
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
if [ -n "${SEED_HOME:-}" ] && [ -f "$SEED_HOME" ]; then
  mkdir -p "$THRIVE_HOME" && tar -xzf "$SEED_HOME" -C "$THRIVE_HOME" && echo "memory seeded from $SEED_HOME"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
# the targets split at spaces, never glob-expanded
read -ra build_targets <<< "${BUILD_TARGETS:-}"
bash scripts/device-build.sh "$OUT" "${build_targets[@]}" || exit 1
