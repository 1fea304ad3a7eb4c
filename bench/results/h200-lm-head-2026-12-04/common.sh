# Sourced by this folder's run*.sh (device tool, carry ["build-carry"]): the repository root as the
# working directory, $OUT, the carried libraries, and:
#   prepare BIN...           every binary's libraries resolve, the GPU and the time are printed, and
#                            the random Qwen3-1.7B checkpoint exists (written by the first BIN, seed 0)
#   e2e NAME DEST BIN BATCH [FLAGS...]
#                            (each run at most 180 s)
#                            thrive e2e at BATCH, prompt 512, 64 tokens, --kernels best, CUDA graphs,
#                            JSON to DEST/e2e-NAME.json, stderr appended to $OUT/e2e-stderr.log, and
#                            scripts/e2e_summary.py's two lines printed
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build-carry/lib THRIVE_HOME=/tmp/thrive-home
model=/tmp/qwen3-1.7b-random
prepare() {
  local b
  for b in "$@"; do ldd "build-carry/$b" | grep "not found" && exit 1; done
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  date -u +%Y-%m-%dT%H:%MZ
  [ -f $model/config.json ] || timeout 120 "build-carry/$1" model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null ||
    { echo "init failed"; exit 1; }
}
e2e() {
  local name=$1 dest=$2 bin=$3 batch=$4
  shift 4
  # 180 s: a run whose NVRTC compile of the persistent kernel is not cached yet took 69-77 s to load
  # on an H100, and the first runs of a 90 s limit timed out (2026-12-07, ec12-exact-h100-2026-12-07)
  timeout 180 "build-carry/$bin" e2e --device cuda --model $model --batch "$batch" --prompt 512 --gen 64 --kernels best \
    --graphs on --json "$@" > "$dest/e2e-$name.json" 2>> "$OUT/e2e-stderr.log" || echo "$name: exit $?"
  python3 scripts/e2e_summary.py "$dest/e2e-$name.json" "  $name" --layer
}
