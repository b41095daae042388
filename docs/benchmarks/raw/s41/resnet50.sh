#!/usr/bin/env bash
# Session 41: ask 8's resnet50 (bench/gpu_tuning.py, mixed and full) on whichever GPU comes, s33/resnet50.sh
# without its H200 check: on an H100 it measures what the protocol's cost work since session 27 (the last
# resnet50 run, at a74a7ff, on an H100) did to resnet50. Usage: resnet50.sh BUDGET_S; a later call on the
# same warm machine resumes /tmp/bench.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
BENCH_BUDGET_S=$1 timeout $(( $1 + 50 )) python3 bench/gpu_tuning.py run --workloads resnet50 --out /tmp/bench \
  --export "$OUT" > "$OUT/resnet50.log" 2>&1
echo "rc=$?"; tail -30 "$OUT/resnet50.log"
