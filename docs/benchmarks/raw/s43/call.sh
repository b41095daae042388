#!/usr/bin/env bash
# Next session's first device call, on whichever GPU comes: usage call.sh LIMIT_S (the call's timeout).
# On an H200: ask 8's resnet50 (s33/resnet50.sh, BUDGET = LIMIT_S - 60; call it again on the same warm
# machine with the same script to resume /tmp/bench, then render as s33's note says).
# Not on an H200: the build-to-build spread of resnet50's tuned routes (s43/build_spread.sh, its build
# budget ~55% of the call), so a call never goes unused.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
if grep -q H200 "$OUT/gpu.txt"; then
  bash docs/benchmarks/raw/s33/resnet50.sh $(( $1 - 60 ))
else
  bash docs/benchmarks/raw/s43/build_spread.sh $(( ($1 - 260) > 60 ? ($1 - 260) : 60 ))
fi
