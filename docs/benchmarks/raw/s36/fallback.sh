#!/usr/bin/env bash
# Session 36: what a call runs when the card is not an H200 (ask 8 needs one). The tuned engine's load:
# torch's own code of the static-launcher kernels' config lookup (to check pytorch#172819's defect in
# this torch), the test with the fix, the same test with the backend as it was before the fix
# (out/inductor-before.py, carried), then tests/gpu whole with the fix.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
python3 - > "$OUT/torch-autotune-source.txt" 2>&1 <<'PY'
import inspect, torch
from torch._inductor.runtime import triton_heuristics as th, autotune_cache as ac
print(torch.__version__)
for f in (th.CachingAutotuner.recheck_autotune_cache, th.check_autotune_cache, ac.AutotuneCache.save, ac.AutotuneCache.create):
    print(inspect.getsource(f))
PY
head -3 "$OUT/torch-autotune-source.txt"
T=tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py
timeout 150 python3 -m pytest -vv -rA -p no:cacheprovider --basetemp=/tmp/t2 $T > "$OUT/tuned-vv.log" 2>&1
echo "tuned (fix) rc=$?"; grep -E "passed|failed|Error|assert" "$OUT/tuned-vv.log" | tail -8
cp operator/enginewright/backends/inductor.py /tmp/inductor-fixed.py
cp out/inductor-before.py operator/enginewright/backends/inductor.py
timeout 150 python3 -m pytest -vv -rA -p no:cacheprovider --basetemp=/tmp/t3 $T > "$OUT/tuned-before-vv.log" 2>&1
echo "tuned (before) rc=$?"; grep -E "passed|failed|Error|assert" "$OUT/tuned-before-vv.log" | tail -8
cp /tmp/inductor-fixed.py operator/enginewright/backends/inductor.py
timeout 300 python3 -m pytest -q -rA -p no:cacheprovider --durations=20 --basetemp=/tmp/t1 tests/gpu > "$OUT/tests-gpu.log" 2>&1
echo "tests/gpu rc=$?"; tail -15 "$OUT/tests-gpu.log"
