"""Sub-commands that work on this machine: `tune`, `report`, and `cache import` / `cache export`
(trtexec's tuning cache in and out)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _pairs(values: list[str] | None) -> dict[str, str]:
    out = {}
    for item in values or []:
        if "=" not in item:
            raise SystemExit(f"expected NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key] = value
    return out


def _build_parallelism(text: str) -> int | None:
    """`--build-parallelism`: a count of 1 or more, or 'auto' (None: from the host, `worker.capacity`)."""
    if text == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a whole number of 1 or more (got {text!r})")
    return value


def _knobs(values: list[str] | None) -> list[tuple[str, list[str]]]:
    out = []
    for item in values or []:
        if "=" not in item:
            raise SystemExit(f"--knob expects NAME=V1,V2 (got {item!r})")
        name, vals = item.split("=", 1)
        out.append((name, [v for v in vals.split(",") if v]))
    return out


def cmd_tune(args) -> int:
    from enginewright import report
    from enginewright.api.models import Timing
    from enginewright.backends import BACKENDS, BackendUnavailable, misfit
    from enginewright.cli.tune import TuneError, TuneOptions, tune
    from enginewright.search.planners import PlanError

    if not Path(args.model).is_file():
        print(f"enginewright tune: {args.model}: no such model file", file=sys.stderr)
        return 2
    wrong = misfit(args.backend, args.model)
    if wrong:
        print(f"enginewright tune: {wrong}", file=sys.stderr)
        return 2

    if len(args.inputs) != len(args.references) and args.references:
        raise SystemExit(
            f"--inputs and --references pair up by order: got {len(args.inputs)} and {len(args.references)}"
        )
    if args.references and args.threshold is None:
        raise SystemExit("--threshold is required with --references (a tensor fails when loss >= threshold)")
    if not args.references and not args.no_accuracy:
        raise SystemExit(
            "accuracy validation is on by default: give --references (and --threshold), "
            "or --no-accuracy to tune without it"
        )
    opts = TuneOptions(
        backend=args.backend,
        model=Path(args.model),
        out=Path(args.out),
        inputs=[Path(p) for p in args.inputs],
        references=[Path(p) for p in args.references],
        metric=args.metric,
        threshold=args.threshold,
        atol=args.atol,
        rtol=args.rtol,
        outputs=list(args.outputs),
        mode=args.search,
        knobs=_knobs(args.knob),
        pinned=_pairs(args.pin),
        settings=_pairs(args.setting),
        max_routes=args.max_routes,
        routes_per_batch=args.routes_per_batch,
        route_timeout=args.route_timeout,
        noise_margin=args.noise_margin,
        top_k=0 if args.no_confirm else args.top_k,
        confirm_rounds=args.confirm_rounds,
        confirm_loads=args.confirm_loads,
        measure_uncompiled=not args.no_uncompiled,
        save_all_engines=args.save_all_engines,
        timing=Timing(
            objective=args.objective,
            warmup_iterations=args.warmup,
            round_seconds=args.round_seconds,
            min_rounds=args.min_rounds,
            min_rounds_if_slower=args.min_rounds_if_slower,
            max_rounds=args.max_rounds,
            precision=args.precision,
            loads=args.loads,
        ),
        backend_options={"device": args.device} if args.device else {},
        build_parallelism=args.build_parallelism,
        cache=Path(args.cache) if args.cache else None,
        reuse=args.reuse,
    )
    entries_dir = (opts.cache or opts.out / "store") / "runs" / "local" / "entries"
    planned = {"routes": 0}

    def on_plan(total: int) -> None:
        planned["routes"] = total

    def say(message: str) -> None:
        """Progress: a bar of measured / planned routes, then the worker's line."""
        total = max(1, planned["routes"])
        done = min(total, len(list(entries_dir.glob("*.json"))) if entries_dir.exists() else 0)
        bar = "#" * round(20 * done / total)
        print(f"[{bar:<20}] {done:3d}/{total:<3d} {message}", flush=True)

    try:
        result = tune(opts, say, on_plan)
    except BackendUnavailable as exc:
        others = [b for b in BACKENDS if b != args.backend and not misfit(b, args.model)]
        print(
            f"enginewright tune: the {args.backend} backend is not available on this machine: {exc}"
            + (
                f". {Path(args.model).name} can also be tuned with --backend {' or --backend '.join(others)}"
                if others
                else ""
            ),
            file=sys.stderr,
        )
        return 2
    except (TuneError, PlanError) as exc:
        print(f"enginewright tune: {exc}", file=sys.stderr)
        return 3
    s = result.summary
    print()
    print(report.table(s, result.entries))
    print()
    print(report.headline(s, result.entries))
    if s["routes"].get("accuracy-rejected"):
        print(f"{s['routes']['accuracy-rejected']} route(s) rejected by accuracy ({s['metric']} >= {s['threshold']})")
    print(report.spent(s))
    print(f"report: {opts.out / 'report.md'}, {opts.out / 'report.png'}; winning engine: {s['winner_engine']}")
    return 0


def cmd_report(args) -> int:
    from enginewright.report import render

    try:
        md, png = render(Path(args.directory))
    except FileNotFoundError as exc:
        print(f"enginewright report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {md} and {png}")
    return 0


def cmd_cache_import(args) -> int:
    """A trtexec tuning cache -> an import under OUT/runs/<target>/imports/ (`trtexec.imports`), where
    `enginewright tune --cache OUT` finds it (target `local`) and does not measure its routes again
    when it tunes with the compiler the file came from."""
    from enginewright.catalog.compatibility import compiler_name
    from enginewright.report import load_entries
    from enginewright.store.keys import safe_segment
    from enginewright.trtexec.imports import ImportRefused, import_file

    source, out = Path(args.file), Path(args.out)
    try:
        knobs_version, knobs = _knob_file_with_version(args.knobs)
        measured = load_entries(out / "runs" / safe_segment(args.target)) if out.exists() else []
        own = sorted({compiler_name(e.versions.compiler) for e in measured if e.versions})
        imported, cache, new = import_file(
            out,
            source,
            target=args.target,
            threshold=args.threshold,
            knobs=knobs,
            knobs_version=knobs_version,
            force=args.force,
            replace=args.replace,
            own_compilers=own,
        )
    except ImportRefused as exc:
        print(f"enginewright cache import: {source}: refused: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"enginewright cache import: {source}: {exc}", file=sys.stderr)
        return 2
    for number, why in cache.damaged[:20]:
        print(
            f"enginewright cache import: warning: {source}: line {number} skipped ({why}); the other lines are "
            f"imported",
            file=sys.stderr,
        )
    if len(cache.damaged) > 20:
        print(
            f"enginewright cache import: warning: {source}: {len(cache.damaged) - 20} more damaged lines skipped",
            file=sys.stderr,
        )
    if not knobs and not cache.header.get("default_build_route"):
        print(
            "enginewright cache import: the header has no default_build_route and no --knobs was given: "
            "knobs at their default stay in the routes, so their ids differ from ours",
            file=sys.stderr,
        )
    routes = sum(cache.outcomes.values())
    counts = ", ".join(f"{n} {o}" for o, n in sorted(cache.outcomes.items()))
    if not new:
        print(f"{source} was imported before ({imported.folder}): nothing to do")
    elif cache.lines == 0:
        print(
            f"imported the header of {source} into {imported.folder}: it has no iteration lines (trtexec stopped "
            f"before its first route finished); 0 routes, nothing for a run to reuse"
        )
    else:
        print(
            f"imported {routes} routes ({counts}) from {cache.lines} lines of {source} into {imported.folder} "
            f"({imported.compiler})"
            + (f"; {cache.repeats} repeated routes keep their first result" if cache.repeats else "")
            + (f"; {len(cache.damaged)} damaged lines skipped" if cache.damaged else "")
        )
    if args.target == "local" and routes:
        print(
            f"seed a local run with: enginewright tune ... --cache {args.out} (used only by "
            f"{compiler_name(imported.compiler)} runs of {imported.compiler})"
        )
    return 0


def cmd_cache_export(args) -> int:
    """Cache entries under DIRECTORY (a `tune --out` directory, a cache, an import) -> trtexec's
    tuning cache. An import is written back as it was imported, byte for byte, followed by the
    routes measured since with its compiler. Otherwise metric, threshold, tolerances and search
    mode come from the options, else the directory's summary.json."""
    from enginewright.report import load_entries
    from enginewright.trtexec.imports import imports_under

    directory = Path(args.directory)
    imports = [i for i in imports_under(directory) if args.compiler in (None, i.compiler)]
    compilers = sorted({i.compiler for i in imports})
    if len(compilers) > 1:
        print(
            f"enginewright cache export: {directory} holds imports from {', '.join(compilers)}: one trtexec file "
            f"has one tuner version; choose one with --compiler",
            file=sys.stderr,
        )
        return 2
    entries = load_entries(directory)
    if imports:
        return _export_imports(args, imports, entries)
    if not entries:
        print(
            f"enginewright cache export: no cache entries (entries/*.json) or imports under {directory}",
            file=sys.stderr,
        )
        return 2
    return _export_entries(args, directory, entries)


def _export_imports(args, imports, entries) -> int:
    """The imported files as they were, then the routes measured since with that compiler."""
    from enginewright.trtexec.imports import export_imports

    out = Path(args.out)
    since = export_imports(out, imports, entries, metric=args.metric)
    damaged = [f"line {n}" for i in imports for n, _ in i.meta.get("damaged", [])]
    print(
        f"wrote {out}: {len(imports)} import(s) from {imports[0].compiler} as imported, byte for byte"
        + (
            f" (damaged lines kept as they were: {', '.join(damaged[:10])}; trtexec --continue counts a line it "
            f"cannot read as a crashed iteration, and leaving one out would shift every later iteration)"
            if damaged
            else ""
        )
        + (f", then {since} routes measured since" if since else "")
    )
    return 0


def _export_entries(args, directory: Path, entries) -> int:
    """Our own entries, written as trtexec writes its cache."""
    from enginewright.api.models import Accuracy, Search, default_of
    from enginewright.trtexec.format import export_trtexec, trtexec_files, trtexec_metric

    summary = _json_or_empty(directory / "summary.json")
    options = summary.get("options", {})
    header: dict = next((json.loads(p.read_text()) for p in sorted(directory.rglob("trtexec-header.json"))), {})
    parameters = header.get("accuracy_parameter") or {}
    metric = args.metric or summary.get("metric") or trtexec_metric(header.get("accuracy_algorithm", ""))
    if metric is None:
        print("enginewright cache export: the metric is unknown here; give --metric", file=sys.stderr)
        return 2
    threshold = args.threshold if args.threshold is not None else summary.get("threshold", parameters.get("epsilon"))
    try:
        knobs = _knob_file(args.knobs) or _backend_knobs(summary.get("backend"))
    except (OSError, ValueError) as exc:
        print(f"enginewright cache export: {args.knobs}: {exc}", file=sys.stderr)
        return 2
    model = options.get("model")
    files = trtexec_files(Path(model)) if model else {}
    stages = {"stage1": 0, "stage2": 1, "imported": 2}
    default_id = summary.get("default_id", "e3b0c44298fc")
    ordered = sorted(
        entries, key=lambda e: (stages.get(e.stage, 3), e.route_id != default_id, e.started_at or "", e.route)
    )
    text = export_trtexec(
        ordered,
        metric=metric,
        threshold=threshold or None,
        atol=_first(args.atol, options.get("atol"), parameters.get("atol"), default_of(Accuracy, "atol")),
        rtol=_first(args.rtol, options.get("rtol"), parameters.get("rtol"), default_of(Accuracy, "rtol")),
        search_mode=args.search
        or summary.get("mode")
        or header.get("searching_algorithm")
        or default_of(Search, "mode").value,
        knobs=knobs,
        files=files,
        header=header or None,
    )
    Path(args.out).write_text(text)
    print(f"wrote {len(ordered)} routes to {args.out}")
    return 0


def _first(*values):
    return next(v for v in values if v is not None)


def _json_or_empty(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _knob_file(path: str | None):
    """Knobs from TensorRT's knob JSON (`trtexec --helpBuildRoute`, `all_build_routes`)."""
    return _knob_file_with_version(path)[1]


def _knob_file_with_version(path: str | None):
    """(tuner version, knobs) from TensorRT's knob JSON; (None, None) without one."""
    from enginewright.api.routes import parse_tensorrt_knobs

    return parse_tensorrt_knobs(Path(path).read_text()) if path else (None, None)


def _backend_knobs(backend: str | None):
    """The installed compiler's knobs, when it is installed; None otherwise (routes are then written
    with their non-default knobs only)."""
    if not backend:
        return None
    from enginewright.backends import BackendUnavailable, get_backend

    try:
        return get_backend(backend).knobs()
    except BackendUnavailable:
        return None


def register(sub) -> None:
    from enginewright.api.models import Accuracy, Confirm, Metric, ReuseMode, Search, SearchMode, Timing, default_of

    # The defaults and choices are the TuningRun's, written once in the API models.
    search, confirm, timing = Search(), Confirm(), Timing()
    metrics = [m.value for m in Metric]
    tune = sub.add_parser("tune", help="tune a model on this machine (no cluster)")
    tune.add_argument("model", help="model file (.onnx, or a torch.export .pt2 for inductor)")
    tune.add_argument(
        "--backend",
        required=True,
        choices=["onnxruntime", "inductor", "tensorrt"],
        help="the compiler whose build routes are tuned",
    )
    tune.add_argument(
        "--search",
        default=search.mode.value,
        choices=[m.value for m in SearchMode],
        help="fast: one knob at a time from the default; full: every combination (budgeted by "
        "--max-routes); mixed: fast, then combinations of the knobs that improved",
    )
    tune.add_argument("--inputs", action="append", required=True, help=".npz of named inputs (repeat per pair)")
    tune.add_argument("--references", action="append", default=[], help=".npz of reference outputs (repeat per pair)")
    tune.add_argument(
        "--output",
        action="append",
        default=[],
        dest="outputs",
        help="a model output accuracy is checked on (repeat; default: every output, each needing a reference)",
    )
    tune.add_argument(
        "--metric",
        default=default_of(Accuracy, "metric").value,
        choices=metrics,
        help="accuracy loss per output: mean absolute, mean squared, max absolute error, "
        "1 - cosine similarity, or l0 (fraction of elements with |d| > atol + rtol*|ref|)",
    )
    tune.add_argument(
        "--threshold",
        type=float,
        help="a route fails accuracy when an output's loss is >= this (required with --references)",
    )
    tune.add_argument(
        "--atol", type=float, default=default_of(Accuracy, "atol"), help="absolute tolerance of the l0 metric"
    )
    tune.add_argument(
        "--rtol", type=float, default=default_of(Accuracy, "rtol"), help="relative tolerance of the l0 metric"
    )
    tune.add_argument("--no-accuracy", action="store_true", help="tune without accuracy validation")
    tune.add_argument("--knob", action="append", help="NAME=V1,V2: a knob of the space (default: every sweepable knob)")
    tune.add_argument("--pin", action="append", help="NAME=VALUE: a knob fixed in every route")
    tune.add_argument("--setting", action="append", help="NAME=VALUE: a base setting of every route")
    tune.add_argument(
        "--max-routes", type=int, default=search.max_routes, help="budget: most routes built, all stages together"
    )
    tune.add_argument(
        "--routes-per-batch",
        type=int,
        default=search.routes_per_job,
        help="routes one worker process builds and measures (a Job's batch in the cluster)",
    )
    tune.add_argument(
        "--route-timeout",
        type=float,
        default=float(search.route_timeout_seconds),
        help="seconds; a route still building or measuring after this is recorded as timeout",
    )
    tune.add_argument(
        "--noise-margin",
        type=float,
        default=search.noise_margin,
        help="smallest relative speedup taken for real (the default route's measured spread raises it)",
    )
    tune.add_argument(
        "--top-k",
        type=int,
        default=confirm.top_k,
        help="best candidates re-measured against the default in the confirmation round",
    )
    tune.add_argument(
        "--confirm-rounds",
        type=int,
        default=confirm.rounds,
        help="interleaved rounds of the confirmation round, at most (it stops after 3 or more once no candidate "
        "can still be confirmed; only with --confirm-loads 3 or more)",
    )
    tune.add_argument(
        "--confirm-loads",
        type=int,
        default=confirm.loads,
        help="loads of the default and of each candidate in the confirmation round",
    )
    tune.add_argument("--no-confirm", action="store_true", help="no confirmation round: the sweep decides")
    tune.add_argument(
        "--no-uncompiled",
        action="store_true",
        help="leave out the route that does not compile (inductor: compile=false), measured by default",
    )
    tune.add_argument(
        "--save-all-engines",
        action="store_true",
        help="keep every route's engine in OUT (costs storage); otherwise only those that may win",
    )
    tune.add_argument(
        "--objective",
        default=timing.objective.value,
        choices=[o.value for o in type(timing.objective)],
        help="what the winner minimises: latency (host, one call), throughput (calls queued) or "
        "gpuTime (device time per call); all three are recorded",
    )
    tune.add_argument("--warmup", type=int, default=timing.warmup_iterations, help="untimed calls per engine")
    tune.add_argument(
        "--round-seconds",
        type=float,
        default=timing.round_seconds,
        help="each engine is timed about this long per round",
    )
    tune.add_argument(
        "--min-rounds",
        type=int,
        default=timing.min_rounds,
        help="paired rounds (route vs default) before a route may be placed",
    )
    tune.add_argument(
        "--min-rounds-if-slower",
        type=int,
        default=timing.min_rounds_if_slower,
        help="paired rounds after which a route slower than the default beyond the noise margin stops "
        "(it cannot win; --min-rounds or more: it waits like any other)",
    )
    tune.add_argument(
        "--max-rounds", type=int, default=timing.max_rounds, help="paired rounds at most per route, placed or not"
    )
    tune.add_argument(
        "--precision",
        type=float,
        default=timing.precision,
        help="stop once the route/default ratio's 95%% interval is within +-this",
    )
    tune.add_argument(
        "--loads",
        type=int,
        default=timing.loads,
        help="loads of the default and of each route timed in paired rounds (the interval comes "
        "from the spread across loads and rounds)",
    )
    tune.add_argument(
        "--build-parallelism",
        type=_build_parallelism,
        default="auto",
        help="routes built at once (measuring is always one at a time, never beside a build), or 'auto' (the "
        "default): one per 4 usable cores and 4 GiB of usable memory, 1 to 4. Builds that time kernels to choose "
        "among them (Inductor's autotuning and coordinate descent, TensorRT's tactics) then time them beside the "
        "other builds: on an H100 the MLP's engines built 4 at a time ran 1.001x those built alone (95%% "
        "0.990-1.013, bench/parallel_build_effect.py)",
    )
    tune.add_argument("--device", help="inductor: cpu or cuda (default: cuda when available)")
    tune.add_argument("--out", default="tune-out", help="cache + report directory; rerun to resume")
    tune.add_argument(
        "--cache",
        help="cache directory shared between runs (default OUT/store), e.g. one written by "
        "`enginewright cache import`: routes with an entry there are not measured again "
        "(an earlier run's entry only when its fingerprint is this run's; the default "
        "route is always measured fresh)",
    )
    tune.add_argument(
        "--reuse",
        choices=[r.value for r in ReuseMode],
        default=search.reuse.value,
        help="entries of earlier runs in --cache: reused when their fingerprint is this run's "
        "(default), or never (none: every route is measured again)",
    )
    tune.set_defaults(func=cmd_tune)

    rep = sub.add_parser("report", help="re-render report.md / report.png from a cache directory")
    rep.add_argument("directory", help="a `tune --out` directory (its entries/ and summary.json)")
    rep.set_defaults(func=cmd_report)

    cache = sub.add_parser("cache", help="trtexec's tuning cache (--tuningCacheFile) in and out")
    actions = cache.add_subparsers(dest="cache_command", required=True, help="import or export a trtexec tuning cache")
    imp = actions.add_parser("import", help="trtexec JSON Lines -> cache entries that `tune --cache DIR` reuses")
    imp.add_argument("file", help="trtexec --tuningCacheFile (JSON Lines)")
    imp.add_argument("--out", required=True, help="cache directory (entries land in OUT/runs/TARGET/entries/)")
    imp.add_argument("--target", default="local", help="target the entries are for (`tune` reads `local`)")
    imp.add_argument(
        "--threshold", type=float, help="accuracy threshold (default: the header's accuracy_parameter.epsilon)"
    )
    imp.add_argument(
        "--knobs",
        help="TensorRT knob JSON (trtexec --helpBuildRoute), for the knobs' defaults "
        "(default: the header's default_build_route)",
    )
    imp.add_argument(
        "--replace",
        action="store_true",
        help="this file's results win over those of earlier imports of the same compiler",
    )
    imp.add_argument(
        "--force",
        action="store_true",
        help="import even when the file's tuner version or compiler differs from --knobs or from what "
        "OUT already holds (kept apart: a run uses only the imports of its own compiler)",
    )
    imp.set_defaults(func=cmd_cache_import)
    exp = actions.add_parser("export", help="cache entries under DIR -> trtexec JSON Lines")
    exp.add_argument("directory", help="a `tune --out` directory, a cache directory or an import")
    exp.add_argument("--out", required=True, help="file to write (JSON Lines)")
    given = "(default: the directory's summary.json, else the imported header's)"
    exp.add_argument("--metric", choices=metrics, help=f"the header's accuracy_algorithm {given}")
    exp.add_argument("--threshold", type=float, help=f"the header's accuracy_parameter.epsilon {given}")
    exp.add_argument("--atol", type=float, help=f"the header's accuracy_parameter.atol {given}")
    exp.add_argument("--rtol", type=float, help=f"the header's accuracy_parameter.rtol {given}")
    exp.add_argument(
        "--search", choices=[m.value for m in SearchMode], help=f"the header's searching_algorithm {given}"
    )
    exp.add_argument(
        "--knobs",
        help="TensorRT knob JSON (trtexec --helpBuildRoute) for default_build_route "
        "(default: the run's compiler when installed)",
    )
    exp.add_argument(
        "--compiler",
        help="with imports from several compilers or versions: the one to export, e.g. tensorrt-tuner-2.19.15",
    )
    exp.set_defaults(func=cmd_cache_export)
