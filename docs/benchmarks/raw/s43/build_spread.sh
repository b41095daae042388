#!/usr/bin/env bash
# Session 43 (written; run next session): does a tuned route rebuild to the same speed? Session 42 built
# coordinate descent + CUDA graphs on resnet50 twice, 1.578 and 1.803 ms, CUDA graphs alone 1.616/1.622.
# bench/parallel_build_effect.py builds each route alone, then all 4 at once (as tune's groups), rep after
# rep while --build-budget-s holds, then times every engine (2 loads each) in interleaved rounds; per
# route `build_spread` separates a build's lasting offset from a load's. The eager route is the control
# (the same bytes every time). On any GPU. Usage: build_spread.sh BUILD_BUDGET_S (e.g. 300 of a 560 s call).
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
timeout $(( $1 + 250 )) python3 bench/parallel_build_effect.py --out /tmp/pbe --device cuda --workload resnet50 \
  --reps 4 --build-budget-s "$1" --loads 2 --rounds 5 --export "$OUT/pbe" \
  --routes 'triton.cudagraphs=true;coordinate_descent_tuning=true,triton.cudagraphs=true;coordinate_descent_tuning=true;compile=false' \
  > "$OUT/build_spread.log" 2>&1
echo "rc=$?"; grep -E "rep |built |spread|pooled" "$OUT/build_spread.log" | cut -c1-400
