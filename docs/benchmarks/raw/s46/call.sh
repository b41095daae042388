#!/usr/bin/env bash
# Session 46's one device call, not run: 309 s of device time were left (shared with the failed
# landing before it) and the tool refused the start ("too little device-machine time is left to start
# another machine"). Kept for a session's spare minutes (~150 s with a 40 s budget on an H100, by the
# CPU run's shape: 1 rep built in 27 s there). Session 45 asked whether a GPU-bound default, with more kernels
# tuned while it builds, rebuilds to the same speed (resnet50's did: 1.015x apart, within its loads).
# The transformer block (8x256x1024 fp16, `--workload attention`): the default and the eager control
# built alone and 2 at once while BUILD_BUDGET_S holds, then every engine timed side by side, 2 loads
# each, 3 rounds; build_spread and config_spread per route. Usage: call.sh BUILD_BUDGET_S (e.g. 40).
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
python3 bench/parallel_build_effect.py --out /tmp/pbe --device cuda --workload attention \
  --reps 4 --build-budget-s "$1" --loads 2 --rounds 3 --export "$OUT/pbe" --routes ';compile=false' \
  > "$OUT/default_spread.log" 2>&1
echo "rc=$?"; grep -E "rep |built |spread|pooled" "$OUT/default_spread.log" | cut -c1-600
