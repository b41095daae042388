#!/usr/bin/env bash
# Session 37, device call 1: the fix of 9c0757c on a GPU (session 36's fallback.sh: torch's own lookup
# code, the tuned-engine test with the fix and as at e873078, tests/gpu whole), then a load's first call
# of the test's coordinate-descent engine, as built and without its tuned configs (--bare), 5 loads each,
# against session 33's 0.0607 s / 0.1352 s.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
cp out/rev.txt "$OUT/rev.txt"; cat "$OUT/gpu.txt"
bash docs/benchmarks/raw/s36/fallback.sh 2>&1 | tee "$OUT/fallback.txt"
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
T=$(ls -d /tmp/t2/test_a_tuned_engine_loads_*0 2>/dev/null | head -1)
[ -n "$T" ] && [ -f "$T/engine.tar" ] || { echo "no engine from the tuned test"; exit 0; }
timeout 120 python3 bench/first_call_profile.py --bare --loads 5 --inputs $T/inputs.npz \
  --json "$OUT/first_call_cdt.json" $T/engine.tar > "$OUT/first_call.log" 2>&1
echo "first_call_profile rc=$?"; grep -v "^ " "$OUT/first_call.log" | tail -20
