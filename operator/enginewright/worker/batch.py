"""The worker: a batch of routes for one target in, one cache entry per route out.

Each route is built in a process of its own, forked from the batch's build process (one interpreter
start a batch, not one a route: `process.Builders`); its engine bytes (the bytes that are measured are the bytes
that get kept and published) are then loaded into the serving process that holds the default route's
engine for the whole batch, and the two are timed there in paired rounds, interleaved block by block
on one thread (`measure.paired`, `rounds.interleaved_round`). Every entry is written to the store the moment it is known,
and routes that already have an entry are skipped, so a killed worker loses at most the route in
flight. One route's steps are `measure.py`'s; the default route's life in a batch is `DefaultRoute`.
"""

from __future__ import annotations

import logging
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from enginewright import failpoints
from enginewright.api.cache import CacheEntry, Outcome
from enginewright.api.routes import Route
from enginewright.measure.paired import (
    Spread,
)
from enginewright.search.winner import settled
from enginewright.worker.context import WorkerContext
from enginewright.worker.measure import (
    Built,
    build,
    interleave,
    kept_bytes,
    kept_engine,
    load,
    measure_default,
    measure_paired,
    measured_with_this_fingerprint,
)
from enginewright.worker.process import Builders
from enginewright.worker.server import Server, ServerFailed, primer

log = logging.getLogger("enginewright.worker")
KEPT_DEFAULT = "the default's engine an earlier batch kept (loaded, not built again)"


class Worker:
    """Builds, checks and times routes for one target; writes entries and keeps engines."""

    def __init__(self, ctx: WorkerContext, ahead: bool = False, beside_first_build: Callable[[], None] | None = None):
        """`ahead`: a run of several batches and a confirmation in this one process (`tune`): the
        fresh serving process the next confirmation loads into is launched ahead (`launch_ahead`),
        by `start_ahead` with the first batch's processes and, once that one was used, as the next
        batch starts, so that its interpreter start and imports (7-15 s on an H100's host, sessions
        27-28) run while tune starts or the batch builds, not after it. `close` ends one left unused.
        `beside_first_build`: work of the caller's own process (`tune`: the report's imports) run in
        a thread while the first batch's first group builds, and waited for before its first timing,
        so that it never runs beside one."""
        self.ctx, self.ahead = ctx, ahead
        self._beside_first_build = beside_first_build
        self._spread = Spread()  # lasting per-load spread of the routes measured so far (pooled)
        self._engines_checked: dict[tuple[str, str | None], bool] = {}  # reused entries' kept engines
        self._ahead: Server | None = None  # launched ahead (imports only) for the next confirmation
        # launched by `start_ahead` for the first batch: its build processes, its default's process
        self._first_builders: Builders | None = None
        self._first_default: Server | None = None

    def start_ahead(self) -> None:
        """Launch the next batch's build processes and its default's serving process now (and, with
        `ahead`, the confirmation's: `launch_ahead`), before
        the batch is planned (`tune`: while it finds the backend's versions and reads the cache), so
        that their imports (a build process's preload was 5.8 s on the H100's host, session 28) run
        meanwhile; `run_batch` takes them, `close` ends them unused."""
        ctx = self.ctx
        self._close_first()
        folder = ctx.workdir / "builds" / "ahead"
        shutil.rmtree(folder, ignore_errors=True)  # (a killed run's)
        self._first_builders = Builders(folder, max(1, ctx.build_parallelism))
        # any build request of the run serves: the build process uses its backend and settings
        self._first_builders.launch(
            ctx.child_request(
                "build", folder, "", model=str(ctx.model), settings=ctx.settings, input_shapes=ctx.input_shapes
            )
        )
        serve = ctx.workdir / "serve" / "ahead-default"
        shutil.rmtree(serve, ignore_errors=True)
        self._first_default = Server(ctx, primer("default"), None, serve, references=True)
        self._first_default.launch()
        if self.ahead:
            # the confirmation's too: launched at the batch's start, its imports outlasted the first
            # build, and the batch's first timing waited for them (6 s on an H100's host, session 28)
            self.launch_ahead()

    def _take_first(self, batch: str, width: int) -> tuple[Builders, Server | None]:
        """The build processes and the default's serving process `start_ahead` launched, else a
        batch's own build processes (launched at its first build) and None."""
        builders, self._first_builders = self._first_builders, None
        server, self._first_default = self._first_default, None
        if server is not None and not server.alive:
            discard(server)  # it died meanwhile: the batch launches its own (a build process restarts itself)
            server = None
        if builders is None or len(builders.all) != width:
            if builders is not None:
                builders.close()
            builders = Builders(self.ctx.workdir / "builds" / batch, width)
        return builders, server

    def _close_first(self) -> None:
        """End what `start_ahead` launched and no batch took, and remove its files (a batch that took
        them keeps their logs as its own)."""
        builders, server = self._first_builders, self._first_default
        self._first_builders = self._first_default = None
        if builders is not None:
            builders.close()
            shutil.rmtree(self.ctx.workdir / "builds" / "ahead", ignore_errors=True)
        if server is not None:
            discard(server)

    # ------------------------------------------------------------------ a process launched ahead
    def launch_ahead(self) -> None:
        """Launch a fresh serving process that only imports until a confirmation names its first
        engine (`child.await_engine`); none when one is held and running."""
        if self._ahead is not None and self._ahead.alive:
            return
        self._close_ahead()
        self._ahead = Server(self.ctx, primer("ahead"), None, self._ahead_folder, references=False)
        self._ahead.launch()

    def _imported_ahead(self) -> None:
        """Before a batch times anything: the process launched ahead has done its imports (it
        runs nothing beside a timing); one that failed meanwhile is closed (the confirmation then
        launches its own)."""
        if self._ahead is None:
            return
        try:  # (bounded by the run's deadline too: the batch does not need this process)
            self._ahead.wait_imported(min(self.ctx.route_timeout, max(10.0, self.ctx.time_left())))
        except ServerFailed as failed:
            log.warning("the serving process launched ahead for the confirmation failed: %s", failed.error)
            self._close_ahead()

    def _take_ahead(self) -> Server:
        """The process launched ahead, still running; else one launched now (`launch_ahead`)."""
        self.launch_ahead()
        held, self._ahead = self._ahead, None
        assert held is not None  # held and running, or just launched
        return held

    @property
    def _ahead_folder(self) -> Path:
        return self.ctx.workdir / "serve" / "ahead"

    def close(self) -> None:
        """End the processes launched ahead and still held (unused), and remove their files."""
        self._close_ahead()
        self._close_first()

    def _close_ahead(self) -> None:
        """End the confirmation's process launched ahead, if held, and remove its files."""
        held, self._ahead = self._ahead, None
        if held is not None:
            held.close()
        shutil.rmtree(self._ahead_folder, ignore_errors=True)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ store
    def existing(self) -> dict[str, CacheEntry]:
        """Entries already in the store; one that does not parse (truncated, corrupt) counts as
        missing, so its route is measured again and the entry rewritten; so does one timed for
        another objective (a shared `tune --cache`), and, when the context names its compiler, one
        measured or imported with another compiler. Entries that name no objective (imported from
        trtexec, whose tuning cache keeps GPU time) are kept. The context's `seeds` (imported
        entries) count too, under the entries measured here. When the context names its run, an
        entry of another run counts only when it is `reusable`, and comes back marked `reused_from`
        (the caller measures the default route fresh whatever the cache holds)."""
        from enginewright.catalog.compatibility import compiler_name

        entries = dict(self.ctx.seeds)
        objective = self.ctx.timing.objective.value
        for key in self.ctx.store.list(self.ctx.keys.entries):
            try:
                entry = CacheEntry.from_json(self.ctx.store.get(key))
            except ValueError as exc:
                log.warning("ignoring unreadable cache entry %s: %s", key, str(exc)[:200])
                continue
            if entry.objective not in (None, objective):
                continue
            if self.ctx.compiler and entry.versions and compiler_name(entry.versions.compiler) != self.ctx.compiler:
                continue
            if self.ctx.run is not None and entry.run != self.ctx.run:
                if not self.reusable(entry):
                    continue
                entry = entry.model_copy(update={"reused_from": f"run {entry.run}: {self.ctx.store.uri(key)}"})
            entries[entry.route_id] = entry
        return entries

    def reusable(self, entry: CacheEntry) -> bool:
        """An earlier run's entry stands for this run's measurement of its route: its fingerprint is
        this run's for that route, part for part (an entry without one never is), and the engine it
        kept, if any, is still the one it measured (a later run of another fingerprint may have
        replaced the file under the same key)."""
        if not self.ctx.reuse or not measured_with_this_fingerprint(self.ctx, entry):
            return False
        if entry.engine_uri is None:
            return True
        checked = (entry.route_id, entry.engine_sha256)
        if checked not in self._engines_checked:
            try:
                self._engines_checked[checked] = kept_bytes(self.ctx, entry) is not None
            except Exception:  # noqa: BLE001  (the store unreachable: not reused, measured again)
                self._engines_checked[checked] = False
        return self._engines_checked[checked]

    def _write(self, entry: CacheEntry) -> CacheEntry:
        """Write the entry of a route to the store (the moment it is known); returns it."""
        data = entry.to_json().encode()
        if failpoints.hit("entry-write") == "corrupt":
            data = data[: len(data) // 2]  # a fault test's truncated upload
        self.ctx.store.put(
            self.ctx.entry_key(entry.route_id), data, {"route-id": entry.route_id, "outcome": entry.outcome.value}
        )
        return entry

    def _keep(self, entry: CacheEntry, engine_path: Path, is_default: bool) -> CacheEntry:
        """Upload the engine when it may win (or the run keeps them all)."""
        faster = entry.passed and (entry.speedup or 0.0) > 1.0
        if is_default or faster or self.ctx.save_all_engines:
            key = self.ctx.engine_key(entry.route_id)
            self.ctx.store.put(key, engine_path.read_bytes(), {"route-id": entry.route_id, "route": entry.route})
            return entry.model_copy(update={"engine_uri": self.ctx.store.uri(key)})
        return entry

    # ------------------------------------------------------------------ a batch
    def run_batch(self, routes: Sequence[Route], stage: str, batch: str, default: Route) -> list[CacheEntry]:
        """Load the default route first and keep it loaded (this batch's baseline on this device),
        then time every route of the batch that has no entry yet against it, in paired rounds. Routes
        are built `build_parallelism` at a time and then measured one at a time, so measuring never
        overlaps a build and a killed worker loses at most the routes of the group in flight (one
        route with the default parallelism of 1). A route whose build or measurement the run's
        deadline cut short gets no entry (its timeout says nothing about the route).
        Returns the entries written by this call."""
        ctx = self.ctx
        done = self.existing()
        if default.id in done and done[default.id].reused:
            del done[default.id]  # an earlier run's default is never this run's baseline
        todo = [r for r in routes if r.id not in done and r.id != default.id]
        # Only the batch that lists the default route writes its entry and engine: batches running at
        # once each measure the default as their own baseline, and a compiler's rebuild need not give the same bytes, so two
        # writers could leave an entry whose digest is not the kept engine's.
        writes_default = default.id not in done and any(r.id == default.id for r in routes)
        progress = Progress(ctx, batch, len(todo))
        if not todo and not writes_default:
            progress.say(f"all {len(routes)} routes already measured; nothing to do")
            return []
        if progress.out_of_time():
            return []
        width = max(1, ctx.build_parallelism)
        # a batch after the one that wrote the default's entry loads the engine that batch kept
        kept = None if writes_default else kept_engine(ctx, default, done.get(default.id), stage, batch)
        timed_against = f"built {width} at a time, each timed against the default ({ctx.timing.objective.value})"
        if kept is None:
            progress.say(f"{len(todo) + 1} routes (default included), {timed_against}")
        else:
            progress.say(f"{len(todo)} routes and {KEPT_DEFAULT}, {timed_against}")
        queue = [default, *todo]  # the default first: every other route is timed against it

        def engine_of_route(route: Route) -> Built:
            return kept if route is default and kept is not None else build(ctx, route, stage, batch, builders)

        def rebuild() -> Built:  # a kept default that does not load here is built, as before
            return build(ctx, default, stage, batch, builders)

        # (the build processes close first: a signal that ends the batch kills a build in flight
        # instead of waiting for it with the pool)
        builders, launched = self._take_first(batch, width)  # (launched ahead by `start_ahead`, if it ran)
        with (
            DefaultRoute(ctx, default, writes_default, batch) as baseline,
            ThreadPoolExecutor(width) as pool,
            builders,
        ):
            baseline.launch(launched)  # its interpreter start and imports run while the first group builds
            if self.ahead:
                self.launch_ahead()  # the next confirmation's, likewise
            for start in range(0, len(queue), width):
                if progress.out_of_time():
                    break
                # The whole group is built before its first measurement: a route timed next to a
                # running compilation would time the compiler's load, not the engine.
                beside = self._start_beside_first_build() if start == 0 else None
                routes = queue[start : start + width]
                group = list(pool.map(engine_of_route, routes))
                built_here = sum(1 for r in routes if not (r is default and kept is not None))
                if built_here > 1:
                    group = self._built_again_alone(group, built_here - 1, progress, builders)
                if beside is not None:  # (before the first timing: it never runs beside one)
                    beside.join(max(1.0, min(ctx.route_timeout, ctx.time_left())))
                    if beside.is_alive():
                        log.warning("the work beside the first build is still running: timing goes on beside it")
                if start == 0:
                    self._imported_ahead()
                if start == 0 and not self._measure_default(
                    baseline, group.pop(0), progress, None if kept is None else rebuild
                ):
                    break
                for built in group:
                    if not self._measure_route(baseline, built, progress):
                        return progress.written
        return progress.written

    def _built_again_alone(
        self, group: list[Built], beside: int, progress: Progress, builders: Builders
    ) -> list[Built]:
        """The group (of builds that ran side by side), with each route whose build crashed, or
        failed naming memory, built once more on its own: a build that ran out of the host's or the
        GPU's memory beside others is no fault of its route, and its entry would say it was. Other
        failures (a compiler refusing an option) and a failure alone stand."""
        again = []
        for built in group:
            entry = built.entry
            out_of_memory = entry.outcome is Outcome.crash or (
                entry.outcome is Outcome.build_failed and "memory" in (entry.error or "").lower()
            )
            if built.engine_path is None and out_of_memory and self.ctx.time_left() > 0:
                progress.say(f"{built.route}: {describe(entry)}, beside {beside} other builds: built again on its own")
                built = build(self.ctx, built.route, entry.stage, progress.batch, builders)
            again.append(built)
        return again

    def _start_beside_first_build(self) -> threading.Thread | None:
        """Start `beside_first_build` in a thread (once a run); a failure of it is logged, not raised."""
        work, self._beside_first_build = self._beside_first_build, None
        if work is None:
            return None

        def run() -> None:
            try:
                work()
            except Exception as exc:  # noqa: BLE001  (its own work: the caller does it later, as before)
                log.warning("work beside the first build failed: %s", exc)

        thread = threading.Thread(target=run, name="beside-first-build", daemon=True)
        thread.start()
        return thread

    def _measure_default(
        self,
        default: DefaultRoute,
        built: Built,
        progress: Progress,
        rebuild: Callable[[], Built] | None = None,
    ) -> bool:
        """Load (and, for the batch that writes it, time) the default route and write its entry;
        False when the batch cannot go on (it failed, or the deadline cut it short). `rebuild` is
        given when `built` is the engine an earlier batch kept: one that does not load here is built
        (`rebuild`) and loaded once more, as in a batch that found no kept engine."""
        entry = default.measure(built)
        if progress.cut_short(entry, built.route):
            return False
        if entry.outcome is not Outcome.ok and rebuild is not None:
            progress.say(f"{KEPT_DEFAULT} did not load here ({describe(entry)}): the default is built instead")
            built, rebuild = rebuild(), None
            entry = default.measure(built)
            if progress.cut_short(entry, built.route):
                return False
        if entry.outcome is not Outcome.ok:
            progress.say(f"the default route failed ({entry.outcome.value}): {entry.error}")
            if default.writes:
                progress.written.append(self._write(entry))
            return False
        if default.writes:  # written before the line: progress counts it
            assert built.engine_path is not None  # it built: its entry is ok
            entry = self._write(self._keep(entry, built.engine_path, is_default=True))
            progress.written.append(entry)
        progress.say(f"default route (baseline): {describe(entry)}{f', {KEPT_DEFAULT}' if rebuild else ''}")
        return True

    def _measure_route(self, default: DefaultRoute, built: Built, progress: Progress) -> bool:
        """Time a route beside the default, write its entry (its engine kept when it may win) and
        remove its files; False when the deadline passed with the default's process closed."""
        if default.closed and progress.out_of_time():
            return False
        entry, self._spread = measure_paired(self.ctx, built, default.server(), self._spread)
        if not progress.cut_short(entry, built.route):
            progress.measured += 1
            if built.engine_path is not None and entry.outcome in (Outcome.ok, Outcome.accuracy_rejected):
                entry = self._keep(entry, built.engine_path, is_default=False)
            progress.written.append(self._write(entry))
            progress.say(f"route {progress.measured}/{progress.todo} {built.route}: {describe(entry)}")
        shutil.rmtree(self.ctx.workdir / "routes" / built.route.id, ignore_errors=True)
        return True

    # ------------------------------------------------------------------ confirmation
    def confirm(
        self,
        candidates: Sequence[CacheEntry],
        default: CacheEntry,
        rounds: int,
        loads: int = 1,
        early_stop: bool = True,
    ) -> dict[str, list[float]]:
        """Interleaved re-measurement of the kept engines of `candidates` and of the default, all
        loaded `loads` times (plus an untimed primer each) into one fresh serving process: a
        candidate is judged on the spread across loads and rounds (`search.winner.confirm`). At most
        `rounds` rounds: fewer once no candidate can still beat the line of the context's noise
        margin (`search.winner.settled`); `early_stop` False: every round, as side-by-side timings
        want."""
        ctx = self.ctx
        # what `start_ahead` launched for a first batch that never ran (a resumed run whose batches
        # were done) must not import or prepare beside the rounds
        self._close_first()
        folder = ctx.workdir / "confirm"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        # the fresh process the engines load into: launched ahead (`ahead`: `start_ahead` or the
        # last batch), else now, so that it imports while the engines are fetched from the store
        launched = self._take_ahead()
        engines = {}
        try:
            for entry in [default, *candidates]:
                path = folder / f"{entry.route_id}{ctx.engine_suffix}"
                path.write_bytes(ctx.store.get(ctx.engine_key(entry.route_id)))
                engines[entry.route_id] = path
        except BaseException:
            discard(launched)
            raise
        ctx.say(
            f"[confirm] {len(candidates)} candidates vs the default, each loaded {loads} times, "
            f"{'at most ' if early_stop else ''}{rounds} interleaved rounds in one process "
            f"({ctx.timing.objective.value})"
        )
        margin = ctx.noise_margin  # the spec's floor: the flow's margin is never below it
        stop = (lambda times: settled(times, default.route_id, margin)) if early_stop else None
        try:
            return interleave(ctx, engines, rounds, folder, loads, settled=stop, launched=launched)
        finally:
            shutil.rmtree(self._ahead_folder, ignore_errors=True)  # (interleave closed its process)


def discard(server: Server) -> None:
    """Close a serving process that will not be used again and remove its files."""
    server.close()
    shutil.rmtree(server.workdir, ignore_errors=True)


class DefaultRoute:
    """A batch's default route, from build to release: built once (first, in the batch's first
    group; a batch after the one that wrote its entry loads the engine that batch kept instead,
    `measure.kept_engine`), loaded into the serving process every other route of the batch is timed
    in (its own loads timed against each other first when this batch `writes` its entry), loaded again into a
    fresh process when a route's failure closed that one, and released when the batch ends, however
    it ends (process closed, files removed). Its engine file stays until then. The process its first
    load goes into is launched when the batch starts (`launch`), so that its interpreter start and
    the backend's imports run while the first group builds."""

    def __init__(self, ctx: WorkerContext, route: Route, writes: bool, batch: str):
        self.ctx, self.route, self.writes, self.batch = ctx, route, writes, batch
        self.built: Built | None = None
        self._server: Server | None = None
        self._launched: Server | None = None  # launched ahead, waiting for the default's engine
        self._folder = ctx.workdir / "serve" / batch  # its files (a build empties the route's folder)

    def launch(self, launched: Server | None = None) -> None:
        """Launch the serving process the default's first load goes into, before its engine is built:
        until `measure` names the engine it only imports (on 2 cores its start took 3.4 s, on the
        H100's host 15 s, after the builds of the batch's first group: issue 19). Its folder starts
        empty: a run killed before `__exit__` left its files, and a resumed run reuses batch names.
        `launched`: one launched earlier still (`Worker.start_ahead`), taken instead."""
        if launched is not None:
            self._launched, self._folder = launched, launched.workdir
            return
        shutil.rmtree(self._folder, ignore_errors=True)
        self._launched = Server(self.ctx, primer("default"), None, self._folder, references=True)
        self._launched.launch()

    def measure(self, built: Built) -> CacheEntry:
        """Load the built default (timed when this batch writes its entry), into the process launched
        ahead the first time: its entry."""
        self.built = built
        launched, self._launched = self._launched, None
        entry, self._server = measure_default(self.ctx, built, timed=self.writes, launched=launched)
        return entry

    @property
    def closed(self) -> bool:
        """No serving process holds the default now (a route's failure closed it)."""
        return self._server is None or self._server.proc is None

    def server(self) -> Server:
        """The serving process holding the default's loads; a fresh one when the last closed."""
        # measured first, and a batch whose default did not load has stopped
        assert self.built is not None and self._server is not None
        if self._server.proc is None:
            self.ctx.say(
                f"[{self.batch}] loading the default route again (the last route's failure closed its process)"
            )
            entry, server = load(self.ctx, self.built, "default")
            if server is None:
                raise RuntimeError(f"the default route's engine failed to load again: {entry.error}")
            self._server = server
        return self._server

    def __enter__(self) -> DefaultRoute:
        return self

    def __exit__(self, *exc) -> None:
        for server in (self._launched, self._server):  # (launched: the batch ended before measuring)
            if server is not None:
                server.close()
        shutil.rmtree(self.ctx.workdir / "routes" / self.route.id, ignore_errors=True)
        shutil.rmtree(self._folder, ignore_errors=True)


@dataclass
class Progress:
    """What one batch has done so far, and its progress lines: the entries it wrote, and how many of
    its `todo` routes (the default left out) it measured."""

    ctx: WorkerContext
    batch: str
    todo: int
    written: list[CacheEntry] = field(default_factory=list)
    measured: int = 0

    def say(self, message: str) -> None:
        self.ctx.say(f"[{self.batch}] {message}")

    def out_of_time(self) -> bool:
        """The run's deadline has passed (and the routes left unmeasured are counted)."""
        if self.ctx.time_left() > 0:
            return False
        self.say(f"deadline reached: {self.todo - self.measured} routes left unmeasured")
        return True

    def cut_short(self, entry: CacheEntry, route: Route) -> bool:
        """The route timed out because the run's deadline passed, not slow on its own: not recorded,
        so a resumed or later run measures it."""
        if entry.outcome is not Outcome.timeout or self.ctx.time_left() > 0:
            return False
        self.say(f"deadline reached while {route} was in flight: not recorded, a later run retries it")
        return True


def describe(entry: CacheEntry) -> str:
    """One human line for a finished route."""
    if entry.outcome in (Outcome.crash, Outcome.build_failed, Outcome.timeout):
        return f"{entry.outcome.value}: {(entry.error or '').splitlines()[0][:200]}"
    parts = [entry.outcome.value]
    if entry.timing:
        p = entry.paired
        if p and p.route_ms and p.default_ms:  # both times from the rounds the speedup comes from
            parts.append(
                f"{p.route_ms:.4f} ms {entry.objective or ''} against the default's {p.default_ms:.4f} ms "
                "in the same rounds".replace("  ", " ")
            )
        else:
            parts.append(f"{entry.timing.median_ms:.4f} ms {entry.objective or ''}".rstrip())
        if p:
            parts.append(
                f"(paired speedup {p.speedup:.3f}x, 95% {1 / p.high:.3f}-{1 / p.low:.3f}, "
                f"{p.rounds} rounds, {p.stopped})"
            )
        elif entry.baseline_ms:
            parts.append(f"({entry.baseline_ms / entry.timing.median_ms:.3f}x vs default)")
    if entry.loss:
        parts.append(f"max loss {entry.max_loss:.3g}")
    if entry.build_seconds is not None:
        parts.append(f"build {entry.build_seconds:.1f}s")
    return ", ".join(parts)
