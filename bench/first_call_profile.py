"""Where an Inductor engine's first call after a load goes (issue 19, ask 7), and what the engine's
tuned configs save there: on an H100 the first call was 0.36 s of a later load's 0.43 s, over the 28
loads of an MLP's 52 s tune, and the coordinate-descent route's loads tuned its kernels again, 2.5 s
each (session 33). Loads each engine file given `--loads` times in this one process, as the serving
process loads them, as built and (`--bare`) without its `autotuned/` members (what engines were before
they carried them), interleaved; times the first call, under cProfile on the first load of each, and
the second; prints each engine's medians and the ratio bare / as built, measured side by side.

    python bench/first_call_profile.py --inputs inputs.npz --json out.json [--bare] ENGINE.inductor.tar ...
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import tarfile
import tempfile
import time
from pathlib import Path

from enginewright.backends.inductor import InductorBackend
from enginewright.worker.child import load_npz


def without_tuned(engine: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(engine)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            if not member.name.startswith("autotuned/"):
                dst.addfile(member, src.extractfile(member))
    return out.getvalue()


def load_once(backend, engine: bytes, inputs, profiled: bool) -> dict:
    with tempfile.TemporaryDirectory() as work:
        began = time.monotonic()
        runner = backend.load(engine, Path(work))
        made = time.monotonic()
        profile = cProfile.Profile() if profiled else None
        if profile:
            profile.enable()
        runner.run(inputs)
        if profile:
            profile.disable()
        first = time.monotonic() - made
        started = time.monotonic()
        runner.run(inputs)
        row = {
            "backend_load_s": round(made - began, 4),
            "first_call_s": round(first, 4),
            "second_call_s": round(time.monotonic() - started, 5),
            "parts": dict(runner.load_parts),
            "describe": runner.describe(),
        }
        runner.close()
    if profile:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(25)
        row["profile"] = text.getvalue()[:5000]
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("engines", nargs="+", type=Path)
    p.add_argument("--inputs", required=True)
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--loads", type=int, default=3)
    p.add_argument("--bare", action="store_true", help="also load each engine without its autotuned/ members")
    args = p.parse_args()
    backend, inputs, rows = InductorBackend(), load_npz(args.inputs), []
    variants = {}
    for engine in args.engines:
        data = engine.read_bytes()
        variants[(engine.name, "as built")] = data
        if args.bare:
            variants[(engine.name, "bare")] = without_tuned(data)
    for load in range(args.loads):
        for (name, variant), data in variants.items():
            row = {"engine": name, "variant": variant, "load": load, **load_once(backend, data, inputs, load == 0)}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
            if "profile" in row:
                print(row["profile"], flush=True)
            args.json.write_text(json.dumps({"rows": rows}, indent=1))
    summary = {}
    for name in dict.fromkeys(n for n, _ in variants):
        later = {  # the first load of the process pays its imports: left out
            v: [r["first_call_s"] for r in rows if r["engine"] == name and r["variant"] == v and r["load"] > 0]
            for v in ("as built", "bare")
        }
        medians = {v: statistics.median(t) for v, t in later.items() if t}
        summary[name] = {"first_call_median_s": medians}
        if len(medians) == 2:
            summary[name]["bare_over_as_built"] = round(medians["bare"] / medians["as built"], 3)
        print(f"{name}: first call, loads after the first: {medians}", flush=True)
    args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
