"""The `enginewright` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml


def _load_run(path: str):
    from pydantic import ValidationError

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
    from enginewright.api.routes import parse_tensorrt_knobs

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
        print(
            "generated CRDs differ from the committed ones; run `enginewright crds`:\n  " + "\n  ".join(drift),
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_plan(args) -> int:
    from enginewright.backends import BackendUnavailable
    from enginewright.search.flow import FlowSpec, first_step
    from enginewright.search.planners import PlanError

    run = _load_run(args.manifest)
    search = run.spec.search
    if search.mode.value == "mixed":
        print(
            "enginewright plan: mode mixed cannot be listed in advance: its second stage combines the "
            "knobs that stage 1 measures as improving. Plan with mode fast (mixed's stage 1) or full.",
            file=sys.stderr,
        )
        return 2
    try:
        knobs = compiler_knobs(run.spec.compiler.name.value, args.knobs)
        # The flow's first step with nothing measured yet: what the controller would launch.
        step = first_step(FlowSpec.of(run.spec), knobs)
    except (PlanError, BackendUnavailable) as exc:
        print(f"enginewright plan: {exc}", file=sys.stderr)
        return 2
    batches = step.batches
    routes = [route for batch in batches for route in batch.routes]
    if args.json:
        print(
            json.dumps(
                {
                    "name": run.metadata.name,
                    "mode": search.mode.value,
                    "targets": [t.gpu_type for t in run.spec.targets],
                    "routesPerTarget": len(routes),
                    "routesPerJob": search.routes_per_job,
                    "jobs": [
                        {"batch": b.name, "routes": [{"id": r.id, "route": r.canonical} for r in b.routes]}
                        for b in batches
                    ],
                },
                indent=2,
            )
        )
        return 0
    targets = ", ".join(t.gpu_type for t in run.spec.targets)
    print(
        f"{run.metadata.name}: {search.mode.value} search, {len(routes)} routes per target "
        f"({len(batches)} jobs of up to {search.routes_per_job}) for {targets}"
    )
    for batch in batches:
        for route in batch.routes:
            print(f"  {batch.name}  {route.id}  {route}")
    return 0


def _consumer(args, compilers: set[str]):
    """The machine that wants the engine: its GPU (`--gpu`) and the compilers (`--compiler-version`)."""
    from enginewright.api.fingerprint import driver_major
    from enginewright.catalog.compatibility import Consumer, Installed, compiler_name
    from enginewright.catalog.this_machine import installed_compiler, local_gpu

    driver = args.driver_major
    if args.gpu == "auto":
        gpu = local_gpu(shared=args.shared)
        print(
            f"GPU: {gpu.name!r} -> {gpu.product} (compute capability {gpu.compute_capability}, "
            f"driver {gpu.driver}, from {gpu.source})",
            file=sys.stderr,
        )
        product, cc = gpu.product, gpu.compute_capability
        driver = driver or driver_major(gpu.driver)
    else:
        product, cc = args.gpu, args.compute_capability
    if args.compiler_version == "auto":
        found = {name: installed_compiler(name) for name in sorted(compilers)}
        installed = {name: i for name, i in found.items() if i is not None}
    else:
        installed = {compiler_name(args.compiler_version): Installed(args.compiler_version, args.cuda)}
    return Consumer(product, cc, installed, driver)


def cmd_fetch(args) -> int:
    from enginewright.catalog.compatibility import NoCompatibleEngine, NotInCatalog, compiler_name
    from enginewright.catalog.fetch import (
        EXIT_ERROR,
        EXIT_INCOMPATIBLE,
        EXIT_NOT_FOUND,
        EXIT_TAMPERED,
        TamperedEngine,
        fetch,
    )
    from enginewright.catalog.reader import Catalog
    from enginewright.catalog.this_machine import NoGpuFound

    try:
        catalog = Catalog.from_uri(args.catalog)
        compilers = {compiler_name(e["compilerVersion"]) for e in catalog.index(args.model)}
        consumer = _consumer(args, compilers)
        if args.same_driver and consumer.driver_major is None:
            print(
                "enginewright fetch: --same-driver needs the consumer's driver: pass --driver-major N "
                "(with an explicit --gpu the driver is not read from this machine)",
                file=sys.stderr,
            )
            return 2
        done = fetch(
            catalog,
            args.model,
            consumer,
            Path(args.dest),
            prefer=args.select,
            run_uid=args.run,
            require_validated=args.require_validated,
            same_driver=args.same_driver,
        )
    except (NotInCatalog, NoCompatibleEngine, TamperedEngine, NoGpuFound) as exc:
        code = {NotInCatalog: EXIT_NOT_FOUND, NoCompatibleEngine: EXIT_INCOMPATIBLE, TamperedEngine: EXIT_TAMPERED}.get(
            type(exc), EXIT_ERROR
        )
        print(f"enginewright fetch: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"fetched": False, "exitCode": code, "error": str(exc)}, indent=2))
        return code
    offer = done.selection.offer
    if args.json:
        print(
            json.dumps(
                {
                    "fetched": True,
                    "engine": str(done.engine),
                    "provenance": str(done.provenance),
                    "sha256": done.sha256,
                    "source": offer.engine,
                    "gpuProduct": offer.gpu_product,
                    "compilerVersion": offer.compiler_version,
                    "run": offer.run,
                    "runUid": offer.run_uid,
                    "publishedAt": offer.published_at,
                    "speedup": offer.speedup,
                    "driverMajor": offer.driver_major,
                    "supersededBy": offer.superseded_by,
                    "selection": done.selection.how,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"fetched {offer.engine} -> {done.engine} (sha256 {done.sha256}; {offer.gpu_product}, "
        f"{offer.compiler_version}, run {offer.run} {offer.run_uid}, published {offer.published_at}; "
        f"{done.selection.how})"
    )
    return 0


def cmd_catalog_list(args) -> int:
    from enginewright.catalog.compatibility import NotInCatalog
    from enginewright.catalog.fetch import EXIT_NOT_FOUND
    from enginewright.catalog.listing import coverage, render_table
    from enginewright.catalog.reader import Catalog

    try:
        catalog = Catalog.from_uri(args.catalog)
        models = [args.model] if args.model else catalog.models()
        data = [coverage(m, [o for o, _, _ in catalog.offers(m)]) for m in models]
    except NotInCatalog as exc:
        print(f"enginewright catalog list: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.json:
        print(json.dumps({"catalog": args.catalog, "models": data}, indent=2))
    else:
        print("\n\n".join(render_table(d) for d in data) if data else f"{args.catalog}: no models")
    return 0


def cmd_catalog_verify(args) -> int:
    from enginewright.catalog.compatibility import NotInCatalog
    from enginewright.catalog.fetch import EXIT_NOT_FOUND, EXIT_TAMPERED, verify
    from enginewright.catalog.reader import Catalog

    try:
        catalog = Catalog.from_uri(args.catalog)
        results = verify(catalog, [args.model] if args.model else None)
    except NotInCatalog as exc:
        print(f"enginewright catalog verify: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    for r in results:
        print(
            f"{r.outcome:8} {r.model} {r.entry['gpuProduct']} {r.entry['compilerVersion']} "
            f"run {r.entry.get('run', '')} {r.entry['runUid']}: {r.detail}"
        )
    bad = [r for r in results if r.outcome != "ok"]
    print(
        f"{len(results) - len(bad)}/{len(results)} engines verified" + (f"; {len(bad)} failed" if bad else ""),
        file=sys.stderr,
    )
    if any(r.outcome == "mismatch" for r in bad):
        return EXIT_TAMPERED
    return EXIT_NOT_FOUND if bad else 0


def cmd_catalog_site(args) -> int:
    import time

    from enginewright.catalog.compatibility import NotInCatalog
    from enginewright.catalog.fetch import EXIT_NOT_FOUND
    from enginewright.catalog.reader import Catalog
    from enginewright.catalog.site import write_site

    started = time.monotonic()
    try:
        catalog = Catalog.from_uri(args.catalog)
        written = write_site(catalog, Path(args.out))
    except NotInCatalog as exc:
        print(f"enginewright catalog site: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    size = sum(p.stat().st_size for p in written)
    print(
        f"wrote {len(written)} page(s), {size / 1024:.1f} KiB, in {time.monotonic() - started:.2f}s: "
        f"{Path(args.out).resolve() / 'index.html'}"
    )
    return 0


def _add_catalog_argument(parser) -> None:
    parser.add_argument(
        "--catalog",
        required=True,
        help="s3://BUCKET[/PREFIX] (PREFIX holds the model folders, default 'catalog') or a "
        "local copy; s3 credentials from ENGINEWRIGHT_S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, ENGINEWRIGHT_S3_SECURE",
    )


def build_parser() -> argparse.ArgumentParser:
    from enginewright import __version__

    parser = argparse.ArgumentParser(prog="enginewright", description=__doc__)
    parser.add_argument("--version", action="version", version=f"enginewright {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    crds = sub.add_parser("crds", help="generate crds/ from the API models")
    crds.add_argument("--out", default="crds", help="folder to write the CRD YAML to (default: crds)")
    crds.add_argument("--also", action="append", help="another folder to write the same files to")
    crds.add_argument("--check", action="store_true", help="exit 1 when the files differ from the models")
    crds.set_defaults(func=cmd_crds)

    plan = sub.add_parser("plan", help="dry run: list the candidate routes of a TuningRun manifest")
    plan.add_argument("manifest", help="a TuningRun manifest (YAML), as you would kubectl apply it")
    plan.add_argument("--knobs", help="TensorRT knob JSON (trtexec --helpBuildRoute) instead of the installed compiler")
    plan.add_argument("--json", action="store_true", help="plain data for scripts: the Jobs and their routes")
    plan.set_defaults(func=cmd_plan)

    fetch = sub.add_parser(
        "fetch",
        help="the catalog's engine for this machine's GPU and compiler, verified, into DIR",
        description="Exit codes: 0 fetched, 1 error (e.g. no GPU for --gpu auto), 2 usage, "
        "3 not found (model or pinned run), 4 no compatible engine, "
        "5 sha256 mismatch (tampered or damaged engine).",
    )
    _add_catalog_argument(fetch)
    fetch.add_argument(
        "--model", required=True, help="the model's catalog name (spec.publish.modelName or the run's name)"
    )
    fetch.add_argument(
        "--gpu", default="auto", help="auto (NVML, else nvidia-smi) or a nvidia.com/gpu.product value, e.g. NVIDIA-H200"
    )
    fetch.add_argument(
        "--shared",
        action="store_true",
        help="with --gpu auto: the GPU is time-sliced (GPU feature discovery adds -SHARED)",
    )
    fetch.add_argument("--compute-capability", help="with an explicit --gpu: its compute capability, e.g. 9.0")
    fetch.add_argument(
        "--compiler-version",
        default="auto",
        help="auto (the compilers installed here) or e.g. onnxruntime-1.32.0, tensorrt-10.13.0.35, "
        "inductor-torch-2.9.0+cu128-triton-3.5.0",
    )
    fetch.add_argument("--cuda", help="with an explicit Inductor --compiler-version: torch's CUDA version")
    fetch.add_argument(
        "--driver-major",
        help="the consumer's NVIDIA driver major, e.g. 550 (default: this machine's with --gpu auto, none with "
        "an explicit --gpu): an engine measured on it is preferred",
    )
    fetch.add_argument(
        "--same-driver",
        action="store_true",
        help="refuse engines measured on another driver major instead of falling back to them",
    )
    fetch.add_argument("--run", help="pin the run (its uid, or a prefix of it)")
    fetch.add_argument(
        "--select",
        choices=["newest", "speedup"],
        default="newest",
        help="among several compatible engines: the newest (default) or the best speedup",
    )
    fetch.add_argument(
        "--require-validated",
        action="store_true",
        help="refuse engines whose accuracy was not validated (spec.accuracy.disabled)",
    )
    fetch.add_argument("--dest", required=True, help="directory for engine<ext> and provenance.json")
    fetch.add_argument(
        "--json",
        action="store_true",
        help="plain data for scripts: what was fetched (or the error and exit code) on stdout",
    )
    fetch.set_defaults(func=cmd_fetch)

    catalog = sub.add_parser("catalog", help="the engine catalog: coverage and digests")
    actions = catalog.add_subparsers(dest="action", required=True, help="what to do with the catalog")
    listing = actions.add_parser("list", help="per model: GPU products x compiler versions (speedup, loss, date, run)")
    _add_catalog_argument(listing)
    listing.add_argument("--model", help="one model (default: every model in the catalog)")
    listing.add_argument("--json", action="store_true", help="plain data for scripts")
    listing.set_defaults(func=cmd_catalog_list)
    check = actions.add_parser(
        "verify",
        help="re-read every engine and compare its sha256 with index and provenance",
        description="Exit codes: 0 all verified, 3 an object is missing, 5 a digest differs.",
    )
    _add_catalog_argument(check)
    check.add_argument("--model", help="one model (default: every model in the catalog)")
    check.set_defaults(func=cmd_catalog_verify)
    site = actions.add_parser(
        "site",
        help="static HTML pages of the catalog: an index and a page per model",
        description="One self-contained page per model (its GPU product x compiler version "
        "grid, every engine with its routes, provenance and fetch command) and an "
        "index; no server, no JavaScript. Exit codes: 0 written, 3 not found.",
    )
    _add_catalog_argument(site)
    site.add_argument("--out", required=True, help="directory for index.html and <model>/index.html")
    site.set_defaults(func=cmd_catalog_site)

    from enginewright.cli import commands

    commands.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        # A file named on the command line that is not there (or not readable): say which, no traceback.
        where = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
        print(f"enginewright {args.command}: {where}", file=sys.stderr)
        return 2
