"""Per-call time of an Inductor engine as the product serves it, against `torch.compile` on the
original module with the same options, side by side in one run, per workload and route.

    python bench/engine_overhead.py --out OUT [--workloads mlp,block] [--routes default,cudagraphs,eager]
        [--rounds 9] [--layouts shared,processes] [--variant NAME=module:Class ...] [--device cuda|cpu]

For every workload (fp16 on a GPU, launch-bound; float32 on `--device cpu`) and route:
- `engine`: built by the product's build child (`worker.measure.build`) and served by the
  product's serving process (`worker.server.Server`, the code that times every route), so what is
  timed is what a consumer of the engine runs;
- `compile`: `torch.compile(module, options=<the route's options>, dynamic=False)` on the original
  module, called in a loop under one `torch.inference_mode()` (as a user would serve it), served by
  the same serving process and timed by CUDA events (the host clock on CPU);
- `compile-unfused`: the same with PyTorch's fused fast path of `nn.TransformerEncoderLayer` switched
  off for its calls (`torch.backends.mha.set_fastpath_enabled(False)`): under inference mode
  `torch.compile` of the encoder layer runs ONE fused native op (`aten._transformer_encoder_layer_fwd`,
  traced from the fast path), where the exported program the engine is built from holds the layer's
  unfused ops (export traces with grad on). `compile-unfused` compiles those same ops: the engine's
  overhead is its ratio to `compile-unfused`; its ratio to `compile` adds the difference of programs
  (for workloads without such a layer the two baselines are the same program);
- any `--variant`: another backend class, built and served the same way as `engine`.
`--layouts`: `shared` loads every key into one serving process and interleaves each round of them
in blocks, as the product times engines against each other (the compiled module and the engine's
flat graph are different code, so neither adds guards to the other's calls); `processes` holds each
key in a process of its own, timed one at a time in rotating order, as before (two processes
holding the same engine run lastingly apart on the H200: bench/process_offsets.py). `--rounds`
rounds; a round is about 0.3 s of back-to-back calls (throughput). `eager` compares the engine's
compile=false route with the original module called eagerly; `cudagraphs` is skipped on CPU. The
ratio is the median over rounds of the per-round ratio to `compile`. Results go to
OUT/overhead.json as each route finishes, and a table to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

from enginewright.backends.inductor import InductorBackend  # noqa: E402  (imports no torch)

ROUTES = {"default": {}, "cudagraphs": {"triton.cudagraphs": "true"}, "eager": {"compile": "false"}}
# throughput: calls back to back on inputs on the device, CUDA events around them (the method)
TIMING = {"objective": "throughput", "warmup_iterations": 50, "round_seconds": 0.3, "min_rounds": 2, "max_rounds": 2}


def _mlp():
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)
    )


def _block():
    import torch

    return torch.nn.TransformerEncoderLayer(
        d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True, dropout=0.0, norm_first=True
    )


def _tiny():
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64), torch.nn.LayerNorm(64)
    )


def workloads():
    from workloads import Workload

    return {
        w.name: w
        for w in (
            Workload("mlp", _mlp, (256, 1024), "MLP 1024-4096-1024 + LayerNorm, 256 rows"),
            Workload("tiny", _tiny, (16, 64), "MLP 64-256-64 + LayerNorm, 16 rows: on CPU the per-call overhead"),
            Workload("block", _block, (8, 256, 1024), "transformer encoder layer d=1024 h=16 ff=4096, 8x256 tokens"),
        )
    }


class TorchCompileBaseline:
    """A 'backend' whose engine names a workload and a route: load() compiles the original module with
    torch.compile, as a user would in their own process. Build writes that description only."""

    name = "torch.compile"
    engine_suffix = ".json"

    def __init__(self, device: str = "cuda", **_):
        self.device = device

    def versions(self):
        from enginewright.backends.inductor import InductorBackend

        return InductorBackend(device=self.device).versions()

    def load(self, engine: bytes, workdir: Path):
        import torch
        import torch._inductor.config as config

        from enginewright.backends.base import Runner
        from enginewright.backends.inductor import route_options

        spec, device = json.loads(engine), self.device
        fused = spec.get("fused", True)  # False: PyTorch's fused encoder-layer fast path switched off
        torch.manual_seed(0)
        module = workloads()[spec["workload"]].make().eval().to(device)
        if device == "cuda":
            module = module.half()
        options = route_options(config, spec["route"])
        eager = spec["route"].get("compile") == "false"  # the user's own eager module
        compiled = module if eager else torch.compile(module, backend="inductor", options=options, dynamic=False)

        class CompiledRunner(Runner):
            def prepare(self, inputs):
                x = torch.from_numpy(next(iter(inputs.values()))).to(device)
                return x.half() if device == "cuda" else x

            def run(self, inputs):
                with torch.inference_mode(), _fastpath(torch, fused):
                    return {"output": compiled(self.prepare(inputs)).float().cpu().numpy()}

            def timed_calls(self, objective, inputs, count):
                """Calls back to back on inputs in place under one inference mode; CUDA events on a
                GPU, the host clock on CPU."""
                if objective != "throughput":
                    raise ValueError("this baseline times throughput only")
                x = self.prepare(inputs)
                with torch.inference_mode(), _fastpath(torch, fused):
                    if device != "cuda":
                        started = time.perf_counter()
                        for _ in range(count):
                            compiled(x)
                        return (time.perf_counter() - started) * 1000.0
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    start.record()
                    for _ in range(count):
                        compiled(x)
                    end.record()
                    end.synchronize()
                return start.elapsed_time(end)

        return CompiledRunner()


@contextmanager
def _fastpath(torch, enabled: bool):
    """PyTorch's fused fast path of `nn.TransformerEncoderLayer` (and `nn.MultiheadAttention`) set
    for a baseline's calls and the process's setting put back after, so two baselines in one serving
    process each keep their own. Under inference mode `torch.compile` of the encoder layer traces the
    fused path as ONE native op (`aten._transformer_encoder_layer_fwd`), while the exported program
    an engine is built from holds the layer's unfused ops: a different program. `compile-unfused` is
    `torch.compile` of the same unfused ops as the engine."""
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


class WithExportHook(InductorBackend):
    """The engine as loaded before it dropped torch.export's forward hook (`_flat_program`): a
    no-op hook registered as export registers its own (`always_call`), for a before/after in one
    run (`--variant hooked=engine_overhead:WithExportHook`)."""

    def _runner(self, torch, program, options, device, dtype, eager=False):
        runner = super()._runner(torch, program, options, device, dtype, eager)
        module = runner.compiled if eager else runner.compiled._orig_mod
        module.register_forward_hook(lambda *args, **kwargs: None, always_call=True)
        return runner


def build(bench, backend: str, route: dict, folder: Path) -> tuple[Path, float]:
    """One engine built by the product's build child (`worker.measure.build`); its path and build seconds."""
    from enginewright.api.routes import Route
    from enginewright.worker.measure import build as build_route

    ctx = replace(bench.context(backend), workdir=folder)
    built = build_route(ctx, Route.of(route), "bench", "bench")
    if built.engine_path is None:
        raise RuntimeError(f"build failed: {built.entry.error}")
    return built.engine_path, built.entry.build_seconds


def run_route(bench, route_name: str, variants: dict[str, str], rounds: int, say, layouts: list[str]) -> list[dict]:
    workload = bench.workload.name
    route = ROUTES[route_name]
    base = bench.out / f"{workload}-{route_name}"
    base.mkdir(parents=True, exist_ok=True)
    spec = base / "compile.json"
    spec.write_text(json.dumps({"workload": workload, "route": route}))
    unfused = base / "compile-unfused.json"
    unfused.write_text(json.dumps({"workload": workload, "route": route, "fused": False}))

    def attempt(variant):
        try:
            return build(bench, variants[variant], route, base / variant)
        except Exception as exc:  # reported, and the other variants still run
            return exc

    with ThreadPoolExecutor(len(variants)) as pool:
        outcomes = dict(zip(variants, pool.map(attempt, variants)))
    failed = {v: str(o)[:500] for v, o in outcomes.items() if isinstance(o, Exception)}
    builds = {v: o for v, o in outcomes.items() if v not in failed}
    say(
        f"{workload}/{route_name}: built "
        + ", ".join(f"{v} {s:.0f}s" for v, (_, s) in builds.items())
        + "".join(f"; {v} FAILED: {why}" for v, why in failed.items())
    )
    baseline = "engine_overhead:TorchCompileBaseline"
    backends = {"compile": baseline, "compile-unfused": baseline, **{v: variants[v] for v in builds}}
    engines = {"compile": spec, "compile-unfused": unfused, **{v: path for v, (path, _) in builds.items()}}
    results = []
    for layout in layouts:
        timer = time_shared if layout == "shared" else time_processes
        times = timer(bench, backends, engines, base / layout, rounds)
        keys = list(times)
        ratios = {key: statistics.median(t / c for t, c in zip(times[key], times["compile"])) for key in keys}
        unfused_ratios = {
            key: statistics.median(t / c for t, c in zip(times[key], times["compile-unfused"])) for key in keys
        }
        results.append(
            {
                "workload": workload,
                "route": route_name,
                "layout": layout,
                "rounds": times,
                "median_ms": {key: statistics.median(times[key]) for key in keys},
                "ratio_to_compile": ratios,
                "ratio_to_unfused": unfused_ratios,
                "build_seconds": {v: round(s, 1) for v, (_, s) in builds.items()},
                "failed": failed,
            }
        )
    return results


def server(bench, backend: str, key: str, engine: Path, folder: Path):
    """A serving process of the product (`worker.server.Server`) holding `engine` as `key`."""
    from enginewright.worker.server import Server

    return Server(bench.context(backend, {"device": bench.device}), key, engine, folder, references=False)


def time_processes(bench, backends: dict, engines: dict, folder: Path, rounds: int) -> dict[str, list[float]]:
    """Every key held in a serving process of its own (the product's layout before engines shared
    one), timed one at a time, the order shifted each round."""
    servers = {key: server(bench, backends[key], key, engines[key], folder / key) for key in backends}
    try:
        for held in servers.values():
            held.start(600)
        keys = list(servers)
        times: dict[str, list[float]] = {key: [] for key in keys}
        for index in range(rounds):
            shift = index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                times[key].append(servers[key].time(600))
        return times
    finally:
        for held in servers.values():
            held.close()


def time_shared(bench, backends: dict, engines: dict, folder: Path, rounds: int) -> dict[str, list[float]]:
    """Every key loaded into one serving process, each round of them interleaved in blocks on its
    thread, in the worker's order (`round_order`): the product's layout."""
    from enginewright.measure.paired import round_order

    held = server(bench, backends["compile"], "compile", engines["compile"], folder)
    try:
        held.start(600)
        for key in backends:
            if key != "compile":
                held.add(
                    key,
                    engines[key],
                    folder / f"load-{key}",
                    600,
                    check=False,
                    backend=backends[key],
                    backend_options={"device": bench.device},
                )
        keys = list(backends)
        times: dict[str, list[float]] = {key: [] for key in keys}
        for index in range(rounds):
            order = round_order(keys, index)
            for key, ms in zip(order, held.interleave(order, 600)):
                times[key].append(ms)
        return times
    finally:
        held.close()


def _cell(values: dict, key: str, digits: int) -> str:
    return f"{values[key]:.{digits}f}" if key in values else "failed"


def table(results: list[dict], workload: str = "workload (fp16)") -> str:
    keys = list(dict.fromkeys(k for r in results for k in r["median_ms"]))
    layouts = any("layout" in r for r in results)  # (results from before layouts had none)
    # (results from before the compile-unfused baseline have no such columns)
    against = [k for k in keys if k not in UNFUSED_SKIP] if any("ratio_to_unfused" in r for r in results) else []
    head = (
        f"| {workload} | route | "
        + ("layout | " if layouts else "")
        + " | ".join(f"`{k}` ms" for k in keys)
        + " | "
        + " | ".join(f"`{k}` / `compile`" for k in keys if k != "compile")
        + "".join(f" | `{k}` / `compile-unfused`" for k in against)
        + " |"
    )
    lines = [head, "|" + " --- |" * (2 + layouts + 2 * len(keys) - 1 + len(against))]
    for r in results:
        lines.append(
            f"| {r['workload']} | {r['route']} | "
            + (f"{r.get('layout', 'processes')} | " if layouts else "")
            + " | ".join(_cell(r["median_ms"], k, 4) for k in keys)
            + " | "
            + " | ".join(_cell(r["ratio_to_compile"], k, 3) for k in keys if k != "compile")
            + "".join(f" | {_cell(r.get('ratio_to_unfused', {}), k, 3)}" for k in against)
            + " |"
        )
    return "\n".join(lines)


UNFUSED_SKIP = ("compile", "compile-unfused")  # no column of a baseline over itself or the other baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workloads", default="mlp,block")
    parser.add_argument("--routes", default="default,cudagraphs,eager")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--layouts",
        default="shared,processes",
        help="shared: every key loaded into one serving process (the product's layout); "
        "processes: each key in a process of its own",
    )
    parser.add_argument(
        "--variant", action="append", default=[], help="NAME=module:Class, built and served like engine"
    )
    parser.add_argument("--device", default="cuda", help="cpu: float32 modules, host clock (no CUDA graphs)")
    args = parser.parse_args()
    import torch

    from enginewright.api.models import Timing
    from workloads import setup

    variants = {"engine": "inductor", **dict(v.split("=", 1) for v in args.variant)}
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    results = []
    for name in args.workloads.split(","):
        bench = setup(args.out / name, workloads()[name], args.device, TIMING["objective"], REPO)
        bench.timing, bench.began = Timing(**TIMING), began
        for route_name in args.routes.split(","):
            if args.device != "cuda" and ROUTES[route_name].get("triton.cudagraphs"):
                continue  # CUDA graphs need a GPU
            for result in run_route(bench, route_name, variants, args.rounds, bench.say, args.layouts.split(",")):
                results.append(result)
                bench.say(
                    f"{name}/{route_name} ({result['layout']}): "
                    + ", ".join(
                        f"{k} {v:.4f} ms ({result['ratio_to_compile'][k]:.3f}x)" for k, v in result["median_ms"].items()
                    )
                )
            (args.out / "overhead.json").write_text(
                json.dumps(
                    {
                        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                        "device": args.device,
                        "torch": torch.__version__,
                        "timing": TIMING,
                        "rounds": args.rounds,
                        "variants": variants,
                        "results": results,
                    },
                    indent=1,
                )
            )
    print(table(results, "workload (fp16)" if args.device == "cuda" else "workload (float32, CPU)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
