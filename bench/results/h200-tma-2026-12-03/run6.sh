#!/usr/bin/env bash
# Run 6 (H200): the gate|up rounds experiment (mlp-rounds.patch) from a binary built on the Debian 12 machine and carried
# (build-carry/: thrive, libspdlog.so.1.10, libfmt.so.9, libsqlite3.so.0): batch 1 twice, and the greedy tokens.
# To make build-carry/: `git apply bench/results/h200-tma-2026-12-03/mlp-rounds.patch` on 80d0211, build
# ./build (scripts/setup.sh), then mkdir -p build-carry/lib && cp build/thrive build-carry/ && cp -L
# /lib/x86_64-linux-gnu/{libspdlog.so.1.10,libfmt.so.9,libsqlite3.so.0} build-carry/lib/ (build-carry/ is ignored).
#   device tool: run command="bash bench/results/h200-tma-2026-12-03/run6.sh" carry=["build-carry"]
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/build-carry/lib
bin=./build-carry/thrive
ldd $bin | grep "not found"
model=/tmp/qwen3-1.7b-random
export THRIVE_HOME=/tmp/thrive-home
timeout 120 $bin model init --preset qwen3-1.7b --out $model --seed 0 > /dev/null || { echo init failed; exit 1; }
for r in b1-rr b1-rr2; do
  timeout 60 $bin e2e --device cuda --model $model --batch 1 --prompt 512 --gen 64 --kernels best --graphs on --json > $OUT/e2e-$r.json 2>> $OUT/e2e-stderr.log
  python3 scripts/e2e_summary.py $OUT/e2e-$r.json "  $r" --layer
  python3 -c "import json,sys; print('tokens', json.load(open('$OUT/e2e-$r.json'))['tokens'][0][:64])"
done
tail -5 $OUT/e2e-stderr.log
