#!/usr/bin/env bash
# The device check issue 19 still lacks for ask 7, in one call of at most TOTAL seconds, each result
# written under $OUT as it comes (at most 8 files come back from $OUT: this writes 6):
#   1. the batch's serving process launched while its first group builds (598167b): on the H100 its
#      start was 15.2 s, twice a run, 32% of the MLP tune's wall time (session 27, tune_profile):
#      tune with the operator before it (a74a7ff) against this one, the MLP, one pair, side by side,
#   2. where this revision's tune spends its wall time (bench/tune_profile.py, same data and knobs):
#      `server.load_first` is what is left of the batch's start on the critical path.
# Here, first:  bash bench/device_pending.sh prepare   (out/devpkgs, out/before, out/rev.txt)
# On the device (carry out/devpkgs, out/before, out/rev.txt):  TOTAL=420 bash bench/device_pending.sh run
# Ask 8's resnet50 and convnet calls on the H200 are separate (docs/benchmarks.md, "Still missing").
set -u
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:-a74a7ff}
if [ "${1:-}" = prepare ]; then
  [ -d out/devpkgs ] || bash bench/device_packages.sh
  rm -rf out/before && mkdir -p out/before
  git archive "$BEFORE" operator | tar -x -C out/before
  git rev-parse --short HEAD > out/rev.txt
  echo "prepared: out/devpkgs out/before ($BEFORE) out/rev.txt"
  exit 0
fi
TOTAL=${TOTAL:-420}
start=$(date +%s)
left() { echo $(( TOTAL - ( $(date +%s) - start ) )); }
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
{ echo "revision $(cat out/rev.txt 2>/dev/null), before $BEFORE"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  lscpu | head -20; nproc; uptime; } > "$OUT/env.txt" 2>&1
ab="python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --knobs compile,triton.cudagraphs,coordinate_descent_tuning --pairs 1 --variant before=out/before/operator --variant after=operator --export $OUT/ic"
D=/tmp/ic/data
profile="python3 bench/tune_profile.py --json $OUT/profile.json -- $D/mlp.pt2 --backend inductor --search mixed --metric cosine --threshold 0.001 --out /tmp/profile --device cuda --inputs $D/inputs-0.npz --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz --knob compile=true,false --knob triton.cudagraphs=true,false --knob coordinate_descent_tuning=true,false --setting input_dtype=float16"
printf '%s\n%s\n' "$ab" "$profile" > "$OUT/command.txt"
t=$(left); [ "$t" -gt 300 ] && t=300
timeout "$t" $ab > "$OUT/ic.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/ic.log"
t=$(left); echo "profile with ${t}s" > "$OUT/profile.log"
[ "$t" -gt 10 ] && timeout "$t" $profile >> "$OUT/profile.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/profile.log"
