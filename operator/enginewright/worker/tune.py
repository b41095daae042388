"""The whole tuning flow on one machine: plan, measure in batches, mixed stage 2, confirmation,
winner, report. Powers `enginewright tune`; the operator runs the same steps spread over Jobs."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from enginewright.api.cache import CacheEntry, Outcome, export_trtexec
from enginewright.search.planners import (build_space, improving_values, make_batches, plan_mixed_stage2,
                                          plan_stage1)
from enginewright.search.routes import Route
from enginewright.search.winner import Decision, choose_winner, confirm, noise_margin, rank_candidates
from enginewright.store import LocalStore
from enginewright.worker.batch import Accuracy, Worker, WorkerContext

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
    metric: str = "cosine"
    threshold: float | None = None
    atol: float = 1e-5
    rtol: float = 1e-5
    mode: str = "fast"
    knobs: list[tuple[str, list[str]]] = field(default_factory=list)
    pinned: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    max_routes: int = 64
    routes_per_batch: int = 8
    route_timeout: float = 900.0
    timing: dict = field(default_factory=lambda: {"warmup_iterations": 10, "iterations": 50, "repeats": 7,
                                                  "min_seconds": 0.5})
    noise_margin: float = 0.03
    top_k: int = 3
    confirm_rounds: int = 5
    save_all_engines: bool = False
    backend_options: dict = field(default_factory=dict)
    build_parallelism: int = 1
    deadline: float | None = None  # epoch seconds: routes not started by then are skipped
    cache: Path | None = None  # cache directory shared between runs; default OUT/store

    def fingerprint(self) -> dict:
        """What a resumed run must share with the interrupted one."""
        return {"backend": self.backend, "model_sha256": hashlib.sha256(self.model.read_bytes()).hexdigest(),
                "settings": self.settings, "pinned": self.pinned, "metric": self.metric, "threshold": self.threshold,
                "timing": self.timing, "inputs": [hashlib.sha256(p.read_bytes()).hexdigest() for p in self.inputs],
                "references": [hashlib.sha256(p.read_bytes()).hexdigest() for p in self.references]}


@dataclass
class TuneResult:
    summary: dict
    entries: list[CacheEntry]
    decision: Decision


def tune(opts: TuneOptions, say: Callable[[str], None] = print,
         on_plan: Callable[[int], None] | None = None) -> TuneResult:
    """Run the whole flow; `say` gets progress lines, `on_plan` the number of routes planned so far
    (after stage 1, and again after mixed's stage 2)."""
    from enginewright.backends import get_backend
    began = time.monotonic()
    opts.out.mkdir(parents=True, exist_ok=True)
    _check_resume(opts)
    backend = get_backend(opts.backend, **opts.backend_options)
    space = build_space(backend.knobs(), opts.knobs, opts.pinned)
    stage1 = plan_stage1(opts.mode, space, opts.pinned, opts.max_routes)
    default = stage1[0]
    ctx = WorkerContext(
        backend=opts.backend, model=opts.model, store=LocalStore(opts.cache or opts.out / "store"), prefix=f"runs/{TARGET}",
        target=TARGET, workdir=opts.out / "work", engine_suffix=backend.engine_suffix, settings=opts.settings,
        accuracy=Accuracy(opts.inputs, opts.references, opts.metric, opts.threshold, opts.atol, opts.rtol),
        timing=opts.timing, route_timeout=opts.route_timeout, save_all_engines=opts.save_all_engines,
        backend_options=opts.backend_options, build_parallelism=opts.build_parallelism, deadline=opts.deadline,
        progress=say)
    worker = Worker(ctx)
    if on_plan:
        on_plan(len(stage1))
    say(f"{opts.mode} search: {len(stage1)} routes in stage 1 ({len(worker.existing())} already in the cache)")
    for batch in make_batches(stage1, opts.routes_per_batch, "stage1"):
        worker.run_batch(batch.routes, "stage1", batch.name, default)
    planned = {r.id for r in stage1}
    entries = _planned(worker, planned)
    default_entry = entries.get(default.id)
    _check_default(default_entry, entries)
    margin = noise_margin(list(entries.values()), opts.noise_margin)

    if opts.mode == "mixed":
        improving = improving_values(space, list(entries.values()), default_entry.median_ms, margin)
        stage2 = plan_mixed_stage2(space, improving, opts.pinned, budget=max(0, opts.max_routes - len(stage1)))
        if on_plan:
            on_plan(len(stage1) + len(stage2))
        say(f"stage 2: {len(improving)} improving knobs ({', '.join(sorted(improving)) or 'none'}) "
            f"-> {len(stage2)} combined routes")
        for batch in make_batches(stage2, opts.routes_per_batch, "stage2"):
            worker.run_batch(batch.routes, "stage2", batch.name, default)
        planned |= {r.id for r in stage2}
        entries = _planned(worker, planned)
        margin = noise_margin(list(entries.values()), opts.noise_margin)

    all_entries = list(entries.values())
    decision = choose_winner(all_entries, default.id, margin)
    candidates = [e for e in rank_candidates(all_entries, default.id, default_entry.median_ms)
                  if e.engine_uri][:opts.top_k]
    if opts.top_k and opts.confirm_rounds >= 2 and candidates and (opts.deadline is None or time.time() < opts.deadline):
        decision = _confirm(worker, candidates, default_entry, opts, margin)
    summary = _summary(opts, backend, default, decision, all_entries, began)
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2))
    (opts.out / "trtexec-cache.jsonl").write_text(export_trtexec(
        sorted(all_entries, key=lambda e: (e.stage, e.started_at or "")), metric=opts.metric, atol=opts.atol,
        rtol=opts.rtol, search_mode=opts.mode))
    from enginewright.report import render
    render(opts.out, summary, all_entries)
    return TuneResult(summary, all_entries, decision)


def _planned(worker: Worker, planned: set[str]) -> dict[str, CacheEntry]:
    """Entries of this run's routes only: a shared cache may hold other runs' routes too."""
    return {rid: e for rid, e in worker.existing().items() if rid in planned}


def _check_resume(opts: TuneOptions) -> None:
    path = opts.out / "run.json"
    fingerprint = opts.fingerprint()
    if path.exists():
        previous = json.loads(path.read_text())
        changed = sorted(k for k in fingerprint if previous.get(k) != fingerprint[k])
        if changed:
            raise TuneError(f"{opts.out} holds a run with different {', '.join(changed)}: its cache cannot be "
                            f"reused. Use another --out directory (or delete this one).")
    path.write_text(json.dumps(fingerprint, indent=2))


def _check_default(default_entry: CacheEntry | None, entries: dict[str, CacheEntry]) -> None:
    if default_entry is None:
        raise TuneError("the default route was not measured (deadline or interrupted before it finished)")
    if default_entry.outcome is Outcome.accuracy_rejected:
        rejected = sum(e.outcome is Outcome.accuracy_rejected for e in entries.values())
        raise TuneError(f"every measured route failed accuracy validation, including the default route "
                        f"({rejected} of {len(entries)} rejected; default: {default_entry.error}). The reference "
                        f"outputs do not match this model: check the --references files, the metric and "
                        f"the threshold.")
    if not default_entry.passed:
        raise TuneError(f"the default route failed ({default_entry.outcome.value}): {default_entry.error}")


def _confirm(worker: Worker, candidates, default_entry, opts: TuneOptions, margin: float) -> Decision:
    """Run (or, on resume, reuse) the interleaved confirmation round."""
    path = opts.out / "confirm.json"
    ids = sorted(e.route_id for e in candidates)
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("ids") == ids and saved.get("rounds_requested") == opts.confirm_rounds:
            return confirm(saved["rounds"], default_entry.route_id, margin)
    rounds = worker.confirm(candidates, default_entry, opts.confirm_rounds)
    path.write_text(json.dumps({"ids": ids, "rounds_requested": opts.confirm_rounds, "rounds": rounds}))
    return confirm(rounds, default_entry.route_id, margin)


def _summary(opts, backend, default: Route, decision: Decision, entries: list[CacheEntry], began: float) -> dict:
    by_id = {e.route_id: e for e in entries}
    winner = by_id[decision.winner_id]
    counts = {o.value: sum(e.outcome is o for e in entries) for o in Outcome}
    versions = next((e.versions for e in entries if e.versions), None)
    return {
        "model": opts.model.name, "backend": opts.backend, "mode": opts.mode, "metric": opts.metric,
        "threshold": opts.threshold, "noise_margin": round(decision.margin, 4),
        "versions": versions.wire() if versions else None,
        "default_id": default.id, "default_ms": by_id[default.id].median_ms,
        "winner_id": winner.route_id, "winner_route": winner.route, "winner_ms": winner.median_ms,
        "winner_loss": winner.loss, "winner_engine": winner.engine_uri, "winner_engine_sha256": winner.engine_sha256,
        "speedup": round(decision.speedup, 4), "decision": decision.reason, "confirmed": decision.confirmed,
        "confirmation": decision.ratios or None,
        "routes": counts, "build_seconds": round(sum(e.build_seconds or 0 for e in entries), 2),
        "measure_seconds": round(sum((e.timing.mean_ms * e.timing.n) / 1000 for e in entries if e.timing), 2),
        "wall_seconds": round(time.monotonic() - began, 2),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()
                    if k not in ("inputs", "references", "cache", "deadline")},
    }
