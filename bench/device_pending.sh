#!/usr/bin/env bash
# The device check issue 19 still lacks for ask 7, in one call of at most TOTAL seconds, each result
# written under $OUT as it comes (at most 8 files come back from $OUT: this writes 7):
#   1. (IMPORTS=1, the default) where a fresh process's start goes on the GPU node
#      (bench/import_cost.py, twice, and once with `-X importtime`),
#   2. the first batch's build and serving processes started before tune asks for the backend's
#      versions (`Worker.start_ahead`): tune with the operator before it (BEFORE, 04b2b4f) against
#      this one, the MLP, PAIRS pairs side by side (session 28 measured the batch's early process,
#      0.847x, and the confirmation's launched ahead, 0.826-0.867x, the same way),
#   3. where this revision's tune spends its wall time (bench/tune_profile.py, same data and knobs),
#      with each load's own account (load, check, warm-up, calls per round), when the first build
#      was done and each process launched ahead had imported (session 29 on an H200: the first
#      timing 21 s after the batch began, ~10 s of it not in the rows then), and its logs.
#   4. (TESTS=1) tests/gpu with the time left.
# PROFILE_FIRST=1: the profile (3) before the pair (2), for a call short of device time.
# Here, first:  bash bench/device_pending.sh prepare   (out/devpkgs, out/before, out/rev.txt)
# On the device (carry out/devpkgs, out/before, out/rev.txt):  TOTAL=480 bash bench/device_pending.sh run
# Ask 8's resnet50 and convnet calls on the H200 are separate (docs/benchmarks.md, "Still missing").
set -u
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:-04b2b4f}
if [ "${1:-}" = prepare ]; then
  [ -d out/devpkgs ] || bash bench/device_packages.sh
  rm -rf out/before && mkdir -p out/before
  git archive "$BEFORE" operator | tar -x -C out/before
  git rev-parse --short HEAD > out/rev.txt
  echo "prepared: out/devpkgs out/before ($BEFORE) out/rev.txt"
  exit 0
fi
TOTAL=${TOTAL:-480}
start=$(date +%s)
left() { echo $(( TOTAL - ( $(date +%s) - start ) )); }
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
ab="python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --knobs compile,triton.cudagraphs,coordinate_descent_tuning --pairs ${PAIRS:-1} --variant before=out/before/operator --variant after=operator --export $OUT/ic"
D=/tmp/ic/data
profile="python3 bench/tune_profile.py --json $OUT/profile.json -- $D/mlp.pt2 --backend inductor --search mixed --metric cosine --threshold 0.001 --out /tmp/profile --device cuda --inputs $D/inputs-0.npz --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz --knob compile=true,false --knob triton.cudagraphs=true,false --knob coordinate_descent_tuning=true,false --setting input_dtype=float16"
{ echo "revision $(cat out/rev.txt 2>/dev/null), before $BEFORE"
  printf 'commands:\n%s\n%s\n' "$ab" "$profile"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  lscpu | head -20; nproc; uptime; df -h /opt /tmp 2>/dev/null; } > "$OUT/env.txt" 2>&1
[ "${IMPORTS:-1}" = 1 ] && { for i in 1 2; do timeout 120 python3 bench/import_cost.py --cuda; done
  timeout 120 python3 -X importtime bench/import_cost.py 2> /tmp/importtime.txt
  echo "slowest imports (-X importtime, cumulative us):"
  sort -t'|' -k2 -n -r /tmp/importtime.txt | head -40; } > "$OUT/import.txt" 2>&1
pair() {  # (the profile after it keeps PROFILE_S, 150 by default: a pair's three sides took 125-130 s
  # on an H100 in session 31, and a fixed 300 s cut the third of three pairs short)
  t=$(left); [ "${PROFILE_FIRST:-0}" = 1 ] || t=$(( t - ${PROFILE_S:-150} )); [ "$t" -lt 60 ] && t=60
  timeout "$t" $ab > "$OUT/ic.log" 2>&1
  echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/ic.log"
}
profile() {
  t=$(left); echo "profile with ${t}s" > "$OUT/profile.log"
  [ "$t" -gt 10 ] && timeout "$t" $profile >> "$OUT/profile.log" 2>&1
  echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/profile.log"
  (cd /tmp/profile 2>/dev/null && find . -name '*.log' | tar -czf "$OUT/logs.tgz" -T -) 2>/dev/null
}
if [ "${PROFILE_FIRST:-0}" = 1 ]; then  # (--pairs 0: the data alone, which the profile reads)
  python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --pairs 0 > "$OUT/data.log" 2>&1
  profile; pair
else
  pair; profile
fi
# 4. (TESTS=1) tests/gpu with the time left: the fork test's load into a process that imported ahead
if [ "${TESTS:-0}" = 1 ]; then
  t=$(left); echo "tests/gpu with ${t}s" > "$OUT/tests-gpu.log"
  [ "$t" -gt 10 ] && timeout "$t" python3 -m pytest -v -rA -p no:cacheprovider tests/gpu >> "$OUT/tests-gpu.log" 2>&1
  echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/tests-gpu.log"
fi
