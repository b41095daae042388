#!/usr/bin/env bash
# Session 45's device call, on whichever GPU comes: usage call.sh LIMIT_S (the call's timeout less ~40 s).
# On an H200: ask 8's resnet50 (s33/resnet50.sh, BUDGET = LIMIT_S - 60; call it again on the same warm
# machine to resume /tmp/bench, then render as docs/benchmarks.md says).
# Otherwise: tests/gpu whole first (~100-125 s on an H100; session 45's run of it: 12 passed, 5 skipped),
# then s44/default_spread.sh with what is left (its timing takes up to 280 s after the builds).
set -u
T0=$SECONDS; LIMIT=$1
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
left() { echo $(( LIMIT - (SECONDS - T0) )); }
if grep -q H200 "$OUT/gpu.txt"; then
  bash docs/benchmarks/raw/s33/resnet50.sh $(( LIMIT - 60 ))
  exit
fi
timeout 220 python3 -m pytest -q -rA -p no:cacheprovider --durations=10 --basetemp=/tmp/t1 tests/gpu \
  > "$OUT/tests-gpu.log" 2>&1
echo "tests/gpu rc=$? at $(( SECONDS - T0 )) s"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/tests-gpu.log" | cut -c1-300
budget=$(( $(left) - 290 ))
if [ "$budget" -ge 60 ]; then
  bash docs/benchmarks/raw/s44/default_spread.sh "$budget"
else
  echo "no time left for default_spread ($(left) s)"
fi
