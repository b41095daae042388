"""The `enginewright` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml
from pydantic import ValidationError


def _load_run(path: str):
    from enginewright.api.models import TuningRun
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    runs = [d for d in docs if d.get("kind") == "TuningRun"]
    if len(runs) != 1:
        raise SystemExit(f"{path}: expected exactly one TuningRun document, found {len(runs)}")
    try:
        return TuningRun.model_validate(runs[0])
    except ValidationError as exc:
        lines = [f"{path}: invalid TuningRun:"]
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            lines.append(f"  {where}: {err['msg']}")
        raise SystemExit("\n".join(lines)) from None


def compiler_knobs(name: str, knobs_file: str | None = None):
    """The knob list of a compiler: from `knobs_file` (TensorRT's all_build_routes JSON, as
    `trtexec --helpBuildRoute` prints it) when given, else from the installed compiler."""
    from enginewright.search.routes import parse_tensorrt_knobs
    if knobs_file:
        return parse_tensorrt_knobs(Path(knobs_file).read_text())[1]
    from enginewright.backends import get_backend
    return get_backend(name).knobs()


def cmd_crds(args) -> int:
    from enginewright.api.crd import render_crds
    out = Path(args.out)
    drift = []
    for name, text in render_crds().items():
        for folder in [out, *map(Path, args.also or [])]:
            path = folder / name
            if args.check:
                if not path.exists() or path.read_text() != text:
                    drift.append(str(path))
            else:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                print(f"wrote {path}")
    if drift:
        print("generated CRDs differ from the committed ones; run `enginewright crds`:\n  " + "\n  ".join(drift),
              file=sys.stderr)
        return 1
    return 0


def cmd_plan(args) -> int:
    from enginewright.backends import BackendUnavailable
    from enginewright.search.planners import PlanError, build_space, make_batches, plan_stage1
    run = _load_run(args.manifest)
    search = run.spec.search
    if search.mode.value == "mixed":
        print("enginewright plan: mode mixed cannot be listed in advance: its second stage combines the "
              "knobs that stage 1 measures as improving. Plan with mode fast (mixed's stage 1) or full.",
              file=sys.stderr)
        return 2
    try:
        knobs = compiler_knobs(run.spec.compiler.name.value, args.knobs)
        space = build_space(knobs, [(k.name, k.values) for k in search.knobs], search.pinned)
        routes = plan_stage1(search.mode.value, space, search.pinned, search.max_routes)
    except (PlanError, BackendUnavailable) as exc:
        print(f"enginewright plan: {exc}", file=sys.stderr)
        return 2
    batches = make_batches(routes, search.routes_per_job, "stage1")
    targets = ", ".join(t.gpu_type for t in run.spec.targets)
    print(f"{run.metadata.name}: {search.mode.value} search, {len(routes)} routes per target "
          f"({len(batches)} jobs of up to {search.routes_per_job}) for {targets}")
    for batch in batches:
        for route in batch.routes:
            print(f"  {batch.name}  {route.id}  {route}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="enginewright", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    crds = sub.add_parser("crds", help="generate crds/ from the API models")
    crds.add_argument("--out", default="crds")
    crds.add_argument("--also", action="append", help="another folder to write the same files to")
    crds.add_argument("--check", action="store_true", help="exit 1 when the files differ from the models")
    crds.set_defaults(func=cmd_crds)

    plan = sub.add_parser("plan", help="dry run: list the candidate routes of a TuningRun manifest")
    plan.add_argument("manifest")
    plan.add_argument("--knobs", help="TensorRT knob JSON (trtexec --helpBuildRoute) instead of the installed compiler")
    plan.set_defaults(func=cmd_plan)

    from enginewright import commands
    commands.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
