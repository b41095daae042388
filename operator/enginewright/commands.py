"""Sub-commands that run the worker locally: `tune` and `report`."""

from __future__ import annotations

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


def _knobs(values: list[str] | None) -> list[tuple[str, list[str]]]:
    out = []
    for item in values or []:
        if "=" not in item:
            raise SystemExit(f"--knob expects NAME=V1,V2 (got {item!r})")
        name, vals = item.split("=", 1)
        out.append((name, [v for v in vals.split(",") if v]))
    return out


def cmd_tune(args) -> int:
    from enginewright.search.planners import PlanError
    from enginewright.worker.tune import TuneError, TuneOptions, tune
    from enginewright import report

    if len(args.inputs) != len(args.references) and args.references:
        raise SystemExit(f"--inputs and --references pair up by order: got {len(args.inputs)} and {len(args.references)}")
    if args.references and args.threshold is None:
        raise SystemExit("--threshold is required with --references (a tensor fails when loss >= threshold)")
    if not args.references and not args.no_accuracy:
        raise SystemExit("accuracy validation is on by default: give --references (and --threshold), "
                         "or --no-accuracy to tune without it")
    opts = TuneOptions(
        backend=args.backend, model=Path(args.model), out=Path(args.out), inputs=[Path(p) for p in args.inputs],
        references=[Path(p) for p in args.references], metric=args.metric, threshold=args.threshold,
        atol=args.atol, rtol=args.rtol, mode=args.search, knobs=_knobs(args.knob), pinned=_pairs(args.pin),
        settings=_pairs(args.setting), max_routes=args.max_routes, routes_per_batch=args.routes_per_batch,
        route_timeout=args.route_timeout, noise_margin=args.noise_margin,
        top_k=0 if args.no_confirm else args.top_k, confirm_rounds=args.confirm_rounds,
        save_all_engines=args.save_all_engines,
        timing={"warmup_iterations": args.warmup, "iterations": args.iterations, "repeats": args.repeats,
                "min_seconds": args.min_seconds},
        backend_options={"device": args.device} if args.device else {}, build_parallelism=args.build_parallelism)
    entries_dir = opts.out / "store" / "runs" / "local" / "entries"
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
    except (TuneError, PlanError) as exc:
        print(f"enginewright tune: {exc}", file=sys.stderr)
        return 3
    s = result.summary
    print()
    print(report.table(s, result.entries))
    print()
    print(f"default {s['default_ms']:.4f} ms; winner {s['winner_route'] or '(default)'} {s['winner_ms']:.4f} ms; "
          f"speedup {s['speedup']:.3f}x — {s['decision']}")
    if s["routes"].get("accuracy-rejected"):
        print(f"{s['routes']['accuracy-rejected']} route(s) rejected by accuracy ({s['metric']} >= {s['threshold']})")
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


def register(sub) -> None:
    tune = sub.add_parser("tune", help="tune a model on this machine (no cluster)")
    tune.add_argument("model", help="model file (.onnx, or a torch.export .pt2 for inductor)")
    tune.add_argument("--backend", required=True, choices=["onnxruntime", "inductor", "tensorrt"])
    tune.add_argument("--search", default="fast", choices=["fast", "full", "mixed"])
    tune.add_argument("--inputs", action="append", required=True, help=".npz of named inputs (repeat per pair)")
    tune.add_argument("--references", action="append", default=[], help=".npz of reference outputs (repeat per pair)")
    tune.add_argument("--metric", default="cosine", choices=["abs", "squared", "max", "cosine", "l0"])
    tune.add_argument("--threshold", type=float)
    tune.add_argument("--atol", type=float, default=1e-5)
    tune.add_argument("--rtol", type=float, default=1e-5)
    tune.add_argument("--no-accuracy", action="store_true", help="tune without accuracy validation")
    tune.add_argument("--knob", action="append", help="NAME=V1,V2: a knob of the space (default: every sweepable knob)")
    tune.add_argument("--pin", action="append", help="NAME=VALUE: a knob fixed in every route")
    tune.add_argument("--setting", action="append", help="NAME=VALUE: a base setting of every route")
    tune.add_argument("--max-routes", type=int, default=64)
    tune.add_argument("--routes-per-batch", type=int, default=8)
    tune.add_argument("--route-timeout", type=float, default=900.0)
    tune.add_argument("--noise-margin", type=float, default=0.03)
    tune.add_argument("--top-k", type=int, default=3)
    tune.add_argument("--confirm-rounds", type=int, default=5)
    tune.add_argument("--no-confirm", action="store_true")
    tune.add_argument("--save-all-engines", action="store_true")
    tune.add_argument("--warmup", type=int, default=10)
    tune.add_argument("--iterations", type=int, default=50)
    tune.add_argument("--repeats", type=int, default=7)
    tune.add_argument("--min-seconds", type=float, default=0.5)
    tune.add_argument("--build-parallelism", type=int, default=1,
                      help="routes built at once (measuring is always one at a time)")
    tune.add_argument("--device", help="inductor: cpu or cuda (default: cuda when available)")
    tune.add_argument("--out", default="tune-out", help="cache + report directory; rerun to resume")
    tune.set_defaults(func=cmd_tune)

    rep = sub.add_parser("report", help="re-render report.md / report.png from a cache directory")
    rep.add_argument("directory")
    rep.set_defaults(func=cmd_report)
