"""What measuring costs: `enginewright tune --search mixed` against a plain 16-configuration sweep,
side by side in one run, on a CPU text detector (issue 11, item 6).

    python bench/measure_cost.py --out out/measure-cost                  # naive sweep + this checkout's tune
    python bench/measure_cost.py --out out/measure-cost \\
        --variant before=/tmp/ew-before/operator --variant after=operator   # two versions of tune's code

Steps, each written to OUT/results.json as soon as it is known (a half-finished run keeps what it
measured):
  1. the model (`bench/cpu_models.py`: a DB text detector shaped like PP-OCRv4 det, 1x3xSIZExSIZE)
     and two reference pairs (inputs, outputs of ONNX Runtime with its default settings);
  2. the naive sweep: every combination of the four knobs in KNOBS (16), each a plain
     onnxruntime.InferenceSession in this process, WARMUP untimed runs, RUNS timed runs, median;
  3. per variant, `python -m enginewright tune ... --search mixed` over the same four knobs, with
     that variant's `operator/` first on PYTHONPATH, into a fresh directory: its wall seconds, the
     build/measure seconds and winner of the summary.json it writes, the seconds of its cache
     entries, and a timeline of its progress lines;
  4. per variant: tune wall / naive wall, and whether the winners agree.

The whole benchmark (children included) is pinned to `--cores` CPUs (default 2, on distinct
physical cores when the machine has them) to mimic a 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The knobs both sides sweep: (onnxruntime backend knob name, default value, the other value).
# The defaults are ONNX Runtime's (and the backend's `_KNOBS` defaults).
KNOBS = (
    ("graph_optimization_level", "all", "basic"),
    ("execution_mode", "sequential", "parallel"),
    ("enable_mem_pattern", "1", "0"),
    ("session.intra_op.allow_spinning", "1", "0"),
)
METRIC, THRESHOLD = "cosine", 1e-3  # accuracy check of tune (the README's example values)
NOISE_MARGIN = 0.03  # tune's default --noise-margin; used for "agree" when summary.json lacks it


# ----------------------------------------------------------------------------- pure helpers
def canonical(config: dict[str, str], defaults: dict[str, str]) -> str:
    """The route string of a configuration as tune writes it: its non-default knobs, sorted,
    `-name=value` joined by spaces; '' for the default."""
    return " ".join(f"-{k}={v}" for k, v in sorted(config.items()) if defaults.get(k) != v)


def parse_route(route: str) -> dict[str, str]:
    """`-a=x -b=y` -> {'a': 'x', 'b': 'y'} (inverse of `canonical` for the non-default knobs)."""
    out = {}
    for token in route.split():
        name, _, value = token.lstrip("-").partition("=")
        out[name] = value
    return out


def sweep_configs(knobs=KNOBS) -> list[dict[str, str]]:
    """Every combination of the knobs' two values, the all-default one first."""
    names = [k[0] for k in knobs]
    return [dict(zip(names, values)) for values in itertools.product(*[(d, o) for _, d, o in knobs])]


def full_config(route_knobs: dict[str, str], knobs=KNOBS) -> dict[str, str]:
    """A route's knobs completed with the defaults of the swept knobs they leave out."""
    return {**{name: default for name, default, _ in knobs}, **route_knobs}


def agreement(naive_ms: dict[str, float], tune_route: str, margin: float) -> dict:
    """Do the naive sweep and tune pick the same configuration? `naive_ms`: the sweep's median per
    route string. Exact when tune's winner is the sweep's fastest; else `within_margin` when the
    sweep timed tune's winner within `margin` of its fastest (tune keeps the default unless a
    route beats it by more than its noise margin, so a near-tie can go either way)."""
    best = min(naive_ms, key=naive_ms.get)
    mine = naive_ms.get(tune_route)
    ratio = mine / naive_ms[best] if mine is not None else None
    return {
        "naive_best": best,
        "naive_best_ms": naive_ms[best],
        "tune_winner": tune_route,
        "naive_ms_of_tune_winner": mine,
        "naive_default_ms": naive_ms.get(""),
        "tune_winner_vs_naive_best": round(ratio, 4) if ratio else None,
        "margin": margin,
        "exact": best == tune_route,
        "agree": ratio is not None and ratio <= 1 + margin,
    }


def parse_cpu_list(text: str) -> list[int]:
    """Linux CPU list syntax: '0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus = []
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def pick_cpus(allowed: list[int], count: int, siblings: dict[int, set[int]]) -> list[int]:
    """The first `count` allowed CPUs, one per physical core (no two SMT siblings) while there are
    enough cores, then the lowest remaining CPUs."""
    chosen: list[int] = []
    for cpu in sorted(allowed):
        if len(chosen) < count and not (siblings.get(cpu, {cpu}) - {cpu}) & set(chosen):
            chosen.append(cpu)
    for cpu in sorted(allowed):
        if len(chosen) < count and cpu not in chosen:
            chosen.append(cpu)
    return sorted(chosen)


def snake_keys(value):
    """A cache entry as plain data with snake_case keys (entries are written in camelCase)."""
    if isinstance(value, dict):
        return {re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", k).lower(): snake_keys(v) for k, v in value.items()}
    return value


def route_seconds(entry: dict) -> float | None:
    """Wall seconds of one cache entry, build to end of measurement (its timestamps have 1 s resolution)."""
    try:
        start = datetime.fromisoformat(entry["started_at"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(entry["finished_at"].replace("Z", "+00:00"))
    except (KeyError, AttributeError, TypeError, ValueError):
        return None
    return (end - start).total_seconds()


def phases(timeline: list[tuple[float, str]], wall: float, summary_at: float | None = None) -> dict[str, float]:
    """Seconds of tune's phases from its output lines (seconds since launch, line): `stage1` until
    the first stage-2 line, `stage2` until the confirmation line, `confirm` until summary.json was
    written (`summary_at`, seconds since launch), `report` until the first line after the last
    `[bar] n/m` progress line (the results table, printed once the report is rendered), `finish` the
    rest (that table, the interpreter's exit). Absent phases are left out."""
    progress = [i for i, (_, line) in enumerate(timeline) if PROGRESS.match(line)]
    marks = {"report": summary_at} if summary_at is not None and 0 <= summary_at <= wall else {}
    for t, line in timeline:
        if "stage2" not in marks and re.search(r"\[stage2[^\]]*\]", line):
            marks["stage2"] = t
        if "confirm" not in marks and "[confirm]" in line:
            marks["confirm"] = t
    if progress and progress[-1] + 1 < len(timeline):
        marks["finish"] = timeline[progress[-1] + 1][0]
    order = [("stage1", 0.0)] + sorted(marks.items(), key=lambda kv: kv[1])
    return {name: round(end - start, 2) for (name, start), (_, end) in zip(order, order[1:] + [("end", wall)])}


PROGRESS = re.compile(r"\[[# ]*\]\s+\d+/\d+")


# ----------------------------------------------------------------------------- results file
class Results:
    """results.json, rewritten whole (atomically) after every step."""

    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        tmp.replace(self.path)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# ----------------------------------------------------------------------------- machine
def pin(count: int) -> dict:
    """Pin this process (and so every child) to `count` CPUs; returns what was chosen."""
    allowed = sorted(os.sched_getaffinity(0))
    siblings = {}
    for cpu in allowed:
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        siblings[cpu] = set(parse_cpu_list(path.read_text())) if path.exists() else {cpu}
    chosen = pick_cpus(allowed, count, siblings) if count > 0 else allowed
    os.sched_setaffinity(0, chosen)
    return {
        "allowed": len(allowed),
        "pinned": chosen,
        "smt_siblings_among_pinned": any((siblings[c] - {c}) & set(chosen) for c in chosen),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ----------------------------------------------------------------------------- 1. model
def make_model(folder: Path, size: int, width: float, neck: int, pairs: int) -> dict:
    import numpy as np
    import onnx
    import onnxruntime as ort

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cpu_models import db_text_detector, image_like_inputs

    folder.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    model = db_text_detector(size, width=width, neck=neck)
    path = folder / "db_text_detector.onnx"
    onnx.save(model, str(path))
    built = time.monotonic() - began
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # default settings
    names = [o.name for o in session.get_outputs()]
    inputs, references = [], []
    for index, feed in enumerate(image_like_inputs(size, pairs)):
        np.savez(folder / f"inputs-{index}.npz", **feed)
        np.savez(folder / f"references-{index}.npz", **dict(zip(names, session.run(names, feed))))
        inputs.append(folder / f"inputs-{index}.npz")
        references.append(folder / f"references-{index}.npz")
    params = sum(int(np.prod(i.dims)) for i in model.graph.initializer)
    return {
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "size": size,
        "width": width,
        "neck": neck,
        "input": [1, 3, size, size],
        "nodes": len(model.graph.node),
        "parameters": params,
        "bytes": path.stat().st_size,
        "build_seconds": round(built, 2),
        "reference_seconds": round(time.monotonic() - began - built, 2),
        "inputs": [str(p) for p in inputs],
        "references": [str(p) for p in references],
    }


# ----------------------------------------------------------------------------- 2. naive sweep
def session_options(config: dict[str, str]):
    """A plain SessionOptions for one configuration of the backend's knob names."""
    import onnxruntime as ort

    levels = {
        "disable": "ORT_DISABLE_ALL",
        "basic": "ORT_ENABLE_BASIC",
        "extended": "ORT_ENABLE_EXTENDED",
        "all": "ORT_ENABLE_ALL",
    }
    options = ort.SessionOptions()
    for name, value in config.items():
        if name == "graph_optimization_level":
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, levels[value])
        elif name == "execution_mode":
            options.execution_mode = getattr(ort.ExecutionMode, f"ORT_{value.upper()}")
        elif name in ("intra_op_num_threads", "inter_op_num_threads"):
            setattr(options, name, int(value))
        elif name in ("enable_mem_pattern", "enable_cpu_mem_arena"):
            setattr(options, name, value == "1")
        else:
            options.add_session_config_entry(name, value)
    return options


def naive_sweep(model: dict, warmup: int, runs: int, results: Results) -> dict:
    import numpy as np
    import onnxruntime as ort

    feed = dict(np.load(model["inputs"][0]))
    reference = dict(np.load(model["references"][0]))
    defaults = {name: default for name, default, _ in KNOBS}
    section = results.data["naive"] = {"status": "running", "warmup": warmup, "runs": runs, "configs": []}
    began, cpu_began = time.monotonic(), time.process_time()
    for config in sweep_configs():
        t0 = time.monotonic()
        session = ort.InferenceSession(model["path"], session_options(config), providers=["CPUExecutionProvider"])
        created = time.monotonic() - t0
        names = [o.name for o in session.get_outputs()]
        first = dict(zip(names, session.run(names, feed)))
        for _ in range(warmup - 1):
            session.run(names, feed)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            session.run(names, feed)
            times.append((time.perf_counter() - t) * 1000)
        del session
        route = canonical(config, defaults)
        section["configs"].append(
            {
                "route": route,
                "knobs": config,
                "median_ms": round(statistics.median(times), 3),
                "min_ms": round(min(times), 3),
                "mean_ms": round(statistics.fmean(times), 3),
                "session_seconds": round(created, 3),
                "seconds": round(time.monotonic() - t0, 3),
                "max_abs_diff": float(max(np.max(np.abs(first[n] - reference[n])) for n in names)),
                "times_ms": [round(t, 3) for t in times],
            }
        )
        section["wall_seconds"] = round(time.monotonic() - began, 2)
        results.save()
        print(f"  naive {route or '(default)':<75} {statistics.median(times):8.2f} ms", flush=True)
    best = min(section["configs"], key=lambda c: c["median_ms"])
    section.update(
        status="done",
        wall_seconds=round(time.monotonic() - began, 2),
        cpu_seconds=round(time.process_time() - cpu_began, 2),  # every thread of this process
        best=best["route"],
        best_ms=best["median_ms"],
        default_ms=section["configs"][0]["median_ms"],
    )
    results.save()
    return section


# ----------------------------------------------------------------------------- 3. tune
def tune_command(python: str, model: dict, out: Path, extra: list[str]) -> list[str]:
    """`enginewright tune`, mixed search over KNOBS, accuracy against the reference pairs, every
    timing option at its default. `extra`: more arguments as given (--tune-arg)."""
    cmd = [
        python,
        "-m",
        "enginewright",
        "tune",
        model["path"],
        "--backend",
        "onnxruntime",
        "--search",
        "mixed",
        "--metric",
        METRIC,
        "--threshold",
        str(THRESHOLD),
        "--out",
        str(out),
    ]
    for inputs, references in zip(model["inputs"], model["references"]):
        cmd += ["--inputs", inputs, "--references", references]
    for name, _, other in KNOBS:
        cmd += ["--knob", f"{name}={other}"]
    return cmd + list(extra)


def code_identity(path: Path) -> dict:
    """Where a variant's code is: its git commit when it is a checkout, and a digest of its .py files."""
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*.py")):
        if "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    out = {"path": str(path), "py_sha256": digest.hexdigest()[:16]}
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=10
        )
        if head.returncode == 0:
            out["git"] = head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def run_tune(label: str, code: Path, model: dict, out: Path, extra: list[str], results: Results) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    which = subprocess.run(
        [sys.executable, "-c", "import enginewright; print(enginewright.__file__)"],
        env=env,
        cwd=out,
        capture_output=True,
        text=True,
    )
    module = which.stdout.strip()
    if not module.startswith(str(code.resolve())):
        raise SystemExit(
            f"variant {label}: `import enginewright` with {code} first on PYTHONPATH gives "
            f"{module or which.stderr.strip()[-500:]}, not that copy"
        )
    tune_out = out / "tune-out"
    cmd = tune_command(sys.executable, model, tune_out, extra)
    section = results.data["tune"][label] = {
        "status": "running",
        "code": code_identity(code),
        "module": module,
        "command": cmd,
        "timeline": [],
    }
    results.save()
    print(f"tune [{label}]: {' '.join(cmd)}", flush=True)
    began, began_epoch, cpu_began = time.monotonic(), time.time(), children_cpu_seconds()
    last_save = began
    with open(out / "tune.log", "w") as log:
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=out,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        try:
            for line in proc.stdout:
                t = round(time.monotonic() - began, 2)
                log.write(f"{t:9.2f} {line}")
                section["timeline"].append([t, line.rstrip()[:400]])
                print(f"  [{label} {t:7.1f}s] {line.rstrip()}", flush=True)
                if time.monotonic() - last_save > 2:
                    section["wall_seconds_so_far"] = t
                    results.save()
                    last_save = time.monotonic()
            returncode = proc.wait()
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): keep what was seen, stop tune
            section.update(status="interrupted", wall_seconds_so_far=round(time.monotonic() - began, 2))
            results.save()
            raise
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    wall = round(time.monotonic() - began, 2)
    summary = tune_out / "summary.json"
    summary_at = summary.stat().st_mtime - began_epoch if summary.exists() else None
    section.update(
        returncode=returncode,
        wall_seconds=wall,
        cpu_seconds=round(children_cpu_seconds() - cpu_began, 2),  # tune and every process it waited for
        phases=phases(section["timeline"], wall, summary_at),
    )
    section.pop("wall_seconds_so_far", None)
    section.update(read_outputs(tune_out))
    section["status"] = "done" if returncode == 0 else "failed"
    results.save()
    return section


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's ended, waited-for children (and theirs, when they
    waited for them: tune reaps every build and serving process it starts)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def read_outputs(tune_out: Path) -> dict:
    """What tune wrote: summary.json (every *_seconds field, the winner, the whole summary) and the
    cache entries (seconds per stage)."""
    out: dict = {}
    summary_path = tune_out / "summary.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        out["summary_seconds"] = {k: v for k, v in summary.items() if k.endswith("_seconds")}
        out["winner"] = {
            k: summary.get(k)
            for k in (
                "winner_id",
                "winner_route",
                "winner_ms",
                "default_ms",
                "speedup",
                "decision",
                "confirmed",
                "noise_margin",
            )
        }
        out["summary"] = {k: v for k, v in summary.items() if k not in ("options",)}
    entries = []
    for path in sorted(tune_out.rglob("entries/*.json")):
        try:
            entries.append(snake_keys(json.loads(path.read_text())))
        except ValueError:
            continue
    stages: dict[str, dict] = {}
    for entry in entries:
        stage = stages.setdefault(entry.get("stage", "?"), {"routes": 0})
        stage["routes"] += 1
        timing = entry.get("timing") or {}
        seconds = {k: v for k, v in entry.items() if k.endswith("_seconds") and isinstance(v, (int, float))}
        seconds["load_seconds"] = (entry.get("load_info") or {}).get("load_seconds") or 0
        if timing.get("mean_ms") is not None and timing.get("n"):
            seconds["timed_seconds"] = timing["mean_ms"] * timing["n"] / 1000  # the timed runs alone
            stage["timed_runs"] = stage.get("timed_runs", 0) + timing["n"]
        seconds["route_wall_seconds"] = route_seconds(entry) or 0
        for key, value in seconds.items():
            stage[key] = round(stage.get(key, 0) + value, 3)
        # paired rounds (the default's own: min_rounds): how many the host's noise made the routes need
        stage["rounds"] = stage.get("rounds", 0) + ((entry.get("paired") or {}).get("rounds") or 0)
    out["entries"] = {
        "count": len(entries),
        "by_stage": stages,
        "routes": [
            {
                "route": e.get("route"),
                "stage": e.get("stage"),
                "outcome": e.get("outcome"),
                "median_ms": (e.get("timing") or {}).get("median_ms"),
                "n": (e.get("timing") or {}).get("n"),
                "rounds": (e.get("paired") or {}).get("rounds"),
                **{k: v for k, v in e.items() if k.endswith("_seconds")},
                "wall_seconds": route_seconds(e),
            }
            for e in entries
        ],
    }
    confirm = tune_out / "confirm.json"
    if confirm.exists():
        rounds = json.loads(confirm.read_text()).get("rounds", {})
        out["confirmation"] = {"engines": len(rounds), "rounds": max((len(v) for v in rounds.values()), default=0)}
    return out


# ----------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(REPO / "out" / "measure-cost"), help="results folder (results.json)")
    p.add_argument("--cores", type=int, default=2, help="CPUs the whole benchmark is pinned to (0: no pinning)")
    p.add_argument(
        "--enginewright",
        default=str(REPO / "operator"),
        help="the operator/ folder whose code tune runs (first on its PYTHONPATH)",
    )
    p.add_argument("--label", default="after", help="label of that tune variant in results.json")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="a tune run with the code of PATH (an operator/ folder); repeat to measure several "
        "versions in one run (replaces --enginewright/--label)",
    )
    p.add_argument("--skip-naive", action="store_true", help="no naive sweep")
    p.add_argument("--skip-tune", action="store_true", help="no tune run (model + naive sweep only)")
    p.add_argument("--size", type=int, default=640, help="input height = width (a multiple of 32)")
    p.add_argument("--width", type=float, default=1.0, help="backbone width multiplier of the model")
    p.add_argument("--neck", type=int, default=128, help="FPN channels of the model")
    p.add_argument("--pairs", type=int, default=2, help="reference pairs")
    p.add_argument("--warmup", type=int, default=2, help="naive sweep: untimed runs per configuration")
    p.add_argument("--runs", type=int, default=15, help="naive sweep: timed runs per configuration")
    p.add_argument(
        "--tune-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every tune command, e.g. --tune-arg=--noise-margin=0.05",
    )
    args = p.parse_args(argv)
    variants = []
    for item in args.variant or [f"{args.label}={args.enginewright}"]:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            p.error(f"--variant expects LABEL=PATH, got {item!r}")
        code = Path(path).resolve()
        if not (code / "enginewright" / "__init__.py").exists():
            p.error(f"--variant {label}: {code} has no enginewright/ package (give the operator/ folder)")
        variants.append((label, code))
    if len({label for label, _ in variants}) != len(variants):
        p.error("--variant labels must differ")
    args.variants = variants
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so results.json records the interruption
    began = time.monotonic()
    machine = pin(args.cores)  # first: every session, thread pool and child inherits it
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    import onnxruntime as ort

    results = Results(
        out / "results.json",
        {
            "benchmark": "measure_cost",
            "started_at": now(),
            "argv": sys.argv[1:],
            "machine": {
                **machine,
                "cpu": cpu_model(),
                "python": platform.python_version(),
                "onnxruntime": ort.__version__,
                "host": platform.node(),
            },
            "knobs": [{"name": n, "default": d, "other": o} for n, d, o in KNOBS],
            "variants": {label: str(code) for label, code in args.variants},
            "tune": {},
            "comparison": {},
        },
    )
    print(f"pinned to CPUs {machine['pinned']} of {machine['allowed']} ({results.data['machine']['cpu']})")

    model = results.data["model"] = make_model(out / "model", args.size, args.width, args.neck, args.pairs)
    results.save()
    print(
        f"model: {model['path']} ({model['nodes']} nodes, {model['parameters'] / 1e6:.2f} M parameters, "
        f"input {model['input']})",
        flush=True,
    )

    naive = None
    if not args.skip_naive:
        print(
            f"naive sweep: {len(sweep_configs())} configurations x ({args.warmup} warmup + {args.runs} timed runs)",
            flush=True,
        )
        naive = naive_sweep(model, args.warmup, args.runs, results)
    if not args.skip_tune:
        for label, code in args.variants:
            run_tune(label, code, model, out / f"tune-{label}", args.tune_arg, results)
            compare(label, naive, results)

    results.data["total_seconds"] = round(time.monotonic() - began, 2)
    results.data["finished_at"] = now()
    results.save()
    print()
    report(results.data)
    print(f"\nresults: {results.path}")
    return 0 if all(t.get("status") == "done" for t in results.data["tune"].values()) else 1


def compare(label: str, naive: dict | None, results: Results) -> None:
    tune = results.data["tune"][label]
    row = {}
    if naive and tune.get("wall_seconds"):
        row["wall_ratio"] = round(tune["wall_seconds"] / naive["wall_seconds"], 2)
    if naive and tune.get("cpu_seconds") and naive.get("cpu_seconds"):
        row["cpu_ratio"] = round(tune["cpu_seconds"] / naive["cpu_seconds"], 2)
    winner = tune.get("winner")
    if naive and winner and winner.get("winner_route") is not None:
        defaults = {name: default for name, default, _ in KNOBS}
        route = canonical(full_config(parse_route(winner["winner_route"])), defaults)
        margin = winner.get("noise_margin") or NOISE_MARGIN
        naive_ms = {c["route"]: c["median_ms"] for c in naive["configs"]}
        row.update(agreement(naive_ms, route, margin))
        row["routes"] = [
            {
                "route": r["route"],
                "stage": r["stage"],
                "tune_median_ms": r["median_ms"],
                "naive_median_ms": naive_ms.get(canonical(full_config(parse_route(r["route"] or "")), defaults)),
            }
            for r in tune.get("entries", {}).get("routes", [])
        ]
    results.data["comparison"][label] = row
    results.save()


def report(data: dict) -> None:
    """One line per mode, then the ratio and the agreement per tune variant."""
    naive = data.get("naive")
    if naive and naive.get("status") == "done":
        print(
            f"naive sweep     : {naive['wall_seconds']:7.1f} s wall, {naive.get('cpu_seconds', float('nan')):7.1f} "
            f"CPU-s, {len(naive['configs'])} configurations "
            f"x {naive['runs']} timed runs; best {naive['best'] or '(default)'} {naive['best_ms']:.2f} ms, "
            f"default {naive['default_ms']:.2f} ms"
        )
    for label, tune in data["tune"].items():
        s = tune.get("summary_seconds", {})
        w = tune.get("winner") or {}
        seconds = ", ".join(f"{k.removesuffix('_seconds')} {v:.1f} s" for k, v in s.items())
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in (tune.get("phases") or {}).items())
        win = (w.get("winner_route") or "(default)") if w else "?"
        print(
            f"tune [{label:<7}]: {tune.get('wall_seconds', float('nan')):7.1f} s wall, "
            f"{tune.get('cpu_seconds', float('nan')):7.1f} CPU-s "
            f"({tune.get('status')}; summary: {seconds or '-'}; phases: {phases or '-'}); "
            f"{tune.get('entries', {}).get('count', 0)} routes, "
            f"{sum(st.get('rounds', 0) for st in tune.get('entries', {}).get('by_stage', {}).values())} paired rounds; "
            f"winner {win}"
            + (
                f" {w['winner_ms']:.2f} ms vs default {w['default_ms']:.2f} ms ({w.get('decision')})"
                if w.get("winner_ms") and w.get("default_ms")
                else ""
            )
        )
    for label, row in data.get("comparison", {}).items():
        if "wall_ratio" in row:
            print(f"[{label}] tune wall / naive sweep wall = {row['wall_ratio']:.2f} (goal <= 2)")
        if "cpu_ratio" in row:
            print(f"[{label}] tune CPU-s / naive sweep CPU-s = {row['cpu_ratio']:.2f}")
        if "agree" in row:
            mine = row["naive_ms_of_tune_winner"]
            print(
                f"[{label}] winners {'agree' if row['agree'] else 'DISAGREE'}"
                f"{' (same configuration)' if row['exact'] else ''}: naive best {row['naive_best'] or '(default)'} "
                f"{row['naive_best_ms']:.2f} ms; naive time of tune's winner {row['tune_winner'] or '(default)'} "
                + (
                    f"{mine:.2f} ms ({row['tune_winner_vs_naive_best']:.3f}x, margin {row['margin']:.0%})"
                    if mine is not None
                    else "not in the sweep"
                )
                + f"; naive default {row['naive_default_ms']:.2f} ms"
            )


if __name__ == "__main__":
    sys.exit(main())
