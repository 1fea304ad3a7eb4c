# Sourced by the scripts/device-*.sh entry points on the GPU machine: $OUT exists, THRIVE_HOME is
# set (and seeded from SEED_HOME=FILE.tgz when given), the GPU is named, the Release build is in
# build-device/ (scripts/device-build.sh; only the targets in BUILD_TARGETS when set, e.g.
# BUILD_TARGETS=thrive); exits on a failed build.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
if [ -n "${SEED_HOME:-}" ] && [ -f "$SEED_HOME" ]; then
  mkdir -p "$THRIVE_HOME" && tar -xzf "$SEED_HOME" -C "$THRIVE_HOME" && echo "memory seeded from $SEED_HOME"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
# shellcheck disable=SC2086
bash scripts/device-build.sh "$OUT" ${BUILD_TARGETS:-} || exit 1
