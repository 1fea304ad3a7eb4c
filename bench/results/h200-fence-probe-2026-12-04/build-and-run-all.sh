#!/usr/bin/env bash
# Builds build-carry/ on the GPU machine itself, then runs run-all.sh (use this when no
# build-carry/ from the CPU machine is at hand; run scripts/device-prepare.sh here first).
#   device tool: run command="bash bench/results/h200-fence-probe-2026-12-04/build-and-run-all.sh"
#                carry=[".sysroot"]
# thrive, model_test_cuda_engine: the working tree; the -hw1 pair: a copy of it with
# handoff-warp-step1.patch applied, built in parallel (skipped when a warm machine already has them). Build logs:
# $OUT/build-{main,hw1}/build.log (scripts/device-build.sh prints a failed build's tail).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT" "$root/build-carry/lib"
if [ -x "$root/build-carry/model_test_cuda_engine-hw1" ]; then  # a warm machine's earlier call built them
  echo "build-carry/ already built"; OUT=$OUT exec bash "$here/run-all.sh"
fi
rm -rf /tmp/hw1 && mkdir /tmp/hw1 && (cd "$root" && tar --exclude=./build-device --exclude=./build-carry -cf - .) | (cd /tmp/hw1 && tar xf -)
(cd /tmp/hw1 && git apply "$here/handoff-warp-step1.patch") || { echo "patch does not apply"; exit 1; }
# scripts/device-build.sh of each tree (the copy carries .sysroot too), in parallel
start=$(date +%s)
bash "$root/scripts/device-build.sh" "$OUT/build-main" thrive model_test_cuda_engine & p1=$!
bash /tmp/hw1/scripts/device-build.sh "$OUT/build-hw1" thrive model_test_cuda_engine & p2=$!
wait $p1 || exit 1
wait $p2 || exit 1
echo "built both in $(( $(date +%s) - start )) s"
find_bin() { find "$1/build-device" -type f -name "$2" -perm -u+x | head -1; }
cp "$(find_bin "$root" thrive)" "$root/build-carry/thrive"
cp "$(find_bin "$root" model_test_cuda_engine)" "$root/build-carry/model_test_cuda_engine"
cp "$(find_bin /tmp/hw1 thrive)" "$root/build-carry/thrive-hw1"
cp "$(find_bin /tmp/hw1 model_test_cuda_engine)" "$root/build-carry/model_test_cuda_engine-hw1"
OUT=$OUT bash "$here/run-all.sh"
