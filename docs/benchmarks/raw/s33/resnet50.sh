#!/usr/bin/env bash
# Session 33, ask 8: resnet50's mixed and full runs on an H200 (bench/gpu_tuning.py; a later call on
# the same warm machine resumes /tmp/bench). Usage: resnet50.sh BUDGET_S. Not on an H200: stops at once.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: $(tail -1 "$OUT/gpu.txt")"; exit 3; }
BENCH_BUDGET_S=$1 timeout $(( $1 + 50 )) python3 bench/gpu_tuning.py run --workloads resnet50 --out /tmp/bench \
  --export "$OUT" > "$OUT/resnet50.log" 2>&1
echo "rc=$?"; tail -25 "$OUT/resnet50.log"
