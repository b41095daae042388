"""The worker: a batch of routes for one target in, one cache entry per route out.

Each route is built in one child process and measured in a second, fresh one (the engine bytes that
are measured are the bytes that get kept and published). Every entry is written to the store the
moment it is known, and routes that already have an entry are skipped, so a killed worker loses at
most the route in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from enginewright import failpoints
from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions, now_iso
from enginewright.api.models import Timing
from enginewright.worker.child import ChildRequest
from enginewright.search.routes import Route
from enginewright.store.layout import RunKeys

log = logging.getLogger("enginewright.worker")


@dataclass
class Accuracy:
    """What the worker checks outputs against (local paths of the downloaded .npz files)."""

    inputs: list[Path]
    references: list[Path]
    metric: str = "cosine"
    threshold: float | None = None
    atol: float = 1e-5
    rtol: float = 1e-5

    @property
    def enabled(self) -> bool:
        return bool(self.references) and self.threshold is not None


@dataclass
class WorkerContext:
    """Everything one worker invocation needs, whatever started it (a Job or `enginewright tune`)."""

    backend: str
    model: Path
    accuracy: Accuracy
    store: object  # store.ObjectStore
    prefix: str  # e.g. runs/<ns>/<run>-<uid8>/<gpu-type>
    target: str
    workdir: Path
    engine_suffix: str = ".engine"
    settings: dict[str, str] = field(default_factory=dict)
    input_shapes: list[dict] = field(default_factory=list)
    timing: Timing = field(default_factory=Timing)  # a dict of its fields is accepted too
    route_timeout: float = 900.0
    deadline: float | None = None  # epoch seconds; routes not started by then are skipped
    save_all_engines: bool = False
    backend_options: dict = field(default_factory=dict)
    build_parallelism: int = 1
    progress: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.timing, Timing):
            self.timing = Timing.model_validate(self.timing)

    def child_request(self, action: str, workdir: Path, engine: Path, **fields) -> ChildRequest:
        """A request for a child process of this worker: its backend and timing, plus `fields`."""
        return ChildRequest(action=action, backend=self.backend, backend_options=self.backend_options,
                            workdir=str(workdir), engine=str(engine), timing=self.timing, **fields)

    @property
    def keys(self) -> RunKeys:
        return RunKeys(self.prefix)

    def entry_key(self, route_id: str) -> str:
        return self.keys.entry(route_id)

    def engine_key(self, route_id: str) -> str:
        return self.keys.engine(route_id, self.engine_suffix)

    def say(self, message: str) -> None:
        log.info(message)
        if self.progress:
            self.progress(message)


@dataclass
class Built:
    """A route after its build step: the entry so far, and the engine file (None if it failed)."""

    route: Route
    entry: CacheEntry
    engine_path: Path | None


@dataclass
class ChildResult:
    ok: bool
    data: dict
    outcome: Outcome | None = None  # set when the child failed
    error: str | None = None


def run_child(ctx: WorkerContext, request: ChildRequest, timeout: float, failure: Outcome) -> ChildResult:
    """Run one child step in its own process group; a timeout kills the whole group."""
    folder = Path(request.workdir)
    folder.mkdir(parents=True, exist_ok=True)
    request = request.model_copy(update={"result": str(folder / f"{request.action}-result.json")})
    Path(request.result).unlink(missing_ok=True)
    request_path = folder / f"{request.action}-request.json"
    request_path.write_text(request.model_dump_json())
    log_path = folder / f"{request.action}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "enginewright.worker.child", str(request_path)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return ChildResult(False, {}, Outcome.timeout, f"{request.action} exceeded {timeout:.0f}s")
        finally:
            _kill_group(proc)  # leftovers of the child's own children
    result_path = Path(request.result)
    if not result_path.exists():
        tail = log_path.read_text(errors="replace")[-1500:].strip()
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
        return ChildResult(False, {}, Outcome.crash, f"{request.action} process {how}" + (f": {tail}" if tail else ""))
    data = json.loads(result_path.read_text())
    if not data.get("ok"):
        return ChildResult(False, data, failure, data.get("error"))
    return ChildResult(True, data)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class Worker:
    """Builds, checks and times routes for one target; writes entries and keeps engines."""

    def __init__(self, ctx: WorkerContext):
        self.ctx = ctx

    # ------------------------------------------------------------------ store
    def existing(self) -> dict[str, CacheEntry]:
        """Entries already in the store; one that does not parse (truncated, corrupt) counts as
        missing, so its route is measured again and the entry rewritten."""
        entries = {}
        for key in self.ctx.store.list(self.ctx.keys.entries):
            try:
                entry = CacheEntry.from_json(self.ctx.store.get(key))
            except ValueError as exc:
                log.warning("ignoring unreadable cache entry %s: %s", key, str(exc)[:200])
                continue
            entries[entry.route_id] = entry
        return entries

    def _write(self, entry: CacheEntry) -> None:
        data = entry.to_json().encode()
        if failpoints.hit("entry-write") == "corrupt":
            data = data[:len(data) // 2]  # a fault test's truncated upload
        self.ctx.store.put(self.ctx.entry_key(entry.route_id), data,
                           {"route-id": entry.route_id, "outcome": entry.outcome.value})

    # ------------------------------------------------------------------ one route
    def build(self, route: Route, stage: str, batch: str) -> Built:
        """Build `route` in a child process; the engine file stays in the route's folder."""
        ctx = self.ctx
        folder = ctx.workdir / "routes" / route.id
        shutil.rmtree(folder, ignore_errors=True)
        engine_path = folder / f"engine{ctx.engine_suffix}"
        entry = CacheEntry(target=ctx.target, route_id=route.id, route=route.canonical, knobs=route.as_dict,
                           stage=stage, batch=batch, outcome=Outcome.ok, started_at=now_iso())
        result = run_child(ctx, ctx.child_request("build", folder, engine_path, model=str(ctx.model),
                                                  settings=ctx.settings, input_shapes=ctx.input_shapes,
                                                  route=route.as_dict, inputs=[str(ctx.accuracy.inputs[0])]),
                           min(ctx.route_timeout, self._time_left()), Outcome.build_failed)
        if not result.ok:
            return Built(route, entry.model_copy(update={"outcome": result.outcome, "error": result.error,
                                                         "finished_at": now_iso()}), None)
        engine = engine_path.read_bytes()
        return Built(route, entry.model_copy(update={
            "build_seconds": round(result.data["build_seconds"], 3),
            "engine_sha256": hashlib.sha256(engine).hexdigest(), "engine_size": len(engine)}), engine_path)

    def measure(self, built: Built) -> CacheEntry:
        """Load the built engine in a fresh child, check accuracy, time it."""
        ctx, entry = self.ctx, built.entry
        if built.engine_path is None:
            return entry
        folder = built.engine_path.parent
        accuracy = ctx.accuracy
        measured = run_child(ctx, ctx.child_request(
                                 "measure", folder, built.engine_path, inputs=[str(p) for p in accuracy.inputs],
                                 references=[str(p) for p in accuracy.references] if accuracy.enabled else [],
                                 metric=accuracy.metric, threshold=accuracy.threshold, atol=accuracy.atol,
                                 rtol=accuracy.rtol),
                             max(10.0, min(ctx.route_timeout - (entry.build_seconds or 0), self._time_left())),
                             Outcome.crash)
        if not measured.ok:
            return entry.model_copy(update={"outcome": measured.outcome, "error": measured.error,
                                            "finished_at": now_iso()})
        data = measured.data
        versions = Versions.model_validate(data["versions"])
        if os.environ.get("NODE_NAME"):
            versions = versions.model_copy(update={"node": os.environ["NODE_NAME"]})
        update = {"versions": versions, "loss": data.get("loss"), "load_info": data.get("load_info"),
                  "timing": TimingStats.model_validate(data["timing"]) if data.get("timing") else None,
                  "finished_at": now_iso()}
        if not data.get("passed", True):
            update.update(outcome=Outcome.accuracy_rejected, error=data.get("summary"))
        return entry.model_copy(update=update)

    def _time_left(self) -> float:
        if self.ctx.deadline is None:
            return float("inf")
        return max(0.0, self.ctx.deadline - time.time())

    def _keep(self, entry: CacheEntry, engine_path: Path, baseline_ms: float | None, is_default: bool) -> CacheEntry:
        """Upload the engine when it may win (or the run keeps them all)."""
        faster = entry.passed and baseline_ms is not None and entry.median_ms < baseline_ms
        if is_default or faster or self.ctx.save_all_engines:
            key = self.ctx.engine_key(entry.route_id)
            self.ctx.store.put(key, engine_path.read_bytes(), {"route-id": entry.route_id, "route": entry.route})
            return entry.model_copy(update={"engine_uri": self.ctx.store.uri(key)})
        return entry

    # ------------------------------------------------------------------ a batch
    def run_batch(self, routes: Sequence[Route], stage: str, batch: str, default: Route) -> list[CacheEntry]:
        """Measure the default route first (this batch's baseline on this device), then every route
        of the batch that has no entry yet. Routes are built `build_parallelism` at a time and then
        measured one at a time, so measuring never overlaps a build and a killed worker loses at most
        the routes of the group in flight (one route with the default parallelism of 1). A route whose
        build or measurement the run's deadline cut short gets no entry (its timeout says nothing
        about the route).
        Returns the entries written by this call."""
        ctx = self.ctx
        done = self.existing()
        todo = [r for r in routes if r.id not in done and r.id != default.id]
        # Only the batch that lists the default route writes its entry and engine: batches running at
        # once each measure the default as their own baseline, and a rebuild gives other bytes, so two
        # writers could leave an entry whose digest is not the kept engine's.
        owns_default = any(r.id == default.id for r in routes)
        if not todo and (default.id in done or not owns_default):
            ctx.say(f"[{batch}] all {len(routes)} routes already measured; nothing to do")
            return []
        if self._time_left() <= 0:
            ctx.say(f"[{batch}] deadline reached: {len(todo)} routes left unmeasured")
            return []
        width = max(1, ctx.build_parallelism)
        ctx.say(f"[{batch}] {len(todo) + 1} routes (default included), built {width} at a time")
        queue = [default, *todo]
        groups = [queue[i:i + width] for i in range(0, len(queue), width)]
        written: list[CacheEntry] = []
        baseline_ms: float | None = None
        measured = 0
        with ThreadPoolExecutor(max_workers=width) as pool:
            for group in groups:
                if self._time_left() <= 0:
                    ctx.say(f"[{batch}] deadline reached: {len(todo) - measured} routes left unmeasured")
                    break
                # The whole group is built before its first measurement: a route timed next to a
                # running compilation would time the compiler's load, not the engine.
                for built in list(pool.map(lambda r: self.build(r, stage, batch), group)):
                    entry = self.measure(built)
                    is_default = built.route.id == default.id
                    # Cut short by the run's deadline, not slow on its own: not cached, so a resumed or
                    # later run measures it.
                    cut = entry.outcome is Outcome.timeout and self._time_left() <= 0
                    if cut:
                        ctx.say(f"[{batch}] deadline reached while {built.route} was in flight: "
                                f"not recorded, a later run retries it")
                    elif is_default and not entry.passed:
                        ctx.say(f"[{batch}] the default route failed ({entry.outcome.value}): {entry.error}")
                        if default.id not in done and owns_default:
                            self._write(entry)
                            written.append(entry)
                        return written
                    elif is_default:
                        baseline_ms = entry.median_ms
                        if default.id not in done and owns_default:  # written before the line: progress counts it
                            entry = self._keep(entry.model_copy(update={"baseline_ms": baseline_ms}),
                                               built.engine_path, baseline_ms, is_default=True)
                            self._write(entry)
                            written.append(entry)
                        ctx.say(f"[{batch}] default route (baseline): {baseline_ms:.4f} ms")
                    else:
                        measured += 1
                        entry = entry.model_copy(update={"baseline_ms": baseline_ms})
                        if built.engine_path is not None and entry.outcome in (Outcome.ok, Outcome.accuracy_rejected):
                            entry = self._keep(entry, built.engine_path, baseline_ms, is_default=False)
                        self._write(entry)
                        written.append(entry)
                        ctx.say(f"[{batch}] route {measured}/{len(todo)} {built.route}: {describe(entry)}")
                    shutil.rmtree(ctx.workdir / "routes" / built.route.id, ignore_errors=True)
                    if cut and is_default:
                        return written
        return written

    # ------------------------------------------------------------------ confirmation
    def confirm(self, candidates: Sequence[CacheEntry], default: CacheEntry, rounds: int) -> dict[str, list[float]]:
        """Interleaved re-measurement of the kept engines of `candidates` and the default."""
        ctx = self.ctx
        folder = ctx.workdir / "confirm"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        engines = {}
        for entry in [default, *candidates]:
            path = folder / f"{entry.route_id}{ctx.engine_suffix}"
            path.write_bytes(ctx.store.get(ctx.engine_key(entry.route_id)))
            engines[entry.route_id] = path
        ctx.say(f"[confirm] {len(candidates)} candidates vs the default, {rounds} interleaved rounds")
        return self.interleave(engines, rounds, folder)

    def interleave(self, engines: dict[str, Path], rounds: int, folder: Path) -> dict[str, list[float]]:
        """Time each engine once per round (A B C, B C A, ...), every engine held loaded in a process
        of its own and only one measuring at a time. Returns per-round median times by key."""
        ctx = self.ctx
        servers: dict[str, subprocess.Popen] = {}
        try:
            for key, path in engines.items():
                workdir = folder / f"serve-{key}"
                workdir.mkdir(parents=True, exist_ok=True)
                request = ctx.child_request("serve", workdir, path, inputs=[str(ctx.accuracy.inputs[0])])
                (workdir / "request.json").write_text(request.model_dump_json())
                with open(workdir / "serve.log", "wb") as log_file:
                    servers[key] = subprocess.Popen(
                        [sys.executable, "-m", "enginewright.worker.child", str(workdir / "request.json")],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
                        start_new_session=True)
            for key in servers:  # loading runs in parallel; wait until every engine is warm
                self._reply(servers[key], key, folder, ctx.route_timeout)
            keys = list(engines)
            times: dict[str, list[float]] = {key: [] for key in keys}
            for index in range(rounds):
                shift = index % len(keys)
                for key in keys[shift:] + keys[:shift]:
                    servers[key].stdin.write("measure\n")
                    servers[key].stdin.flush()
                    times[key].append(self._reply(servers[key], key, folder, ctx.route_timeout)["median_ms"])
            return times
        finally:
            for proc in servers.values():
                try:
                    proc.stdin.close()
                except OSError:
                    pass
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                _kill_group(proc)

    @staticmethod
    def _reply(proc: subprocess.Popen, key: str, folder: Path, timeout: float) -> dict:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if not line:
            log_tail = (folder / f"serve-{key}" / "serve.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"confirmation: the process holding engine {key} did not answer: {log_tail}")
        return json.loads(line)


def describe(entry: CacheEntry) -> str:
    """One human line for a finished route."""
    if entry.outcome in (Outcome.crash, Outcome.build_failed, Outcome.timeout):
        return f"{entry.outcome.value}: {(entry.error or '').splitlines()[0][:200]}"
    parts = [entry.outcome.value]
    if entry.timing:
        parts.append(f"{entry.timing.median_ms:.4f} ms")
        if entry.baseline_ms:
            parts.append(f"({entry.baseline_ms / entry.timing.median_ms:.3f}x vs default)")
    if entry.loss:
        parts.append(f"max loss {max(entry.loss.values()):.3g}")
    if entry.build_seconds is not None:
        parts.append(f"build {entry.build_seconds:.1f}s")
    return ", ".join(parts)

