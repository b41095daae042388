#!/usr/bin/env bash
# The device checks issue 19 still lacks, in one call of at most TOTAL seconds, each result written
# under $OUT as it comes (at most 8 files come back from $OUT: this writes 7):
#   1. the fork test (tests/gpu/test_inductor_builds_fork_from_a_preloaded_process.py): builds fork
#      from the preloaded build process, which no longer starts again bare on CUDA (add672b), and a
#      fresh load starts no compile pool (never reached on a GPU yet: the test's helper failed on
#      torch 2.11 in session 25),
#   2. the preload's effect on the H200 (ask 7): tune with the operator before add672b (54e4c57, whose
#      build process started again without its preload on CUDA) against this one, the MLP, one pair,
#   3. the rest of tests/gpu with the time left.
# Here, first:  bash bench/device_pending.sh prepare   (out/devpkgs, out/before, out/rev.txt)
# On the device (carry out/devpkgs, out/before, out/rev.txt):  TOTAL=560 bash bench/device_pending.sh run
set -u
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:-54e4c57}
if [ "${1:-}" = prepare ]; then
  [ -d out/devpkgs ] || bash bench/device_packages.sh
  rm -rf out/before && mkdir -p out/before
  git archive "$BEFORE" operator | tar -x -C out/before
  git rev-parse --short HEAD > out/rev.txt
  echo "prepared: out/devpkgs out/before ($BEFORE) out/rev.txt"
  exit 0
fi
TOTAL=${TOTAL:-560}
start=$(date +%s)
left() { echo $(( TOTAL - ( $(date +%s) - start ) )); }
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
{ echo "revision $(cat out/rev.txt 2>/dev/null), before $BEFORE"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  lscpu | head -20; nproc; uptime; } > "$OUT/env.txt" 2>&1
timeout 150 python3 -m pytest -v -rA tests/gpu/test_inductor_builds_fork_from_a_preloaded_process.py > "$OUT/tests-fork.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/tests-fork.log"
ab="python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --knobs compile,triton.cudagraphs,coordinate_descent_tuning --pairs 1 --variant before=out/before/operator --variant after=operator --export $OUT/ic"
echo "$ab" > "$OUT/command.txt"
t=$(left); [ "$t" -gt 330 ] && t=330
timeout "$t" $ab > "$OUT/ic.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/ic.log"
# the tune runs' summaries and build, tune and serving logs in one file (their folders are too deep)
(cd /tmp/ic 2>/dev/null && find . -name summary.json -o -name confirm.json -o -name "*.log" | grep -v caches \
  | tar -czf "$OUT/ic-logs.tgz" -T -) 2>/dev/null
t=$(left); echo "tests/gpu with ${t}s" > "$OUT/tests-gpu.log"
[ "$t" -gt 10 ] && timeout "$t" python3 -m pytest -v -rA tests/gpu \
  --deselect tests/gpu/test_inductor_builds_fork_from_a_preloaded_process.py >> "$OUT/tests-gpu.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/tests-gpu.log"
