#!/usr/bin/env bash
# The CUDA side of the kernel include policy (session 38): the CUDA backend, adversarial and
# NVRTC-template GPU tests with test binaries built on the build machine at 2700905 and carried
# (build-carry/: backend_test_cuda_backend, backend_test_cuda_adversarial,
# backend_test_nvrtc_templates; lib/ holds libfmt.so.9, libspdlog.so.1.10, libsqlite3.so.0).
#   device tool: run command="bash bench/results/h100-closing-check-2026-12-07/policy-gpu-check.sh" carry=["build-carry"]
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/build-carry/lib THRIVE_HOME=/tmp/thrive-home
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%Y-%m-%dT%H:%MZ
for t in backend_test_nvrtc_templates backend_test_cuda_backend backend_test_cuda_adversarial; do
  timeout 150 build-carry/$t > "$OUT/$t.log" 2>&1
  echo "$t exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|tests ran" "$OUT/$t.log" | head -8
done
