#!/usr/bin/env bash
# The device checks issue 19 still lacks for ask 7, in one call of at most TOTAL seconds, each result
# written under $OUT as it comes (at most 8 files come back from $OUT: this writes 7):
#   1. which OS threads the build process's preload leaves (each fork from it printed Python 3.12's
#      "multi-threaded, use of fork()" warning in session 26; here, on 2 cores, numpy's OpenBLAS
#      worker),
#   2. tune against its naive sweep on the MLP (bench/inductor_cost.py, one pair, this revision),
#   3. where that tune's wall time goes (bench/tune_profile.py on the same data and knobs): the
#      requests to the serving processes, their starts and ends, against the builds.
# Here, first:  bash bench/device_pending.sh prepare   (out/devpkgs, out/rev.txt)
# On the device (carry out/devpkgs, out/rev.txt):  TOTAL=300 bash bench/device_pending.sh run
# Ask 8's resnet50 calls are separate (docs/benchmarks.md, "Still missing").
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = prepare ]; then
  [ -d out/devpkgs ] || bash bench/device_packages.sh
  git rev-parse --short HEAD > out/rev.txt
  echo "prepared: out/devpkgs out/rev.txt"
  exit 0
fi
TOTAL=${TOTAL:-300}
start=$(date +%s)
left() { echo $(( TOTAL - ( $(date +%s) - start ) )); }
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
{ echo "revision $(cat out/rev.txt 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  lscpu | head -20; nproc; uptime; } > "$OUT/env.txt" 2>&1
timeout 60 python3 - > "$OUT/threads.txt" 2>&1 <<'EOF'
import os
from enginewright.worker import child
print("preloaded", child.preload("inductor"))
for task in sorted(os.listdir("/proc/self/task")):
    print(task, open(f"/proc/self/task/{task}/comm").read().strip())
EOF
ic="python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --knobs compile,triton.cudagraphs,coordinate_descent_tuning --pairs 1 --variant after=operator --export $OUT/ic"
D=/tmp/ic/data
profile="python3 bench/tune_profile.py --json $OUT/profile.json -- $D/mlp.pt2 --backend inductor --search mixed --metric cosine --threshold 0.001 --out /tmp/profile --device cuda --inputs $D/inputs-0.npz --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz --knob compile=true,false --knob triton.cudagraphs=true,false --knob coordinate_descent_tuning=true,false --setting input_dtype=float16"
printf '%s\n%s\n' "$ic" "$profile" > "$OUT/command.txt"
t=$(left); [ "$t" -gt 170 ] && t=170
timeout "$t" $ic > "$OUT/ic.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/ic.log"
t=$(left); echo "profile with ${t}s" > "$OUT/profile.log"
[ "$t" -gt 10 ] && timeout "$t" $profile >> "$OUT/profile.log" 2>&1
echo "rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/profile.log"
