#!/usr/bin/env bash
# Session 38, one device call: usage call.sh RESNET_BUDGET_S [CALL_LIMIT_S].
# On an H200 with RESNET_BUDGET_S > 0: ask 8's resnet50 (s33/resnet50.sh; a later call on the same warm
# machine resumes /tmp/bench), then, in the time the call has left, s37/call2.sh (the tuned engine's
# load with f1c2092's fix). Elsewhere: call2.sh, then tests/gpu whole. Files come back flat (8 at most):
# gpu.txt rev.txt resnet50.{log,json,png} call2.tgz tests-gpu.log.
set -u
T0=$SECONDS; LIMIT=${2:-580}
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"
H200=0; grep -q H200 "$OUT/gpu.txt" && H200=1
if [ "$H200" = 1 ] && [ "$1" -gt 0 ]; then
  bash docs/benchmarks/raw/s33/resnet50.sh "$1"
fi
left() { echo $(( LIMIT - (SECONDS - T0) )); }
if [ "$(left)" -gt 100 ]; then
  mkdir -p /tmp/c2o; rm -rf /tmp/c2o/*
  OUT=/tmp/c2o timeout "$(left)" bash docs/benchmarks/raw/s37/call2.sh > /tmp/c2o/call2.out 2>&1
  echo "call2 rc=$?"; tail -5 /tmp/c2o/call2.out
  tar czf "$OUT/call2.tgz" -C /tmp/c2o .
fi
if [ "$(left)" -gt 150 ] && { [ "$H200" = 0 ] || [ "$1" -eq 0 ]; }; then
  set -o pipefail
  timeout "$(left)" python3 -m pytest -q -rA -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/tests-gpu.log" | tail -8
  echo "tests/gpu rc=$?"
fi
echo "call took $(( SECONDS - T0 )) s"
