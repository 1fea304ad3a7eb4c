#!/usr/bin/env bash
# The Qwen3 engine on the GPU machine (issue 6): build, write a random Qwen3-1.7B checkpoint,
# run `thrive e2e` at the issue's targets (batch 256 and batch 1, prompt 512) with baseline
# kernels and no graphs, and with the best kernels and graphs, compare with Hugging Face
# transformers (scripts/hf_compare.py), after the whole test suite.
#   device tool: run command="bash scripts/device-e2e.sh" carry=[".sysroot", ".device-home"]
# Environment: SEED_HOME=FILE.tgz (a memory with tuned kernels, e.g. .device-home/home.tgz),
# GEN (decode tokens per sequence, default 32), RUNS (default "b256-best b256-baseline b1-best";
# also b256-plain, b1-plain: best kernels and graphs without flash attention, fusions and GEMV;
# b1-layered (all on but the persistent decode kernel, which --persistent auto uses at batch 1-4),
# b1-bf16 (the persistent kernel streaming bf16 weights, not the batch-1 default's EC12 coding),
# b1-stages6 (a weight ring of up to 6 stages, not 5), b1-nopdl (all on but programmatic dependent launch), b1-nonorm (all on but the norm/residual
# fusion into the GEMVs), b4-best (the persistent kernel on), b4-layered, b1-baseline; "baseline"
# = simplest kernels, no graphs, no flash attention, fusions or GEMV),
# TESTS (a ctest -R regex; default: the whole suite), SKIP_TESTS=1, SKIP_HF=1.
# Out ($OUT): build.log, ctest.log, e2e-*.json, e2e-stderr.log, hf-compare.json.
set -uo pipefail
runs_suite=1  # device-prologue.sh: BUILD_TARGETS only with SKIP_TESTS=1
source "$(dirname "$0")/device-prologue.sh"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  (cd build-device && timeout 330 ctest --output-on-failure -j 8 --timeout 900 -E McpSdk ${TESTS:+-R "$TESTS"}) > "$OUT/ctest.log" 2>&1
  echo "ctest exit $?"; tail -8 "$OUT/ctest.log"; grep -E "CudaEngine.*(Passed|Failed)" "$OUT/ctest.log" | cut -c1-120
fi
bin=./build-device/thrive
model=/tmp/qwen3-1.7b-random
t0=$(date +%s)
timeout 300 $bin model init --preset qwen3-1.7b --out $model --seed 0 --force || exit 1
echo "checkpoint written in $(( $(date +%s) - t0 )) s"
gen=${GEN:-32}
plain="--attention gemm --fusions off --gemv off"  # the engine without its own fast paths
run() {  # name, then e2e flags
  local name=$1; shift
  timeout 150 $bin e2e --device cuda --model $model --json "$@" > "$OUT/e2e-$name.json" 2>> "$OUT/e2e-stderr.log"
  echo "e2e $name: exit $?"
  python3 - "$OUT/e2e-$name.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"  no result: {e}")
print(f"  prefill {d['prefill_tokens_per_s']:.0f} tok/s ({d['prefill_ms']:.1f} ms); decode {d['decode_tokens_per_s']:.0f} tok/s,"
      f" {d['decode_ms_per_step']:.3f} ms/step (eager profiled {d['decode_eager_ms_per_step']:.3f}); GPU mem"
      f" {d['gpu_memory_used_bytes']/2**30:.1f} GiB")
for phase in ("prefill_stages", "decode_stages"):
    print("  " + phase + ": " + ", ".join(f"{r['stage']} {100*r['share']:.1f}%" for r in sorted(d[phase], key=lambda r: -r['ms'])[:8]))
PY
  tail -3 "$OUT/e2e-stderr.log"
}
for r in ${RUNS:-b256-best b256-baseline b1-best}; do
  case $r in
    b256-best) run b256-best --batch 256 --prompt 512 --gen "$gen" --kernels best --graphs on ;;
    b256-baseline) run b256-baseline --batch 256 --prompt 512 --gen "$gen" --kernels baseline --graphs off $plain ;;
    b256-plain) run b256-plain --batch 256 --prompt 512 --gen "$gen" --kernels best --graphs on $plain ;;
    b1-best) run b1-best --batch 1 --prompt 512 --gen 64 --kernels best --graphs on ;;
    b1-plain) run b1-plain --batch 1 --prompt 512 --gen 64 --kernels best --graphs on $plain ;;
    b1-layered) run b1-layered --batch 1 --prompt 512 --gen 64 --kernels best --graphs on --persistent off ;;
    b1-bf16) run b1-bf16 --batch 1 --prompt 512 --gen 64 --kernels best --graphs on --persistent-weights bf16 ;;
    b1-stages6) run b1-stages6 --batch 1 --prompt 512 --gen 64 --kernels best --graphs on --persistent-stages 6 ;;
    b4-best) run b4-best --batch 4 --prompt 512 --gen 64 --kernels best --graphs on ;;
    b4-layered) run b4-layered --batch 4 --prompt 512 --gen 64 --kernels best --graphs on --persistent off ;;
    b1-nopdl) run b1-nopdl --batch 1 --prompt 512 --gen 64 --kernels best --graphs on --pdl off ;;
    b1-nonorm) run b1-nonorm --batch 1 --prompt 512 --gen 64 --kernels best --graphs on --fusions qk_rope_kv,swiglu_down ;;
    b1-baseline) run b1-baseline --batch 1 --prompt 512 --gen 64 --kernels baseline --graphs off $plain ;;
    *) echo "unknown run $r" ;;
  esac
done
if [ "${SKIP_HF:-0}" != 1 ]; then
  timeout 200 python3 scripts/hf_compare.py --model $model --thrive $bin --steps 32 --out "$OUT/hf-compare.json"
  echo "hf_compare exit $?"
fi
