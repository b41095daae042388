"""Per-call time of an Inductor engine as the product serves it, against `torch.compile` on the
original module with the same options, side by side in one run, per workload and route.

    python bench/engine_overhead.py --out OUT [--workloads mlp,block] [--routes default,cudagraphs,eager]
        [--rounds 9] [--variant NAME=module:Class ...]

For every workload (fp16, launch-bound) and route:
- `engine`: built by the product's build child and served by the product's serve child
  (`python -m enginewright.worker.child`, the code the worker's confirmation round uses), so what
  is timed is what a consumer of the engine runs;
- `compile`: `torch.compile(module, options=<the route's options>, dynamic=False)` on the original
  float16 module in a process of its own, called in a loop under one `torch.inference_mode()` (as a
  user would serve it), timed by the same serve loop and CUDA events;
- any `--variant`: another backend class, built and served the same way as `engine`.
`--layouts`: `shared` loads every key into one serving process and interleaves each round of them
in blocks, as the product now times engines against each other (the compiled module and the engine's flat graph are different code, so neither
adds guards to the other's calls); `processes` holds each key in a process of its own, as before
(two processes holding the same engine run lastingly apart on the H200: bench/process_offsets.py).
One key measures at a time, in rotating order, for `--rounds` rounds; a round
is about 0.3 s of back-to-back calls timed with CUDA events (throughput). `eager` compares the engine's
compile=false route with the original module called eagerly. The ratio is the median over rounds of the per-round
ratio to `compile`. Results go to OUT/overhead.json as each route finishes, and a table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

ROUTES = {"default": {}, "cudagraphs": {"triton.cudagraphs": "true"}, "eager": {"compile": "false"}}
# throughput: calls back to back on inputs on the device, CUDA events around them (the method)
TIMING = {"objective": "throughput", "warmup_iterations": 50, "round_seconds": 0.3, "min_rounds": 2, "max_rounds": 2}


def _mlp():
    import torch
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024),
                               torch.nn.LayerNorm(1024))


def _block():
    import torch
    return torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True,
                                            dropout=0.0, norm_first=True)


def workloads():
    from workloads import Workload
    return {w.name: w for w in (
        Workload("mlp", _mlp, (256, 1024), "MLP 1024-4096-1024 + LayerNorm, 256 rows"),
        Workload("block", _block, (8, 256, 1024), "transformer encoder layer d=1024 h=16 ff=4096, 8x256 tokens"))}


class TorchCompileBaseline:
    """A 'backend' whose engine names a workload and a route: load() compiles the original module with
    torch.compile, as a user would in their own process. Build writes that description only."""

    name = "torch.compile"
    engine_suffix = ".json"

    def __init__(self, **_):
        pass

    def versions(self):
        from enginewright.backends.inductor import InductorBackend
        return InductorBackend(device="cuda").versions()

    def load(self, engine: bytes, workdir: Path):
        import torch
        import torch._inductor.config as config
        from enginewright.backends.base import Runner
        from enginewright.backends.inductor import route_options
        spec = json.loads(engine)
        torch.manual_seed(0)
        module = workloads()[spec["workload"]].make().eval().cuda().half()
        options = route_options(config, spec["route"])
        eager = spec["route"].get("compile") == "false"  # the user's own eager module
        compiled = module if eager else torch.compile(module, backend="inductor", options=options, dynamic=False)

        class CompiledRunner(Runner):
            def prepare(self, inputs):
                return torch.from_numpy(next(iter(inputs.values()))).cuda().half()

            def run(self, inputs):
                with torch.inference_mode():
                    return {"output": compiled(self.prepare(inputs)).float().cpu().numpy()}

            def timed_calls(self, objective, inputs, count):
                if objective != "throughput":
                    raise ValueError("this baseline times throughput only")
                x = self.prepare(inputs)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.inference_mode():
                    torch.cuda.synchronize()
                    start.record()
                    for _ in range(count):
                        compiled(x)
                    end.record()
                    end.synchronize()
                return start.elapsed_time(end)
        return CompiledRunner()


def _child(request: dict, folder: Path, **popen):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{request['action']}-request.json"
    path.write_text(json.dumps(request))
    return subprocess.Popen([sys.executable, "-m", "enginewright.worker.child", str(path)], **popen)


def build(backend: str, files: dict, route: dict, folder: Path) -> tuple[Path, float]:
    """Build one engine with the product's build child; returns its path and build seconds."""
    engine = folder / "engine.bin"
    request = {"action": "build", "backend": backend, "backend_options": {"device": "cuda"},
               "workdir": str(folder), "model": str(files["program"]), "settings": {"input_dtype": "float16"},
               "input_shapes": [], "route": route, "engine": str(engine), "inputs": [str(files["inputs"][0])],
               "result": str(folder / "build-result.json")}
    with open(folder.parent / f"{folder.name}-build.log", "wb") as log:
        code = _child(request, folder, stdout=log, stderr=subprocess.STDOUT).wait(timeout=540)
    result = json.loads((folder / "build-result.json").read_text()) if (folder / "build-result.json").exists() else {}
    if code != 0 or not result.get("ok"):
        raise RuntimeError(f"build of {folder.name} failed: {result.get('error') or code}")
    return engine, result["build_seconds"]


def serve(backend: str, engine: Path, files: dict, folder: Path, key: str = "engine") -> subprocess.Popen:
    request = {"action": "serve", "backend": backend, "backend_options": {"device": "cuda"}, "engine": str(engine),
               "workdir": str(folder / "serve"), "inputs": [str(files["inputs"][0])], "timing": TIMING, "key": key}
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder.parent / f"{folder.name}-serve.log", "wb")
    return _child(request, folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                  start_new_session=True)


def reply(proc: subprocess.Popen, key: str, timeout: float = 540) -> dict:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line:
        raise RuntimeError(f"the process serving {key} did not answer (see its serve log)")
    return json.loads(line)


def run_route(workload: str, route_name: str, files: dict, variants: dict[str, str], rounds: int, folder: Path,
              say, layouts: list[str]) -> list[dict]:
    route = ROUTES[route_name]
    base = folder / f"{workload}-{route_name}"
    base.mkdir(parents=True, exist_ok=True)
    spec = base / "compile.json"
    spec.write_text(json.dumps({"workload": workload, "route": route}))
    def attempt(variant):
        try:
            return build(variants[variant], files, route, base / variant)
        except Exception as exc:  # reported, and the other variants still run
            return exc
    with ThreadPoolExecutor(len(variants)) as pool:
        outcomes = dict(zip(variants, pool.map(attempt, variants)))
    failed = {v: str(o)[:500] for v, o in outcomes.items() if isinstance(o, Exception)}
    builds = {v: o for v, o in outcomes.items() if v not in failed}
    say(f"{workload}/{route_name}: built " + ", ".join(f"{v} {s:.0f}s" for v, (_, s) in builds.items())
        + "".join(f"; {v} FAILED: {why}" for v, why in failed.items()))
    backends = {"compile": "engine_overhead:TorchCompileBaseline", **{v: variants[v] for v in builds}}
    engines = {"compile": spec, **{v: path for v, (path, _) in builds.items()}}
    results = []
    for layout in layouts:
        times = (time_shared if layout == "shared" else time_processes)(backends, engines, files, base / layout, rounds)
        keys = list(times)
        ratios = {key: statistics.median(t / c for t, c in zip(times[key], times["compile"])) for key in keys}
        results.append({"workload": workload, "route": route_name, "layout": layout, "rounds": times,
                        "median_ms": {key: statistics.median(times[key]) for key in keys}, "ratio_to_compile": ratios,
                        "build_seconds": {v: round(s, 1) for v, (_, s) in builds.items()}, "failed": failed})
    return results


def rotate(time_one, keys: list[str], rounds: int) -> dict[str, list[float]]:
    """Each key timed once per round, one at a time, the order shifted each round."""
    times: dict[str, list[float]] = {key: [] for key in keys}
    for index in range(rounds):
        shift = index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            times[key].append(time_one(key))
    return times


def close(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def ask(proc: subprocess.Popen, message: dict, key: str) -> dict:
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    return reply(proc, key)


def time_processes(backends: dict, engines: dict, files: dict, folder: Path, rounds: int) -> dict[str, list[float]]:
    """Every key held in a serving process of its own (the product's layout before engines shared one)."""
    servers = {key: serve(backends[key], engines[key], files, folder / key) for key in backends}
    try:
        for key, proc in servers.items():
            ready = reply(proc, key)
            if not ready.get("ready"):
                raise RuntimeError(f"{key} did not load: {ready.get('error')}")
        return rotate(lambda key: ask(servers[key], {"op": "time"}, key)["ms"], list(servers), rounds)
    finally:
        for proc in servers.values():
            close(proc)


def time_shared(backends: dict, engines: dict, files: dict, folder: Path, rounds: int) -> dict[str, list[float]]:
    """Every key loaded into one serving process, each round of them interleaved in blocks on its
    thread (the product's layout)."""
    proc = serve(backends["compile"], engines["compile"], files, folder / "compile", key="compile")
    try:
        ready = reply(proc, "compile")
        if not ready.get("ready"):
            raise RuntimeError(f"compile did not load: {ready.get('error')}")
        for key in backends:
            if key != "compile":
                ready = ask(proc, {"op": "load", "key": key, "engine": str(engines[key]),
                                   "workdir": str(folder / f"load-{key}"), "check": False, "backend": backends[key],
                                   "backend_options": {"device": "cuda"}}, key)
                if not ready.get("ready"):
                    raise RuntimeError(f"{key} did not load: {ready.get('error')}")
        keys = list(backends)
        times: dict[str, list[float]] = {key: [] for key in keys}
        from enginewright.worker.batch import round_order
        for index in range(rounds):  # each round interleaved in blocks, in the worker's order
            order = round_order(keys, index)
            for key, ms in zip(order, ask(proc, {"op": "interleave", "keys": order}, "interleave")["ms"]):
                times[key].append(ms)
        return times
    finally:
        close(proc)


def _cell(values: dict, key: str, digits: int) -> str:
    return f"{values[key]:.{digits}f}" if key in values else "failed"


def table(results: list[dict]) -> str:
    keys = list(dict.fromkeys(k for r in results for k in r["median_ms"]))
    layouts = any("layout" in r for r in results)  # (results from before layouts had none)
    head = "| workload (fp16) | route | " + ("layout | " if layouts else "") + \
        " | ".join(f"`{k}` ms" for k in keys) + " | " + \
        " | ".join(f"`{k}` / `compile`" for k in keys if k != "compile") + " |"
    lines = [head, "|" + " --- |" * (2 + layouts + 2 * len(keys) - 1)]
    for r in results:
        lines.append(f"| {r['workload']} | {r['route']} | " + (f"{r.get('layout', 'processes')} | " if layouts else "")
                     + " | ".join(_cell(r["median_ms"], k, 4) for k in keys)
                     + " | " + " | ".join(_cell(r["ratio_to_compile"], k, 3) for k in keys if k != "compile") + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workloads", default="mlp,block")
    parser.add_argument("--routes", default="default,cudagraphs,eager")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--layouts", default="shared,processes",
                        help="shared: every key loaded into one serving process (the product's layout); "
                             "processes: each key in a process of its own")
    parser.add_argument("--variant", action="append", default=[], help="NAME=module:Class, built and served like engine")
    args = parser.parse_args()
    import torch
    from workloads import prepare
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "operator"), str(REPO / "bench"),
                                                os.environ.get("PYTHONPATH", "")])
    variants = {"engine": "inductor", **dict(v.split("=", 1) for v in args.variant)}
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def say(text):
        print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)

    results = []
    for name in args.workloads.split(","):
        files = prepare(workloads()[name], args.out / name / "data", "cuda")
        for route_name in args.routes.split(","):
            for result in run_route(name, route_name, files, variants, args.rounds, args.out / name, say,
                                    args.layouts.split(",")):
                results.append(result)
                say(f"{name}/{route_name} ({result['layout']}): " + ", ".join(
                    f"{k} {v:.4f} ms ({result['ratio_to_compile'][k]:.3f}x)" for k, v in result["median_ms"].items()))
            (args.out / "overhead.json").write_text(json.dumps(
                {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "timing": TIMING,
                 "rounds": args.rounds, "variants": variants, "results": results}, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
