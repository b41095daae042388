#!/usr/bin/env bash
# Session 41, one device call: usage call.sh RESNET_BUDGET_S LIMIT_S [call2].
# On an H200 with RESNET_BUDGET_S > 0: ask 8's resnet50 (s33/resnet50.sh; a later call on the same warm
# machine resumes /tmp/bench); then, if "call2" is given and the call has time left, s38/call2.sh (the
# tuned engine's three loads and the tuned test) and, after it, tests/gpu whole.
# Not on an H200 (or RESNET_BUDGET_S 0): s38/call2.sh, then tests/gpu whole.
# Files come back flat (8 at most): gpu.txt rev.txt resnet50.{log,json,png} call2.tgz tests-gpu.log.
set -u
T0=$SECONDS; LIMIT=$2
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
H200=0; grep -q H200 "$OUT/gpu.txt" && H200=1
left() { echo $(( LIMIT - (SECONDS - T0) )); }
CALL2=0
if [ "$H200" = 1 ] && [ "$1" -gt 0 ]; then
  bash docs/benchmarks/raw/s33/resnet50.sh "$1"
  echo "resnet50 call ended at $(( SECONDS - T0 )) s"
  [ "${3:-}" = call2 ] && CALL2=1
else
  CALL2=1
fi
if [ "$CALL2" = 1 ] && [ "$(left)" -gt 120 ]; then
  mkdir -p /tmp/c2o; rm -rf /tmp/c2o/*
  OUT=/tmp/c2o timeout "$(left)" bash docs/benchmarks/raw/s38/call2.sh > /tmp/c2o/call2.out 2>&1
  echo "call2 rc=$?"; tail -8 /tmp/c2o/call2.out
  tar czf "$OUT/call2.tgz" -C /tmp/c2o .
fi
if [ "$CALL2" = 1 ] && [ "$(left)" -gt 150 ]; then
  set -o pipefail
  timeout "$(( $(left) - 10 ))" python3 -m pytest -q -rA -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/tests-gpu.log" | tail -8
  echo "tests/gpu rc=$?"
fi
echo "call took $(( SECONDS - T0 )) s"
