#!/usr/bin/env bash
# Session 38, device call 2: call 1's tuned test passed its fix's assertions (no descent, Triton compiled
# nothing at the load) but its control did not: the engine without what its build tuned (`without_tuned`)
# no longer descended at its load. What each load serves: the test's coordinate-descent MLP built once,
# then loaded with its configs, without them (bare: torch 2.11's AutotuneCache.save records each
# .best_config as a portable-cache artifact, so the bare engine may carry it too), and with torch's own
# lookup (`_serve_tuned_configs` off), each load's `served` configs (tests/gpu/fresh_load.py); torch's
# own CachingAutotuner.run; then the tuned test with its new control.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD:$PWD/out/devpkgs PYTHONUNBUFFERED=1
cp out/rev.txt "$OUT/rev.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 - > "$OUT/torch-run-source.txt" 2>&1 <<'PY'
import inspect, torch
from torch._inductor.runtime import triton_heuristics as th
print(torch.__version__)
for f in (th.CachingAutotuner.run, th.CachingAutotuner.__init__):
    print(inspect.getsource(f))
PY
timeout 400 python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/loads.log"
import io, json, shutil, sys, tarfile, time
from pathlib import Path
out = Path(sys.argv[1])
work = Path("/tmp/s38c2"); shutil.rmtree(work, ignore_errors=True); work.mkdir()
from tests.gpu.fresh_load import export_mlp, load_fresh
from first_call_profile import without_tuned
from enginewright.backends.base import BuildRequest
from enginewright.backends.inductor import InductorBackend
name, x, reference = export_mlp(work, device="cuda", rows=256, hidden=1024, outputs=256)
began = time.monotonic()
request = BuildRequest(model_path=work / "model.pt2", workdir=work / "build", sample_inputs={name: x})
engine = InductorBackend(device="cuda").build(request, {"coordinate_descent_tuning": "true"})
print(f"built in {time.monotonic() - began:.1f} s")
with tarfile.open(fileobj=io.BytesIO(engine)) as tar:
    for m in tar.getmembers():
        if m.name.endswith(".best_config"):
            print("BEST", m.name, tar.extractfile(m).read().decode())
(work / "engine.tar").write_bytes(engine)
(work / "bare.tar").write_bytes(without_tuned(engine))
shutil.rmtree(work / "build")
results = {}
for key, kind, torchs in (("engine", "engine", False), ("bare", "bare", False), ("engine-torchs-lookup", "engine", True)):
    got = load_fresh(work / f"{kind}.tar", work / f"load-{key}", work / "inputs.npz", "cuda", False, torchs)
    got.pop("output", None)
    results[key] = got
    print(key, json.dumps({k: got.get(k) for k in ("descended", "served", "triton_compiled")}))
    (out / "loads.json").write_text(json.dumps(results, indent=1))
PY
echo "loads rc=$?"
# then the tuned test, which now also asks that each tuned kernel serves its build's config (`served`)
timeout 150 python3 -m pytest -q -rA -p no:cacheprovider --basetemp=/tmp/t2 \
  tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py > "$OUT/tuned.log" 2>&1
echo "tuned rc=$?"; grep -E "^E |passed|failed" "$OUT/tuned.log" | cut -c1-600 | tail -6
