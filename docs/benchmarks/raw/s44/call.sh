#!/usr/bin/env bash
# Next session's first device call, on whichever GPU comes: usage call.sh LIMIT_S (the call's timeout).
# On an H200: ask 8's resnet50 (s33/resnet50.sh, BUDGET = LIMIT_S - 60; call it again on the same warm
# machine with the same script to resume /tmp/bench, then render as docs/benchmarks.md says).
# Otherwise: the default route's own build spread on resnet50 (session 44 measured the tuned routes':
# up to 1.18x; a headline speedup is one default build against one winner build), with the eager
# route as the control: default_spread.sh, its build budget ~40% of the call.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
if grep -q H200 "$OUT/gpu.txt"; then
  bash docs/benchmarks/raw/s33/resnet50.sh $(( $1 - 60 ))
else
  bash docs/benchmarks/raw/s44/default_spread.sh $(( ($1 - 330) > 60 ? ($1 - 330) : 60 ))
fi
