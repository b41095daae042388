"""The worker: a batch of routes for one target in, one cache entry per route out.

Each route is built in a child process; its engine bytes (the bytes that are measured are the bytes
that get kept and published) are then loaded into the serving process that holds the default route's
engine for the whole batch, and the two are timed there in paired rounds, interleaved block by block
on one thread (`search.paired`, `child.interleaved_round`). Every entry is written to the store the moment it is known,
and routes that already have an entry are skipped, so a killed worker loses at most the route in
flight.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from enginewright import failpoints
from enginewright.api.cache import CacheEntry, Host, Outcome, Versions, now_iso
from enginewright.backends.base import stats_of
from enginewright.search.paired import (
    Spread,
    compare,
    engine_of,
    load_key,
    round_order,
    rounds_until,
    stop_after,
    summarise_loads,
)
from enginewright.search.routes import Route
from enginewright.worker.context import WorkerContext
from enginewright.worker.process import run_child
from enginewright.worker.server import Server, ServerFailed, primer

log = logging.getLogger("enginewright.worker")

ROUTE = "route"  # the key a route's engine is loaded by, beside the default's, in the serving process


def failed_entry(entry: CacheEntry, outcome: Outcome, error: str | None) -> CacheEntry:
    """The entry of a route whose step failed: the outcome and its message, finished now."""
    return entry.model_copy(update={"outcome": outcome, "error": error, "finished_at": now_iso()})


@dataclass
class Built:
    """A route after its build step: the entry so far, and the engine file (None if it failed)."""

    route: Route
    entry: CacheEntry
    engine_path: Path | None


class Worker:
    """Builds, checks and times routes for one target; writes entries and keeps engines."""

    def __init__(self, ctx: WorkerContext):
        self.ctx = ctx
        self._spread = Spread()  # lasting per-load spread of the routes measured so far (pooled)
        self._engines_checked: dict[tuple[str, str | None], bool] = {}  # reused entries' kept engines

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
        if not self.ctx.reuse or self.ctx.fingerprint is None or entry.fingerprint is None:
            return False
        if entry.fingerprint.digest != self.ctx.fingerprint.for_route(entry.route_id).digest:
            return False
        if entry.engine_uri is None:
            return True
        checked = (entry.route_id, entry.engine_sha256)
        if checked not in self._engines_checked:
            try:
                engine = self.ctx.store.get(self.ctx.engine_key(entry.route_id))
                self._engines_checked[checked] = hashlib.sha256(engine).hexdigest() == entry.engine_sha256
            except Exception:  # noqa: BLE001  (a missing object: the store's own error type)
                self._engines_checked[checked] = False
        return self._engines_checked[checked]

    def _write(self, entry: CacheEntry) -> None:
        data = entry.to_json().encode()
        if failpoints.hit("entry-write") == "corrupt":
            data = data[: len(data) // 2]  # a fault test's truncated upload
        self.ctx.store.put(
            self.ctx.entry_key(entry.route_id), data, {"route-id": entry.route_id, "outcome": entry.outcome.value}
        )

    # ------------------------------------------------------------------ one route
    def build(self, route: Route, stage: str, batch: str) -> Built:
        """Build `route` in a child process; the engine file stays in the route's folder."""
        ctx = self.ctx
        folder = ctx.workdir / "routes" / route.id
        shutil.rmtree(folder, ignore_errors=True)
        engine_path = folder / f"engine{ctx.engine_suffix}"
        entry = CacheEntry(
            target=ctx.target,
            route_id=route.id,
            route=route.canonical,
            knobs=route.as_dict,
            stage=stage,
            batch=batch,
            outcome=Outcome.ok,
            started_at=now_iso(),
            run=ctx.run,
            fingerprint=ctx.fingerprint.for_route(route.id) if ctx.fingerprint else None,
        )
        result = run_child(
            ctx.child_request(
                "build",
                folder,
                engine_path,
                model=str(ctx.model),
                settings=ctx.settings,
                input_shapes=ctx.input_shapes,
                route=route.as_dict,
                inputs=[str(ctx.accuracy.inputs[0])],
            ),
            min(ctx.route_timeout, ctx.time_left()),
            Outcome.build_failed,
        )
        if not result.ok:
            assert result.outcome is not None  # run_child sets it on every failure
            return Built(route, failed_entry(entry, result.outcome, result.error), None)
        engine = engine_path.read_bytes()
        return Built(
            route,
            entry.model_copy(
                update={
                    "build_seconds": round(result.data["build_seconds"], 3),
                    "engine_sha256": hashlib.sha256(engine).hexdigest(),
                    "engine_size": len(engine),
                }
            ),
            engine_path,
        )

    def load(self, built: Built, key: str) -> tuple[CacheEntry, Server | None]:
        """Load the built engine in a fresh serving process, check its accuracy there, then load it
        `timing.loads` times more for timing (`load_more`). Returns the entry so far and the warm
        server (None when loading failed; the entry says why)."""
        entry = built.entry
        if built.engine_path is None:
            return entry, None
        server = Server(self.ctx, primer(key), built.engine_path, built.engine_path.parent / "serve", references=True)
        try:
            ready = server.start(self._budget(entry))
            self.load_more(server, key, built.engine_path, self._budget(entry))
        except ServerFailed as failed:
            server.close()
            return failed_entry(entry, failed.outcome, failed.error), None
        except BaseException:  # anything else (a garbled reply, SIGTERM, Ctrl-C): no process left behind
            server.close()
            raise
        return self._loaded(entry, ready), server

    def load_more(self, server: Server, key: str, engine: Path, timeout: float, loads: int | None = None) -> list[str]:
        """Load `engine` `loads` (default `timing.loads`) more times into `server`, unchecked, as keys
        `search.paired.load_key(key, i)`; returns those keys. The first load of an engine in a process
        (its `primer`, which the accuracy check ran on) is never timed: on the H200 the first load
        sat apart from the later loads of the same bytes for its whole life, in one run 2-6% slower
        than all seven later ones, in another 9% faster (bench/load_effects.py); the default is the
        first engine of its process, so timing its first load would tilt every route's comparison."""
        keys = [load_key(key, i) for i in range(loads or self.ctx.timing.loads)]
        for k in keys:
            server.add(k, engine, engine.parent / "serve" / f"load-{k}", timeout, check=False)
        return keys

    def _loaded(self, entry: CacheEntry, ready: dict) -> CacheEntry:
        """The entry of an engine that loaded: versions, the host, how it loaded, its accuracy."""
        versions = Versions.model_validate(ready["versions"])
        if os.environ.get("NODE_NAME"):
            versions = versions.model_copy(update={"node": os.environ["NODE_NAME"]})
        update = {
            "versions": versions,
            "host": this_host(),
            "loss": ready.get("loss"),
            "load_info": ready.get("load_info"),
            "objective": self.ctx.timing.objective.value,
        }
        if entry.fingerprint is not None:  # the stack of the process that measured it
            update["fingerprint"] = entry.fingerprint.measured_with(versions)
        if not ready.get("passed", True):
            update.update(outcome=Outcome.accuracy_rejected, error=ready.get("summary"))
        return entry.model_copy(update=update)

    def measure_default(self, built: Built, timed: bool = True) -> tuple[CacheEntry, Server | None]:
        """Load the default engine (its primer, checked, and `timing.loads` timed loads) and, `timed`
        (for the batch that writes its entry), time its loads against each other for `min_rounds`
        interleaved rounds. The server stays loaded: every route of the batch is timed against it."""
        entry, server = self.load(built, "default")
        if server is None or not timed:
            return entry, server
        started = time.monotonic()
        keys = [load_key("default", i) for i in range(self.ctx.timing.loads)]

        def time_round(index: int) -> dict[str, float]:
            order = round_order(keys, index)
            return dict(zip(order, server.interleave(order, self._budget(entry))))

        try:
            times, _ = rounds_until(
                time_round, lambda t: "enough" if len(t[keys[0]]) >= self.ctx.timing.min_rounds else None
            )
            measurements = server.measurements(self._budget(entry), key=keys[0])
        except ServerFailed as failed:
            server.close()
            return failed_entry(entry, failed.outcome, failed.error), None
        except BaseException:
            server.close()
            raise
        per_round = round_means([times[k] for k in keys])
        timing = stats_of(per_round, n=len(per_round) * server.calls_of[keys[0]] * len(keys))
        return entry.model_copy(
            update={
                "timing": timing,
                "baseline_ms": timing.median_ms,
                "measurements": measurements,
                "finished_at": now_iso(),
                "measure_seconds": round(time.monotonic() - started, 3),
            }
        ), server

    def measure_paired(self, built: Built, default: Server) -> CacheEntry:
        """Load the route's engine into the default's serving process (a primer, checked, then
        `timing.loads` timed loads), then time every load of both in paired rounds, each round
        interleaved in blocks on that process's one thread (`Server.interleave`), until
        `search.paired.stop_after` places the route on the spread across loads (pooled with the loads
        of the routes measured before it in this batch), and unload it. A rejected route is timed
        for `min_rounds` rounds only (for the report's time-vs-loss plot). A failure while the route
        is loaded is the route's — the process is closed with whatever the route left in it, and the
        batch loads the default again for the next route (a default that then fails to load fails the
        batch) — unless the serving process says the default's own call raised: that is the batch's."""
        ctx, timing = self.ctx, self.ctx.timing
        entry = built.entry
        if built.engine_path is None:
            return entry.model_copy(update={"finished_at": now_iso()})
        limit = time.monotonic() + self._budget(entry)  # the whole measurement: load to last round
        defaults = [load_key("default", i) for i in range(timing.loads)]
        routes = [load_key(ROUTE, i) for i in range(timing.loads)]
        keys = [k for pair in zip(defaults, routes) for k in pair]  # D R D@2 R@2 ...: engines alternate

        def left() -> float:
            remaining = min(limit - time.monotonic(), ctx.time_left())
            if remaining <= 0:
                raise ServerFailed(
                    Outcome.timeout,
                    f"measuring exceeded the route's {ctx.route_timeout:.0f}s timeout or the run's deadline",
                )
            return remaining

        def time_round(index: int) -> dict[str, float]:
            order = round_order(keys, index)
            return dict(zip(order, default.interleave(order, left())))

        def comparison(times: dict[str, list[float]]):
            return compare([times[k] for k in routes], [times[k] for k in defaults], prior=self._spread)

        def stop(times: dict[str, list[float]]) -> str | None:
            count = len(times[routes[0]])
            if entry.outcome is Outcome.accuracy_rejected:
                return "rejected" if count >= timing.min_rounds else None
            if count < timing.min_rounds:
                return None
            return stop_after(
                comparison(times),
                count,
                margin=ctx.noise_margin,
                precision=timing.precision,
                min_rounds=timing.min_rounds,
                max_rounds=timing.max_rounds,
            )

        loaded = []
        try:
            entry = self._loaded(
                entry, default.add(primer(ROUTE), built.engine_path, built.engine_path.parent / "serve", left())
            )
            loaded.append(primer(ROUTE))
            loaded += self.load_more(default, ROUTE, built.engine_path, left())
            started = time.monotonic()
            times, stopped = rounds_until(time_round, stop)
            calls = default.calls_of[routes[0]]
            try:
                measurements = default.measurements(left(), key=routes[0])
            except ServerFailed as failed:
                if failed.outcome is not Outcome.timeout:
                    raise
                default.close()  # the time ran out after the rounds: they still count
                measurements = None
        except ServerFailed as failed:
            default.close()
            if failed.engine is not None and engine_of(failed.engine) != ROUTE:
                # The default's own call raised: the batch's failure (the Job's retry, or a rerun of
                # `tune`, resumes after the routes already written), not the route's.
                raise RuntimeError(f"the default route's serving process failed: {failed.error}") from None
            return failed_entry(entry, failed.outcome, failed.error)
        except BaseException:
            default.close()
            raise
        if default.proc is not None:
            try:
                for key in loaded:
                    default.drop(key, 60)
            except ServerFailed:
                default.close()  # (the batch loads the default again for the next route)
        result = comparison(times)
        if entry.outcome is Outcome.ok:
            self._spread = self._spread + Spread.of([times[k] for k in routes])
        route_rounds = round_means([times[k] for k in routes])
        return entry.model_copy(
            update={
                "timing": stats_of(route_rounds, n=len(route_rounds) * calls * len(routes)),
                "baseline_ms": result.b_ms,
                "paired": summarise_loads(result, len(route_rounds), stopped),
                "measurements": measurements,
                "measure_seconds": round(time.monotonic() - started, 3),
                "finished_at": now_iso(),
            }
        )

    def _budget(self, entry: CacheEntry) -> float:
        """Seconds one step of a route's measurement may take: its route timeout less its build."""
        return max(10.0, min(self.ctx.route_timeout - (entry.build_seconds or 0), self.ctx.time_left()))

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
        # once each measure the default as their own baseline, and a rebuild gives other bytes, so two
        # writers could leave an entry whose digest is not the kept engine's.
        owns_default = any(r.id == default.id for r in routes)
        writes_default = default.id not in done and owns_default  # (and so times it alone too)
        if not todo and (default.id in done or not owns_default):
            ctx.say(f"[{batch}] all {len(routes)} routes already measured; nothing to do")
            return []
        if self.ctx.time_left() <= 0:
            ctx.say(f"[{batch}] deadline reached: {len(todo)} routes left unmeasured")
            return []
        width = max(1, ctx.build_parallelism)
        ctx.say(
            f"[{batch}] {len(todo) + 1} routes (default included), built {width} at a time, each timed "
            f"against the default ({ctx.timing.objective.value})"
        )
        queue = [default, *todo]
        groups = [queue[i : i + width] for i in range(0, len(queue), width)]
        written: list[CacheEntry] = []
        baseline: Server | None = None
        default_built: Built | None = None
        measured = 0

        def out_of_time() -> bool:
            """The run's deadline has passed (and the routes left unmeasured are counted)."""
            if self.ctx.time_left() > 0:
                return False
            ctx.say(f"[{batch}] deadline reached: {len(todo) - measured} routes left unmeasured")
            return True

        try:
            with ThreadPoolExecutor(max_workers=width) as pool:
                for group in groups:
                    if out_of_time():
                        break
                    # The whole group is built before its first measurement: a route timed next to a
                    # running compilation would time the compiler's load, not the engine.
                    for built in list(pool.map(lambda r: self.build(r, stage, batch), group)):
                        is_default = built.route.id == default.id
                        if is_default:
                            default_built = built  # its engine file stays until the batch ends
                            entry, baseline = self.measure_default(built, timed=writes_default)
                        else:
                            # The default is the first route of the first group, and a batch whose
                            # default did not load has returned by now.
                            assert baseline is not None and default_built is not None
                            if baseline.proc is None:  # the last route's failure closed the process
                                if out_of_time():
                                    return written
                                baseline = self._reload_default(default_built, batch)
                            entry = self.measure_paired(built, baseline)
                        # Cut short by the run's deadline, not slow on its own: not cached, so a resumed
                        # or later run measures it.
                        cut = entry.outcome is Outcome.timeout and self.ctx.time_left() <= 0
                        if cut:
                            ctx.say(
                                f"[{batch}] deadline reached while {built.route} was in flight: "
                                f"not recorded, a later run retries it"
                            )
                        elif is_default and entry.outcome is not Outcome.ok:
                            ctx.say(f"[{batch}] the default route failed ({entry.outcome.value}): {entry.error}")
                            if writes_default:
                                self._write(entry)
                                written.append(entry)
                            return written
                        elif is_default:
                            if writes_default:  # written before the line: progress counts it
                                assert built.engine_path is not None  # it built: its entry is ok
                                entry = self._keep(entry, built.engine_path, is_default=True)
                                self._write(entry)
                                written.append(entry)
                            ctx.say(f"[{batch}] default route (baseline): {describe(entry)}")
                        else:
                            measured += 1
                            if built.engine_path is not None and entry.outcome in (
                                Outcome.ok,
                                Outcome.accuracy_rejected,
                            ):
                                entry = self._keep(entry, built.engine_path, is_default=False)
                            self._write(entry)
                            written.append(entry)
                            ctx.say(f"[{batch}] route {measured}/{len(todo)} {built.route}: {describe(entry)}")
                        if not is_default:
                            shutil.rmtree(ctx.workdir / "routes" / built.route.id, ignore_errors=True)
                        if cut and is_default:
                            return written
        finally:
            if baseline is not None:
                baseline.close()
            shutil.rmtree(ctx.workdir / "routes" / default.id, ignore_errors=True)
        return written

    def _reload_default(self, built: Built, batch: str) -> Server:
        """The default's engine in a fresh serving process, after a route's failure closed the last."""
        self.ctx.say(f"[{batch}] loading the default route again (the last route's failure closed its process)")
        entry, server = self.load(built, "default")
        if server is None:
            raise RuntimeError(f"the default route's engine failed to load again: {entry.error}")
        return server

    # ------------------------------------------------------------------ confirmation
    def confirm(
        self, candidates: Sequence[CacheEntry], default: CacheEntry, rounds: int, loads: int = 1
    ) -> dict[str, list[float]]:
        """Interleaved re-measurement of the kept engines of `candidates` and of the default, all
        loaded `loads` times (plus an untimed primer each) into one fresh serving process: a
        candidate is judged on the spread across loads (`search.winner.confirm`)."""
        ctx = self.ctx
        folder = ctx.workdir / "confirm"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        engines = {}
        for entry in [default, *candidates]:
            path = folder / f"{entry.route_id}{ctx.engine_suffix}"
            path.write_bytes(ctx.store.get(ctx.engine_key(entry.route_id)))
            engines[entry.route_id] = path
        ctx.say(
            f"[confirm] {len(candidates)} candidates vs the default, each loaded {loads} times, {rounds} "
            f"interleaved rounds in one process ({ctx.timing.objective.value})"
        )
        return self.interleave(engines, rounds, folder, loads)

    def interleave(self, engines: dict[str, Path], rounds: int, folder: Path, loads: int = 1) -> dict[str, list[float]]:
        """Rounds of every engine, each loaded `loads` times (after an untimed primer of each) into
        one serving process, the loads taking turns engine by engine (A B C A@2 B@2 C@2 ...), each
        round interleaved in blocks on its one thread (`Server.interleave`), in `round_order`.
        Returns per-round times (ms per call) by load key (`search.paired.load_key`)."""
        names = list(engines)
        server = Server(self.ctx, primer(names[0]), engines[names[0]], folder / "serve", references=False)
        try:
            server.start(self.ctx.route_timeout)
            for name in names[1:]:
                server.add(
                    primer(name),
                    engines[name],
                    folder / "serve" / f"primer-{name}",
                    self.ctx.route_timeout,
                    check=False,
                )
            keys = [load_key(name, i) for i in range(loads) for name in names]
            for key in keys:
                server.add(
                    key, engines[engine_of(key)], folder / "serve" / f"load-{key}", self.ctx.route_timeout, check=False
                )
            times: dict[str, list[float]] = {key: [] for key in keys}
            for index in range(rounds):
                order = round_order(keys, index)
                for key, ms in zip(order, server.interleave(order, self.ctx.route_timeout)):
                    times[key].append(ms)
            return times
        except ServerFailed as failed:
            raise RuntimeError(f"confirmation: {failed.error}") from None
        finally:
            server.close()


def round_means(loads: Sequence[Sequence[float]]) -> list[float]:
    """Per round, the geometric mean over an engine's loads (ms per call)."""
    return [math.exp(statistics.fmean(math.log(values[r]) for values in loads)) for r in range(len(loads[0]))]


def this_host() -> Host:
    """The CPU model, CPUs and load of the machine measuring (launch-bound times depend on them)."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    return Host(cpu_model=model, cpus=len(os.sched_getaffinity(0)), load_average=load)


def describe(entry: CacheEntry) -> str:
    """One human line for a finished route."""
    if entry.outcome in (Outcome.crash, Outcome.build_failed, Outcome.timeout):
        return f"{entry.outcome.value}: {(entry.error or '').splitlines()[0][:200]}"
    parts = [entry.outcome.value]
    if entry.timing:
        parts.append(f"{entry.timing.median_ms:.4f} ms {entry.objective or ''}".rstrip())
        if entry.paired:
            p = entry.paired
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
