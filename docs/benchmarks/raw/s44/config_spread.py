"""Session 44: how resnet50's builds chose their kernels' configs, read from call 2's serving loads,
and what keeping the faster of two builds would have given (`best_of_two`, from the call's times).
Each load placed its engine's tuned configs (`.best_config`) in its own Inductor cache folder (the
same in both loads of each engine: `second_load_alike`); best-configs.tgz holds them as the call left them in
/tmp/pbe2/interleave/serve/load-<engine>[@2]/caches-load/inductor/. Run from the repository's root:

    ~/.cache/enginewright/venv-*/bin/python docs/benchmarks/raw/s44/config_spread.py > docs/benchmarks/raw/s44/call2/config_spread.json
"""

import io
import json
import re
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

RAW = Path(__file__).resolve().parent
sys.path[:0] = [str(RAW.parents[3] / "bench"), str(RAW.parents[3] / "operator")]
from parallel_build_effect import best_of_two, config_spread  # noqa: E402

from enginewright.backends.inductor import CONFIG_BOOKKEEPING  # noqa: E402

LOAD = re.compile(r"\./interleave/serve/load-(r\d)-(alone|beside)(\d)(@2)?/caches-load/inductor/(.+\.best_config)")

loads: dict[str, dict[str, dict]] = defaultdict(dict)
with tarfile.open(fileobj=io.BytesIO((RAW / "call2" / "best-configs.tgz").read_bytes())) as tar:
    for member in tar.getmembers():
        found = LOAD.fullmatch(member.name)
        if found and member.isreg():
            route, how, rep, again, kernel = found.groups()
            config = json.loads(tar.extractfile(member).read())
            loads[f"{route}-{how}{rep}{again or ''}"][kernel] = {
                k: v for k, v in config.items() if k not in CONFIG_BOOKKEEPING
            }
measured = json.loads((RAW / "call2" / "pbe" / "parallel_build_effect.json").read_text())
routes = measured["routes"]
figures = {}
for route, name in routes.items():
    builds = sorted(e for e in loads if e.startswith(route + "-") and not e.endswith("@2"))
    figures[name] = {
        "builds": builds,
        **config_spread([loads[e] for e in builds]),
        "second_load_alike": all(loads[e] == loads.get(e + "@2") for e in builds),
        # from the call's own times of these builds (timed side by side): keeping the faster of two
        "best_of_two": best_of_two(measured["by_route"][name]["alone_ms"] + measured["by_route"][name]["beside_ms"]),
    }
print(json.dumps(figures, indent=1))
