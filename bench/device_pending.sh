#!/usr/bin/env bash
# The device checks issue 19 still lacks (session 23 could not start a device: 1000 s of budget went on
# refused starts), in one call of at most TOTAL seconds, each result written under $OUT as it comes:
#   1. the fork test (its "no compile pool beside a load" assertion has not run on a GPU yet),
#   2. the build compile-pool A/B (ask 7): tune with main's operator against branch
#      build-compile-threads (compile_threads=1 in builds too), the MLP on CUDA, one pair,
#   3. bench/compile_pool.py with the default and with one compile thread,
#   4. the rest of tests/gpu with the time left.
# Here, first:  bash bench/device_pending.sh prepare   (out/devpkgs, out/bct, out/rev.txt)
# On the device (carry out/devpkgs, out/bct, out/rev.txt):  TOTAL=580 bash bench/device_pending.sh run
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = prepare ]; then
  [ -d out/devpkgs ] || bash bench/device_packages.sh
  rm -rf out/bct && mkdir -p out/bct
  git archive build-compile-threads operator | tar -x -C out/bct
  git rev-parse --short HEAD > out/rev.txt
  echo "prepared: out/devpkgs out/bct (build-compile-threads $(git rev-parse --short build-compile-threads)) out/rev.txt"
  exit 0
fi
TOTAL=${TOTAL:-580}
start=$(date +%s)
left() { echo $(( TOTAL - ( $(date +%s) - start ) )); }
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs
cat out/rev.txt > "$OUT/rev.txt" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
(lscpu | head -20; nproc; uptime) > "$OUT/host.txt" 2>&1
timeout 120 python3 -m pytest -v -rA tests/gpu/test_inductor_builds_fork_from_a_preloaded_process.py > "$OUT/tests-fork.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/tests-fork.log"
ab="python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --knobs compile,triton.cudagraphs,coordinate_descent_tuning --pairs 1 --variant main=operator --variant bct=out/bct/operator --export $OUT/ic"
echo "$ab" > "$OUT/command.txt"
t=$(left); [ "$t" -gt 330 ] && t=330
timeout "$t" $ab > "$OUT/ic.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/ic.log"
for f in $(find /tmp/ic -name "*.log" -o -name "summary.json" 2>/dev/null | head -40); do
  cp "$f" "$OUT/iclog_$(echo "${f#/tmp/ic/}" | tr '/' '_')"  # flat names: deep folders under $OUT are refused
done
(timeout 40 python3 bench/compile_pool.py; timeout 40 python3 bench/compile_pool.py --compile-threads 1) > "$OUT/compile_pool.log" 2>&1
t=$(left); echo "tests/gpu with ${t}s" > "$OUT/tests-gpu.log"
[ "$t" -gt 10 ] && timeout "$t" python3 -m pytest -v -rA tests/gpu \
  --deselect tests/gpu/test_inductor_builds_fork_from_a_preloaded_process.py >> "$OUT/tests-gpu.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/tests-gpu.log"
