#!/usr/bin/env bash
# Run 1 (H200, 2026-12-04): the persistent kernel with fewer values held in registers across the
# layers (the stream's dims and table from shared memory at fixed offsets, the L2 policy made per
# tile, the stamps, counters, h and gu read from the launch arguments where used, the regions
# after the table from offsets in the shared-memory head). ptxas (nvcc 13.0, the CPU machine):
# spill stores/loads of the tensor-core G = 2, D = 128 entry 140/224 -> 124/192 bytes.
# The CUDA engine's GPU tests with it, then batch 1 alternating three rounds against the kernel
# before, and batch 4 once each (prompt 512, 64 tokens, CUDA graphs).
#   device tool: run command="bash bench/results/h200-register-diet-2026-12-04/run1.sh" carry=["build-carry"]
#   build-carry/: thrive-base = `thrive` built at 52d2eb2 (the kernel is the same at 4ba32a0);
#   thrive and model_test_cuda_engine built at 4ba32a0 with register-diet-attempt.patch applied
#   (git apply; cmake --build build --target thrive model_test_cuda_engine; copy them there);
#   lib/ = libfmt.so.9, libspdlog.so.1.10, libsqlite3.so.0 from the CPU machine (Debian 12).
# Out ($OUT): tests.txt, e2e-<name>.json, e2e-stderr.log (the device tool returns at most 8 files:
# in the recorded call the two logs were left out; the script printed the test summary).
source "$(dirname "$0")/../h200-lm-head-2026-12-04/common.sh"
prepare thrive thrive-base model_test_cuda_engine
timeout 300 build-carry/model_test_cuda_engine > "$OUT/tests.txt" 2>&1; echo "tests exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/tests.txt" | head -20
for r in 1 2 3; do
  e2e b1-base-$r "$OUT" thrive-base 1
  e2e b1-diet-$r "$OUT" thrive 1
done
e2e b4-base "$OUT" thrive-base 4
e2e b4-diet "$OUT" thrive 4
