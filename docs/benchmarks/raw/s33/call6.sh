#!/usr/bin/env bash
# Session 33, device call 6: tune's profile on the MLP, engines without their tuned configs (e35e4be's
# operator/, carried in out/before-s33) and with them (this revision), interleaved: after, before, after, before.
set -u
export PYTHONUNBUFFERED=1
cp out/rev.txt "$OUT/rev.txt"; D=/tmp/ic/data
[ -f $D/mlp.pt2 ] || PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs timeout 90 python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --pairs 0 > /dev/null 2>&1
for run in after-1 before-1 after-2 before-2; do
  case $run in before*) code=$PWD/out/before-s33/operator ;; *) code=$PWD/operator ;; esac
  rm -rf /tmp/p-$run
  PYTHONPATH=$code:$PWD/bench:$PWD/out/devpkgs timeout 120 python3 bench/tune_profile.py --json "$OUT/$run.json" -- $D/mlp.pt2 \
    --backend inductor --search mixed --metric cosine --threshold 0.001 --out /tmp/p-$run --device cuda \
    --inputs $D/inputs-0.npz --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz \
    --knob compile=true,false --knob triton.cudagraphs=true,false --knob coordinate_descent_tuning=true,false \
    --setting input_dtype=float16 > /tmp/p-$run.log 2>&1
  echo "$run rc=$? $(grep -E "^spent|tune's wall" /tmp/p-$run.log | tr '\n' ' ')" | tee -a "$OUT/runs.txt"
  grep -E "load: load |load.first call|winning" /tmp/p-$run.log >> "$OUT/runs.txt"
done
