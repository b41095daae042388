#!/usr/bin/env bash
# Session 33, device call 1: does `tune` stop before its plan on a fresh GPU host (session 32, call 4)?
# The MLP's data, then tune's profile in the background; every python process's stack (py-spy, carried
# in out/tools) at 20, 45, 90 and 140 s while tune runs, then SIGABRT to what is left at 200 s
# (PYTHONFAULTHANDLER=1: each process dumps its stack into its own log), and the run's logs.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
nvidia-smi --query-gpu=name,driver_version,persistence_mode,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"; nproc > "$OUT/host.txt"; free -g >> "$OUT/host.txt"; uptime >> "$OUT/host.txt"
stamp() { while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done; }
began=$SECONDS
timeout 90 python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --pairs 0 2>&1 | stamp > "$OUT/data.log"
echo "data: $((SECONDS - began)) s" >> "$OUT/host.txt"
D=/tmp/ic/data
( python3 bench/tune_profile.py --json "$OUT/profile.json" -- $D/mlp.pt2 --backend inductor --search mixed \
    --metric cosine --threshold 0.001 --out /tmp/profile --device cuda --inputs $D/inputs-0.npz \
    --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz \
    --knob compile=true,false --knob triton.cudagraphs=true,false --knob coordinate_descent_tuning=true,false \
    --setting input_dtype=float16 2>&1; echo "tune rc=$?" ) | stamp > "$OUT/profile.log" &
tune=$!
started=$SECONDS
dump() {
  { echo "=== $1 s: $(date +%T)"; ps -eo pid,ppid,etimes,pcpu,rss,stat,wchan:20,args --forest | grep -v " ps \| grep "; } >> "$OUT/ps.txt"
  for pid in $(pgrep -f "python3|enginewright|bin/python"); do
    echo "=== $1 s: pid $pid" >> "$OUT/spy.txt"
    timeout 20 out/tools/py-spy dump --native --pid "$pid" >> "$OUT/spy.txt" 2>&1 \
      || timeout 20 out/tools/py-spy dump --pid "$pid" >> "$OUT/spy.txt" 2>&1
  done
}
for at in 20 45 90 140; do
  while kill -0 $tune 2>/dev/null && (( SECONDS - started < at )); do sleep 1; done
  kill -0 $tune 2>/dev/null || break
  dump $at
done
while kill -0 $tune 2>/dev/null && (( SECONDS - started < 200 )); do sleep 1; done
if kill -0 $tune 2>/dev/null; then
  echo "still running at 200 s: SIGABRT to every python process" >> "$OUT/host.txt"
  pkill -ABRT -f "bench/tune_profile.py|enginewright" ; sleep 5; pkill -KILL -f "bench/tune_profile.py|enginewright"
fi
wait $tune
echo "tune: $((SECONDS - started)) s" >> "$OUT/host.txt"
(cd /tmp && find profile -name "*.log" -o -name "*.json" -size -2M | tar czf "$OUT/profile-logs.tgz" -T -) 2>/dev/null
tail -5 "$OUT/host.txt"; grep -v "^\S* \[" "$OUT/profile.log" | tail -40
