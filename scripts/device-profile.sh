#!/usr/bin/env bash
# Nsight Compute profile of each op's CUDA template (kernels/cuda/<op>/template.cu at its
# defaults) at the shapes whose targets are hardest: speed of light, memory workload, occupancy,
# launch statistics and warp stall reasons. The template runs through `thrive tune` at its
# defaults (a one-point grid, VEC=8 being every template's default); one launch inside the timing
# loop is profiled (--launch-skip passes the verification launches; THRIVE_BENCH_MIN_REPS keeps the
# loop long enough). Builds build-device/ first when it is missing (scripts/device-build.sh).
#   device tool: run command="bash scripts/device-profile.sh" carry=[".sysroot"]
# Environment: PROFILE_SPECS (lines "op shape kernel-regex"), OUT. Writes $OUT/profile.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/thrive-out}
mkdir -p "$OUT"
export THRIVE_HOME=${THRIVE_HOME:-/tmp/thrive-home}
[ -x build-device/thrive ] || bash scripts/device-build.sh "$OUT" || exit 1
command -v ncu > /dev/null || { echo "ncu not found: no profile"; exit 0; }
specs=${PROFILE_SPECS:-"gqa_decode_attention B=256,L=1024 ^thrive_gqa_decode_attention$
gqa_decode_attention B=1,L=4096 ^thrive_gqa_decode_attention$
softmax T=256 ^thrive_softmax$
rmsnorm_residual T=4096 ^thrive_rmsnorm_residual$
rope T=4096 ^thrive_rope$"}
dir=$(mktemp -d)
while read -r op shape regex; do
  [ -n "$op" ] || continue
  log="$dir/ncu-$op-${shape//[,=]/_}.txt"
  THRIVE_CANDIDATE_TIMEOUT_S=600 THRIVE_BENCH_MAX_S=0.05 THRIVE_BENCH_MIN_REPS=400 timeout 240 \
    ncu --target-processes all --kernel-name "regex:$regex" --launch-skip 200 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    ./build-device/thrive tune --device cuda --op "$op" --shape "$shape" --grid VEC=8 --base defaults \
    > "$log" 2>&1
  echo "ncu $op $shape: exit $?"
  grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Registers Per|Theoretical Occupancy|Stall|Block Limit|Waves Per SM" "$log" | head -24
done <<< "$specs"
tar -czf "$OUT/profile.tgz" -C "$dir" .
