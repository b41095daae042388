#!/usr/bin/env bash
# Session 37, device call 2: with the fix, the tuned engine's load compiled one Triton kernel (the tuned
# config of triton_poi_fused_addmm_gelu_0) whose cache key none of the build's kernels had. What differs:
# the tuned test again (kept in /tmp/t2), then every compiled kernel's Triton metadata, the build's (in
# the engine) and the load's, side by side.
set -u
export PYTHONPATH=$PWD/operator:$PWD/bench:$PWD/out/devpkgs PYTHONUNBUFFERED=1
cp out/rev.txt "$OUT/rev.txt"; nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt"
rm -rf /tmp/t2
timeout 150 python3 -m pytest -q -rA -p no:cacheprovider --basetemp=/tmp/t2 \
  tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py > "$OUT/tuned.log" 2>&1
echo "tuned rc=$?"; tail -3 "$OUT/tuned.log"
T=$(ls -d /tmp/t2/test_a_tuned_engine_loads_*0 | head -1)
python3 - "$T" > "$OUT/kernels.txt" 2>&1 <<'PY'
import json, sys, tarfile
from pathlib import Path
T = Path(sys.argv[1])
rows = []
with tarfile.open(T / "engine.tar") as tar:
    for m in tar.getmembers():
        if m.name.endswith(".best_config"):
            print("BEST", m.name, tar.extractfile(m).read().decode())
        elif m.name.endswith(".json") and "/triton/" in m.name and not Path(m.name).name.startswith("__grp__"):
            rows.append(("build", m.name, json.loads(tar.extractfile(m).read())))
for p in sorted((T / "load").rglob("*.json")) + sorted((Path.home() / ".triton" / "cache").rglob("*.json")):
    if "triton" in str(p) and not p.name.startswith("__grp__"):
        try:
            rows.append(("load", str(p), json.loads(p.read_text())))
        except ValueError as e:
            print("unreadable", p, e)
def short(v):
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) < 300 else s[:300] + "..."
import hashlib, re
def ir_sum(text):  # the kernel's code without its source locations, and its block sizes
    body = "\n".join(l for l in text.splitlines() if not l.startswith("#loc"))
    body = re.sub(r"loc\([^)]*\)", "", body)
    return hashlib.sha256(body.encode()).hexdigest()[:12], sorted(set(re.findall(r"end = (\d+)", body)))
irs = {}
with tarfile.open(T / "engine.tar") as tar:
    for m in tar.getmembers():
        if m.name.endswith(".ttir"):
            irs[("build", str(Path(m.name).parent.name))] = ir_sum(tar.extractfile(m).read().decode())
for p in sorted((T / "load").rglob("*.ttir")) + sorted((Path.home() / ".triton" / "cache").rglob("*.ttir")):
    irs[("load", p.parent.name)] = ir_sum(p.read_text())
for k, v in sorted(irs.items()):
    print("TTIR", k, v)
keys = sorted({k for _, _, d in rows for k in d})
for where, name, d in rows:
    print("==", where, name)
    for k in keys:
        print("  ", k, "=", short(d.get(k, "<absent>")))
# the fields where the load's kernel differs from every build kernel of the same name and the same config
load = [r for r in rows if r[0] == "load"]
for _, lname, ld in load:
    print("## load", lname)
    for _, bname, bd in rows:
        if bd.get("name") != ld.get("name"):
            continue
        diff = {k: (short(bd.get(k)), short(ld.get(k))) for k in keys if bd.get(k) != ld.get(k) and k not in ("hash",)}
        print("  vs", bname, json.dumps(diff)[:2000])
PY
echo "kernels rc=$?"
python3 - > "$OUT/triton-key.txt" 2>&1 <<'PY'
import inspect, os, triton
from triton.compiler import compiler as c
print(triton.__version__)
src = inspect.getsource(c.compile)
i = src.find("key =")
print(src[max(0, i - 1500):i + 1500])
import importlib
for name in ("triton.compiler.compiler", "triton.runtime.cache", "triton.knobs", "triton._utils"):
    try:
        m = importlib.import_module(name)
    except ImportError:
        continue
    f = getattr(m, "get_cache_invalidating_env_vars", None)
    if f:
        print("##", name); print(inspect.getsource(f)); print("here:", f())
print("TRITON_LIBDEVICE_PATH", os.environ.get("TRITON_LIBDEVICE_PATH"))
PY
grep -c "^==" "$OUT/kernels.txt"; grep -A3 "^## load" "$OUT/kernels.txt" | head -40
env | grep -E "^(TRITON|TORCHINDUCTOR)" > "$OUT/env.txt"
