#!/usr/bin/env bash
# Session 33, device call 3: an engine brings what its build tuned (the fix of call 2's finding).
# 1. the GPU tests of it; 2. tune's profile on the MLP again (call 1's command: its loads' first calls);
# 3. bench/first_call_profile.py on that run's engines, as built and without their autotuned/ members.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt"; cp out/rev.txt "$OUT/rev.txt"
timeout 200 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py \
  tests/gpu/test_inductor_eager_route_and_objectives.py tests/gpu/test_inductor_builds_fork_from_a_preloaded_process.py \
  > "$OUT/tests-gpu.log" 2>&1; echo "tests rc=$?"; tail -3 "$OUT/tests-gpu.log"
[ -f /tmp/ic/data/mlp.pt2 ] || timeout 90 python3 bench/inductor_cost.py --out /tmp/ic --device cuda --workload mlp --pairs 0 > "$OUT/data.log" 2>&1
D=/tmp/ic/data; rm -rf /tmp/profile
timeout 150 python3 bench/tune_profile.py --json "$OUT/profile.json" -- $D/mlp.pt2 --backend inductor --search mixed \
  --metric cosine --threshold 0.001 --out /tmp/profile --device cuda --inputs $D/inputs-0.npz \
  --references $D/references-0.npz --inputs $D/inputs-1.npz --references $D/references-1.npz \
  --knob compile=true,false --knob triton.cudagraphs=true,false --knob coordinate_descent_tuning=true,false \
  --setting input_dtype=float16 > "$OUT/profile.log" 2>&1; echo "tune rc=$?"
grep -E "spent|load: load|first call|tune's wall" "$OUT/profile.log"
ls -la /tmp/profile/store/runs/local/engines/ > "$OUT/engines.txt"
(cd /tmp/profile && tar czf "$OUT/entries.tgz" store/runs/local/entries summary.json confirm.json 2>/dev/null)
timeout 200 python3 bench/first_call_profile.py --bare --loads 4 --inputs $D/inputs-0.npz --json "$OUT/first_call.json" \
  /tmp/profile/store/runs/local/engines/*.tar > "$OUT/first_call.log" 2>&1; echo "first_call rc=$?"
grep "first call, loads after" "$OUT/first_call.log"; cat "$OUT/engines.txt"
