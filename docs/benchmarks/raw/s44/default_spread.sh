#!/usr/bin/env bash
# Does the default route rebuild to the same speed? Session 44 (H100) found resnet50's tuned routes'
# builds up to 1.18x apart (coordinate descent + CUDA graphs), each build choosing its kernels'
# configs by timing; the default's build chooses among a few configs per kernel too (18 of its
# kernels with CUDA graphs), and a headline speedup is one default build against one winner build.
# Builds the default and the eager control (the same bytes every time) alone and 2 at once, rep after
# rep while BUILD_BUDGET_S holds, then times every engine side by side, 2 loads each; per route
# build_spread and config_spread. Usage: default_spread.sh BUILD_BUDGET_S (e.g. 230 of a 560 s call).
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
timeout $(( $1 + 280 )) python3 bench/parallel_build_effect.py --out /tmp/pbe --device cuda --workload resnet50 \
  --reps 6 --build-budget-s "$1" --loads 2 --rounds 4 --export "$OUT/pbe" --routes ';compile=false' \
  > "$OUT/default_spread.log" 2>&1
echo "rc=$?"; grep -E "rep |built |spread|pooled" "$OUT/default_spread.log" | cut -c1-600
