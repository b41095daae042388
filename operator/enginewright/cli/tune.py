"""The whole tuning flow on one machine: plan, measure in batches, mixed stage 2, confirmation,
winner, report. Powers `enginewright tune`; the operator runs the same steps spread over Jobs."""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from enginewright.api.cache import CacheEntry
from enginewright.api.models import (
    Accuracy as AccuracySpec,
    Compiler,
    CompilerName,
    Confirm,
    KnobValues,
    ReuseMode,
    Search,
    SearchMode,
    Timing,
    default_of,
)
from enginewright.search.flow import (
    Decided,
    Failed,
    FlowSpec,
    Observed,
    RunBatches,
    RunConfirmation,
    first_step,
    next_step,
)
from enginewright.search.planners import as_built
from enginewright.search.winner import Decision
from enginewright.store import LocalStore
from enginewright.store.layout import LOCAL_PREFIX, RunKeys
from enginewright.trtexec.format import export_trtexec, trtexec_files
from enginewright.worker.batch import Worker
from enginewright.worker.capacity import auto_build_parallelism
from enginewright.worker.context import Accuracy, WorkerContext, context_fingerprint

TARGET = "local"


class TuneError(RuntimeError):
    """The run cannot give a trustworthy result; the message says why and what to do."""


@dataclass
class TuneOptions:
    backend: str
    model: Path
    out: Path
    inputs: list[Path]
    references: list[Path] = field(default_factory=list)
    metric: str = default_of(AccuracySpec, "metric").value
    threshold: float | None = None
    atol: float = default_of(AccuracySpec, "atol")
    rtol: float = default_of(AccuracySpec, "rtol")
    outputs: list[str] = field(default_factory=list)  # the outputs accuracy is checked on; empty: every one
    mode: str = default_of(Search, "mode").value
    knobs: list[tuple[str, list[str]]] = field(default_factory=list)
    pinned: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    max_routes: int = default_of(Search, "max_routes")
    routes_per_batch: int = default_of(Search, "routes_per_job")
    route_timeout: float = float(default_of(Search, "route_timeout_seconds"))
    timing: Timing = field(default_factory=Timing)  # a dict of its fields is accepted too
    noise_margin: float = default_of(Search, "noise_margin")
    top_k: int = default_of(Confirm, "top_k")
    confirm_rounds: int = default_of(Confirm, "rounds")
    confirm_loads: int = default_of(Confirm, "loads")
    measure_uncompiled: bool = default_of(Search, "measure_uncompiled")
    save_all_engines: bool = default_of(Search, "save_all_engines")
    backend_options: dict = field(default_factory=dict)
    build_parallelism: int | None = None  # None (the default): from the host's room (`--build-parallelism auto`)
    deadline: float | None = None  # epoch seconds: routes not started by then are skipped
    cache: Path | None = None  # cache directory shared between runs; default OUT/store
    reuse: str = default_of(Search, "reuse").value  # or "none": entries of earlier runs are never used

    def __post_init__(self) -> None:
        if not isinstance(self.timing, Timing):
            self.timing = Timing.model_validate(self.timing)

    def spec(self) -> LocalSpec:
        """These options as the TuningRun spec they stand for, read by the mappers a cluster run's
        spec goes through (`FlowSpec.of`, `WorkerContext.of`). Not validated: `tune` has never bounded
        its flags as the API server bounds a manifest (e.g. --confirm-rounds 1 leaves the round out)."""
        confirm = Confirm.model_construct(top_k=self.top_k, rounds=self.confirm_rounds, loads=self.confirm_loads)
        search = Search.model_construct(
            mode=SearchMode(self.mode),
            knobs=[KnobValues.model_construct(name=name, values=list(values)) for name, values in self.knobs],
            pinned=self.pinned,
            max_routes=self.max_routes,
            routes_per_job=self.routes_per_batch,
            # (tune's --route-timeout is a float of seconds; the spec's int is the API server's bound)
            route_timeout_seconds=self.route_timeout,  # type: ignore[arg-type]
            save_all_engines=self.save_all_engines,
            noise_margin=self.noise_margin,
            confirm=confirm,
            reuse=ReuseMode(self.reuse),
            measure_uncompiled=self.measure_uncompiled,
            # (`--build-parallelism auto`: the host's room for builds now, `worker.capacity`)
            build_parallelism=auto_build_parallelism() if self.build_parallelism is None else self.build_parallelism,
        )
        compiler = Compiler.model_construct(name=CompilerName(self.backend), settings=self.settings, input_shapes=[])
        return LocalSpec(compiler, search, self.timing)

    def fingerprint(self) -> dict:
        """What a resumed run must share with the interrupted one."""
        printed = {
            "backend": self.backend,
            "model_sha256": hashlib.sha256(self.model.read_bytes()).hexdigest(),
            "settings": self.settings,
            "pinned": self.pinned,
            "metric": self.metric,
            "threshold": self.threshold,
            # (minRoundsIfSlower only when not its default: a run.json written before it still resumes)
            "timing": self.timing.model_dump(
                exclude={"min_rounds_if_slower"}
                if self.timing.min_rounds_if_slower == default_of(Timing, "min_rounds_if_slower")
                else None
            ),
            "inputs": [hashlib.sha256(p.read_bytes()).hexdigest() for p in self.inputs],
            "references": [hashlib.sha256(p.read_bytes()).hexdigest() for p in self.references],
        }
        if self.outputs:  # (only when given: a run.json written before the option still resumes)
            printed["outputs"] = sorted(self.outputs)
        return printed


@dataclass(frozen=True)
class LocalSpec:
    """The parts of a `TuningRunSpec` that `tune`'s options stand for: the compiler, the search and
    the timing (the model, the reference data and the target are local files and this machine)."""

    compiler: Compiler
    search: Search
    timing: Timing


@dataclass
class TuneResult:
    summary: dict
    entries: list[CacheEntry]
    decision: Decision


def tune(
    opts: TuneOptions, say: Callable[[str], None] = print, on_plan: Callable[[int], None] | None = None
) -> TuneResult:
    """Run the whole flow in local processes; `say` gets progress lines, `on_plan` the number of
    routes planned so far (after stage 1, and again after mixed's stage 2). The steps come from
    `search.flow.next_step`, the same function the controller executes as Jobs. The reference data is
    checked against the model's signature first: a misfit is refused, and --out left as it was. The
    first batch's build and serving processes are launched before that check (`Worker.start_ahead`):
    reading a PyTorch model's signature and listing Inductor's knobs import torch here, 7.2 s of an
    MLP's run on an H100's host (session 30), while those processes do their own imports."""
    from enginewright.backends import get_backend

    began = (time.monotonic(), cpu_seconds())
    backend = get_backend(opts.backend, **opts.backend_options)
    _refuse_another_run(opts)  # (an --out of other inputs: refused before anything is launched into it)
    untouched = [path for path in (opts.out, opts.out / "work") if not path.exists()]
    store = LocalStore(opts.cache or opts.out / "store")
    local = opts.spec()
    worker = Worker(
        _context(opts, local, backend, store, say),
        ahead=local.search.confirm.top_k > 0 and local.search.confirm.rounds >= 2,
        beside_first_build=_prepare_report,
    )
    try:
        worker.start_ahead()
        backend.knobs()  # a compiler that is not installed says so (BackendUnavailable) before the data is read
        _check_data(opts, backend)
    except BaseException:
        worker.close()
        if untouched:  # (--out, or its work folder, made only for the processes launched ahead)
            shutil.rmtree(untouched[0], ignore_errors=True)
        raise
    try:
        opts.out.mkdir(parents=True, exist_ok=True)
        first_attempt = _check_resume(opts)
        before = set(store.list(RunKeys(LOCAL_PREFIX).entries))
        worker.ctx.run = _run_id(opts.out)
        try:
            return _tune(opts, local, store, say, on_plan, worker, backend, began)
        except Exception:
            worker.close()  # (its processes ended before a failed first attempt's entries are moved aside)
            if first_attempt:
                _forget_failed_attempt(opts, store, before, say)
            raise
    finally:
        worker.close()


FAILED_ATTEMPT = "failed-attempt"  # OUT/failed-attempt/<route-id>.json: what a failed first attempt measured


def _forget_failed_attempt(opts: TuneOptions, store: LocalStore, before: set[str], say) -> None:
    """A first attempt that failed (a wrong input, references of another model, a model the backend
    cannot load) and measured no route that passed leaves behind neither the lock that would refuse
    the corrected command on the same --out nor its entries, which a rerun would take as the
    routes' results: they are moved to OUT/failed-attempt/ to be read."""
    written = [key for key in store.list(RunKeys(LOCAL_PREFIX).entries) if key not in before]
    for key in written:
        try:
            if CacheEntry.from_json(store.get(key)).passed:
                return  # results worth resuming: the lock stays
        except ValueError:
            pass
    aside = opts.out / FAILED_ATTEMPT
    shutil.rmtree(aside, ignore_errors=True)
    if written:
        aside.mkdir(parents=True)
    for key in written:
        (aside / key.rsplit("/", 1)[-1]).write_bytes(store.get(key))
        store.delete(key)
    (opts.out / "run.json").unlink(missing_ok=True)
    say(
        f"this first attempt failed and measured nothing usable: {opts.out} is not kept for it (fix the problem "
        f"and run the same command again)" + (f"; its {len(written)} entries are in {aside}" if written else "")
    )


def _prepare_report() -> None:
    """The report's imports (its module and matplotlib), done while the first routes build: drawing
    the figure took 1.6 s at the end of an MLP's run on an H100 (session 30)."""
    from enginewright.report import prepare_figure

    prepare_figure()


def _context(
    opts: TuneOptions, local: LocalSpec, backend, store: LocalStore, say: Callable[[str], None]
) -> WorkerContext:
    """The worker's context for this run (its run id is set once --out/run.json is written)."""
    return WorkerContext.of(
        local,
        model=opts.model,
        store=store,
        prefix=LOCAL_PREFIX,
        target=TARGET,
        workdir=opts.out / "work",
        engine_suffix=backend.engine_suffix,
        deadline=opts.deadline,
        progress=say,
        accuracy=Accuracy(
            opts.inputs, opts.references, opts.metric, opts.threshold, opts.atol, opts.rtol, list(opts.outputs)
        ),
        backend_options=opts.backend_options,
        reuse=local.search.reuse is not ReuseMode.none,
    )


def _tune(
    opts: TuneOptions,
    local: LocalSpec,
    store: LocalStore,
    say: Callable[[str], None],
    on_plan: Callable[[int], None] | None,
    worker,
    backend,
    began: tuple[float, float],
) -> TuneResult:
    """The run once its data fits: one process runs every batch and the confirmation (`worker`,
    whose first batch's processes `tune` launched ahead; each batch launches the confirmation's
    serving process as it starts, `Worker.ahead`, when a confirmation may follow), after the
    backend's versions and the routes imported from the cache."""
    from enginewright.catalog.compatibility import compiler_name
    from enginewright.trtexec.imports import usable_entries

    ctx = worker.ctx
    compiler = backend.cache_compiler()  # (the backend's versions: Inductor's imports torch and asks CUDA)
    seeds, not_used = usable_entries(store.root, TARGET, compiler)
    for note in not_used:
        say(note)
    if seeds:
        say(f"{len(seeds)} routes imported for {compiler} in {store.root}: not measured again")
    ctx.compiler, ctx.seeds = compiler_name(compiler), seeds
    return _search(opts, local, store, say, on_plan, worker, backend, compiler, began)


def _search(
    opts: TuneOptions,
    local,
    store: LocalStore,
    say: Callable[[str], None],
    on_plan: Callable[[int], None] | None,
    worker,
    backend,
    compiler: str,
    began: tuple[float, float],
) -> TuneResult:
    """`_tune`'s search, report and result, its worker's first processes launched ahead; `began`: the
    run's start (monotonic, CPU seconds)."""
    from enginewright.trtexec.imports import export_imports, imports_under

    ctx, cache_dir = worker.ctx, store.root
    ctx.fingerprint = fingerprint = context_fingerprint(ctx, backend.versions())
    spec = FlowSpec.of(local)
    knobs = backend.knobs()
    default_id = first_step(spec, knobs).default.id  # nothing measured: stage 1, from the default
    reused = sum(e.reused and e.route_id != default_id for e in worker.existing().values())
    if reused:
        say(
            f"{reused} routes of earlier runs with this run's fingerprint in {cache_dir}: not built again "
            f"(the default is measured fresh, and a reused route wins only once confirmed against it)"
        )
    confirmations = _saved_confirmations(opts.out)
    ran: set[str] = set()  # batches run by this process: one that still lacks entries is given up
    said: set[str] = set()
    while True:
        out_of_time = opts.deadline is not None and time.time() >= opts.deadline
        step = next_step(spec, Observed(knobs, worker.existing(), confirmations, frozenset(ran), out_of_time))
        if isinstance(step, RunBatches):
            if on_plan:
                on_plan(step.planned)
            say(step.note)
            said.add(step.note)
            for batch in step.batches:
                worker.run_batch(batch.routes, batch.stage, batch.name, step.default)
                ran.add(batch.name)
        elif isinstance(step, RunConfirmation):
            rounds = worker.confirm(list(step.candidates), step.default, step.rounds, step.loads)
            confirmations[step.name] = rounds
            (opts.out / "confirm.json").write_text(json.dumps({"name": step.name, "rounds": rounds}))
            ran.add(step.name)
        elif isinstance(step, Failed):
            raise TuneError(step.message)
        else:
            break
    worker.close()  # what was launched ahead and never used, before the report (`_tune` closes it on a failure)
    for note in step.notes:
        if note not in said:
            say(note)
    if step.cut_short:
        say(f"search cut short: {step.cut_short}")
    all_entries = list(step.entries)
    summary = _summary(opts, step, began[0])
    summary["cpu_seconds"] = round(cpu_seconds() - began[1], 2)
    summary["builds_at_once"] = worker.ctx.build_parallelism  # (`--build-parallelism auto`: the host's)
    summary["fingerprint"] = fingerprint.digest
    summary["cache"] = str(cache_dir)
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2))
    used = [i for i in imports_under(store.root / LOCAL_PREFIX, TARGET) if i.compiler == compiler]
    if used:  # the imported files as they were, then this run's routes
        export_imports(opts.out / "trtexec-cache.jsonl", used, all_entries, metric=opts.metric)
    else:
        (opts.out / "trtexec-cache.jsonl").write_text(
            export_trtexec(
                sorted(all_entries, key=lambda e: (e.stage, e.started_at or "")),
                metric=opts.metric,
                atol=opts.atol,
                rtol=opts.rtol,
                search_mode=opts.mode,
                threshold=opts.threshold,
                # the default route as it was built: base settings applied
                knobs=as_built(knobs, spec.settings, settings_are_knobs=spec.settings_are_knobs),
                tuner_version=compiler.removeprefix("tensorrt-tuner-"),
                files=trtexec_files(opts.model, opts.inputs[0], opts.references[0] if opts.references else None),
            )
        )
    from enginewright.report import render

    render(opts.out, summary, all_entries)
    return TuneResult(summary, all_entries, step.decision)


def _check_data(opts: TuneOptions, backend) -> None:
    """The reference pairs against the model's signature, before anything is built (the probe's check)."""
    from enginewright.worker.reference_data import check_pairs

    try:
        signature = backend.signature(opts.model, opts.settings)
    except Exception as exc:  # the parser's own error for a corrupt model
        raise TuneError(f"{opts.model} is not a model the {opts.backend} backend can read: {exc}") from None
    if signature is None:
        return
    labels = [
        (f"--inputs {path}", f"--references {opts.references[i]}" if i < len(opts.references) else "")
        for i, path in enumerate(opts.inputs)
    ]
    found = check_pairs(signature, opts.inputs, opts.references or None, labels, opts.outputs)
    if found:
        raise TuneError(f"the reference data does not fit {opts.model}: {found}")


def _saved_confirmations(out: Path) -> dict[str, dict[str, list[float]]]:
    """The confirmation round an interrupted run already finished (resume)."""
    path = out / "confirm.json"
    if not path.exists():
        return {}
    saved = json.loads(path.read_text())
    return {saved["name"]: saved["rounds"]} if "name" in saved else {}


def _refuse_another_run(opts: TuneOptions) -> None:
    """Refuse an --out that holds a run of other inputs (reading it only)."""
    path = opts.out / "run.json"
    if path.exists():
        fingerprint, previous = opts.fingerprint(), json.loads(path.read_text())
        changed = sorted(k for k in fingerprint if previous.get(k) != fingerprint[k])
        if changed:
            raise TuneError(
                f"{opts.out} holds a run with different {', '.join(changed)}: its cache cannot be "
                f"reused. Use another --out directory (or delete this one)."
            )


def _check_resume(opts: TuneOptions) -> bool:
    """True when this is --out's first attempt: its run.json is written now (an --out of other inputs
    was refused before, `_refuse_another_run`)."""
    path = opts.out / "run.json"
    if path.exists():
        return False
    path.write_text(json.dumps(opts.fingerprint(), indent=2))
    return True


def _run_id(out: Path) -> str:
    """The id of the run in --out (kept in OUT/run.json: a resumed run is the same run, and its own
    entries, the default's included, are used as they are)."""
    path = out / "run.json"
    saved = json.loads(path.read_text())
    if not saved.get(RUN_ID):
        saved[RUN_ID] = uuid.uuid4().hex[:12]
        path.write_text(json.dumps(saved, indent=2))
    return saved[RUN_ID]


def cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process, every thread of it, and by its child
    processes that have ended and been waited for (builds, serving processes): what a run costs on a
    shared host, which its wall time on a busy one overstates and on an idle many-core one hides."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


RUN_ID = "run_id"  # a key of OUT/run.json, beside the fingerprint a resume must match


def _summary(opts, step: Decided, began: float) -> dict:
    return {
        "model": opts.model.name,
        "backend": opts.backend,
        "mode": opts.mode,
        "metric": opts.metric,
        "threshold": opts.threshold,
        **step.summary(),
        "wall_seconds": round(time.monotonic() - began, 2),
        "options": {
            k: (str(v) if isinstance(v, Path) else v.model_dump() if isinstance(v, Timing) else v)
            for k, v in asdict(opts).items()
            if k not in ("inputs", "references", "cache", "deadline")
        },
    }
