"""The tuning flow of one target as a pure function: what has been observed -> the next step.

Stage 1 (fast or full routes, or mixed's single-knob routes), then for `mixed` stage 2 over the
knobs that improved, then an interleaved confirmation round of the best candidates against the
default, then the decision. `enginewright tune` (local processes) and the controller (Kubernetes
Jobs) both execute these steps; neither re-implements the flow. No I/O, no clock: the executor
says what it observed (the compiler's knobs, the cache entries, confirmation rounds, batches it gave
up on, whether the run is out of time) and gets back exactly one step.

A step that is done is never asked for again: a batch is asked for while one of its routes has no
entry (and it was not given up), a confirmation while no rounds are recorded under its name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from enginewright.api.cache import CacheEntry, Outcome
from enginewright.api.models import SETTINGS_ARE_KNOBS, Confirm, Search, default_of
from enginewright.api.routes import Knob, Route
from enginewright.search.planners import (
    Batch,
    as_built,
    beside_launch_free,
    build_space,
    improving_values,
    make_batches,
    plan_listed,
    plan_mixed_stage2,
    plan_stage1,
)
from enginewright.search.winner import (
    Decision,
    choose_winner,
    confirm,
    could_win,
    noise_margin,
    rank_candidates,
    settled,
)


@dataclass(frozen=True)
class FlowSpec:
    """The part of a TuningRun (or of `tune`'s options) that decides the flow."""

    mode: str = default_of(Search, "mode").value
    knobs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    pinned: Mapping[str, str] = field(default_factory=dict)
    max_routes: int = default_of(Search, "max_routes")
    routes_per_batch: int = default_of(Search, "routes_per_job")
    noise_margin: float = default_of(Search, "noise_margin")
    top_k: int = default_of(Confirm, "top_k")
    confirm_rounds: int = default_of(Confirm, "rounds")
    confirm_loads: int = default_of(Confirm, "loads")
    # exclusive knobs (not compiling) measured whatever the knob space
    measure_uncompiled: bool = default_of(Search, "measure_uncompiled")
    routes: tuple[str, ...] = ()  # spec.search.routes: only these (and the default) instead of the mode's plan
    # spec.compiler.settings: the base every route is built on; one naming a knob is its default (`as_built`)
    settings: Mapping[str, str] = field(default_factory=dict)
    # the compiler's builds read knobs from the settings (`SETTINGS_ARE_KNOBS`; the spec has no default compiler)
    settings_are_knobs: bool = True

    @classmethod
    def of(cls, spec) -> FlowSpec:
        """From a `TuningRunSpec` (or `tune`'s options as one: `cli.tune.TuneOptions.spec`); the one
        place a spec becomes a flow."""
        search = spec.search
        return cls(
            mode=search.mode.value,
            knobs=tuple((k.name, tuple(k.values)) for k in search.knobs),
            pinned=dict(search.pinned),
            max_routes=search.max_routes,
            routes_per_batch=search.routes_per_job,
            noise_margin=search.noise_margin,
            top_k=search.confirm.top_k,
            confirm_rounds=search.confirm.rounds,
            confirm_loads=search.confirm.loads,
            measure_uncompiled=search.measure_uncompiled,
            routes=tuple(search.routes),
            settings=dict(spec.compiler.settings),
            settings_are_knobs=spec.compiler.name.value in SETTINGS_ARE_KNOBS,
        )


@dataclass(frozen=True)
class Observed:
    """Everything the executor read back, nothing else."""

    knobs: Sequence[Knob]
    entries: Mapping[str, CacheEntry] = field(default_factory=dict)  # route id -> entry (extra ids are ignored)
    confirmations: Mapping[str, Mapping[str, Sequence[float]]] = field(default_factory=dict)  # name -> rounds
    given_up: frozenset[str] = frozenset()  # batch / confirmation names that ended without their results
    out_of_time: bool = False  # the run's deadline has passed: launch nothing new


@dataclass(frozen=True)
class RunBatches:
    """Build and measure these batches (each measures the default first as its own baseline)."""

    stage: str
    batches: tuple[Batch, ...]
    default: Route
    planned: int  # routes planned so far, all stages
    note: str = ""


@dataclass(frozen=True)
class RunConfirmation:
    """Re-measure the kept engines of `candidates` against the default, interleaved, `rounds` times;
    record the rounds under `name`."""

    name: str
    candidates: tuple[CacheEntry, ...]
    default: CacheEntry
    rounds: int
    planned: int
    loads: int = 1  # loads of each engine (the default's and each candidate's)


@dataclass(frozen=True)
class Decided:
    """The target is done: `decision` names the winner (possibly the default route)."""

    decision: Decision
    default: CacheEntry
    entries: tuple[CacheEntry, ...]  # of this run's planned routes
    planned: int
    cut_short: str | None = None  # why the search stopped before every planned route was measured
    notes: tuple[str, ...] = ()  # how the plan unfolded (mixed: what stage 2 combined)

    @property
    def winner(self) -> CacheEntry:
        return next(e for e in self.entries if e.route_id == self.decision.winner_id)

    @property
    def objective(self) -> str:
        """What the routes' times are (`spec.timing.objective`); "time" for entries that do not say."""
        return self.default.objective or self.winner.objective or "time"

    def headline(self) -> dict:
        """The one speedup the decision stands on: its name (after the timing objective), value, its
        95% interval across loads and rounds (None where it was not measured), how it was measured, the two
        engines' times in the rounds it comes from (their ratio is the speedup), and what the host
        has to do with it."""
        decision, winner = self.decision, self.winner
        loads = f" of {decision.loads} loads each" if decision.loads > 1 else ""
        if decision.default_won:
            how = "the default route is kept"
        elif decision.confirmed:
            how = f"confirmation round: {decision.rounds} interleaved rounds{loads} against the default"
        elif winner.paired:
            how = f"sweep only, unconfirmed: paired rounds{loads} against the default of the winner's batch"
        else:
            how = "sweep only, unconfirmed: against the default measured in the winner's batch"
        times = decision.times or {}
        return {
            "name": f"{self.objective} speedup",
            "speedup": decision.speedup,
            "low": None if decision.default_won else decision.low,
            "high": None if decision.default_won else decision.high,
            "measured": how,
            "default_ms": times.get(self.default.route_id),
            "winner_ms": times.get(winner.route_id),
            "host": "; ".join(note for note in (self.host_note(), self.busy_note()) if note) or None,
            "moments": self.moments(),
        }

    def moments(self) -> dict | None:
        """The winner's speedup as each moment of this run measured it: its sweep's paired rounds (in
        its batch, minutes before) and the confirmation round, each with its 95% interval across
        loads, whether the two are `apart` (their intervals do not overlap: the speedup moved between
        the moments by more than the loads explain), and the `range` both cover. On the H200 a
        host-bound default moved 0.27-0.59 ms within one run, so its sweep read 2.23x (2.13-2.33) and
        its confirmation 2.53x (2.52-2.54) a minute later (docs/benchmarks/raw/s11/call7): an
        interval is about the moments its rounds sampled (since 2026-12-04 it counts them as
        samples, `measure.paired.moment_variance`), and this says how far the run's two were apart.
        None unless a confirmed winner of this run's own sweep (a reused route's rounds are of
        another run)."""
        decision, paired = self.decision, self.winner.paired
        if decision.default_won or not decision.confirmed or paired is None or self.winner.reused:
            return None
        if decision.low is None or decision.high is None:
            return None
        sweep = {"speedup": paired.speedup, "low": 1.0 / paired.high, "high": 1.0 / paired.low}
        confirmation = {"speedup": decision.speedup, "low": decision.low, "high": decision.high}
        apart = sweep["high"] < confirmation["low"] or confirmation["high"] < sweep["low"]
        return {
            "sweep": sweep,
            "confirmation": confirmation,
            "apart": apart,
            "range": [min(sweep["low"], confirmation["low"]), max(sweep["high"], confirmation["high"])],
        }

    def host_note(self) -> str | None:
        """Said when the default's call is host-bound (the host spends 80% or more of a call issuing
        it): then a win comes from removing launch overhead, and its size depends on the serving
        host's CPU, not on the GPU alone."""
        m = self.default.measurements
        if m is None or not m.host_bound:
            return None
        host = self.default.host
        where = f" on {host.cpu_model}" if host and host.cpu_model else ""
        winner = self.winner.measurements
        after = (
            f"; the winner's host CPU time is {winner.host_cpu_ms:.4g} of its {winner.throughput_ms:.4g} ms"
            if winner and winner.host_cpu_ms is not None and self.winner is not self.default
            else ""
        )
        return (
            f"the default is host-bound{where}: its host CPU time is {m.host_cpu_ms:.4g} of its "
            f"{m.throughput_ms:.4g} ms a call{after}. A win here comes from launch overhead and depends on the "
            f"serving host's CPU"
        )

    def busy_note(self) -> str | None:
        """Said when timings of this run's sweep rounds of the default or the winner (interleaved
        blocks, and requests timing one engine) began while the measuring process's other threads
        were still busy (the quiet wait gave up: `Host.busy_starts`): those times include their
        work, so the host was loaded while they were taken. A reused entry's count is another
        run's; the confirmation's own count is in its log line, not here."""
        entries = {self.default.route_id: self.default, self.winner.route_id: self.winner}.values()
        busy = sum((e.host.busy_starts or 0) for e in entries if e.host and not e.reused)
        if not busy:
            return None
        return (
            f"{busy} timing{'s' if busy > 1 else ''} of the default's and the winner's sweep rounds began "
            "while the measuring process's other threads were still busy (its wait for them gave up after "
            "0.5 s): the host was loaded, and those times include that work"
        )

    def headline_text(self) -> str:
        """The headline as one line: `gpuTime speedup 1.283x (95% 1.21-1.36; how)`."""
        h = self.headline()
        interval = f"95% {h['low']:.3f}-{h['high']:.3f}; " if h["low"] is not None and h["high"] is not None else ""
        moved = ""
        if h["moments"] and h["moments"]["apart"]:
            sweep = h["moments"]["sweep"]
            moved = (
                f"; its sweep measured {sweep['speedup']:.3f}x (95% {sweep['low']:.3f}-{sweep['high']:.3f}) at "
                "another moment of this run: the speedup moved with the host's state"
            )
        return f"{h['name']} {h['speedup']:.3f}x ({interval}{h['measured']}{moved})"

    def summary(self) -> dict:
        """The result as plain data, for reports, provenance and the status (unrounded: round when shown)."""
        decision, winner, entries = self.decision, self.winner, self.entries
        versions = next((e.versions for e in entries if e.versions), None)
        return {
            "objective": self.objective,
            "headline": self.headline(),
            "sweep_speedup": None if decision.default_won else winner.speedup,
            "speedup_low": None if decision.default_won else decision.low,
            "speedup_high": None if decision.default_won else decision.high,
            "confirm_rounds": decision.rounds or None,
            "loads": decision.loads or None,
            "times": decision.times or None,
            "noise_margin": decision.margin,
            "versions": versions.wire() if versions else None,
            "default_id": self.default.route_id,
            "default_ms": self.default.median_ms,
            "winner_id": winner.route_id,
            "winner_route": winner.route,
            "winner_ms": winner.median_ms,
            "winner_loss": winner.loss,
            "winner_engine": winner.engine_uri,
            "winner_engine_sha256": winner.engine_sha256,
            "speedup": decision.speedup,
            "decision": decision.reason,
            "confirmed": decision.confirmed,
            "confirmation": decision.ratios or None,
            "cut_short": self.cut_short,
            "planned": self.planned,
            "routes": {o.value: sum(e.outcome is o for e in entries) for o in Outcome},
            "reused": {e.route_id: e.reused_from for e in entries if e.reused} or None,
            "winner_reused_from": winner.reused_from,
            # This run's own work: reused routes were built and timed by the run they come from.
            "build_seconds": round(sum(e.build_seconds or 0 for e in entries if not e.reused), 3),
            "measure_seconds": round(sum(e.spent_seconds for e in entries if not e.reused), 3),
        }


@dataclass(frozen=True)
class Failed:
    """No trustworthy result can come from this target; `reason` is a CamelCase condition reason."""

    reason: str
    message: str
    planned: int = 0


Step = RunBatches | RunConfirmation | Decided | Failed


def confirmation_name(candidates: Sequence[CacheEntry]) -> str:
    """Deterministic name of a confirmation round over these candidates."""
    ids = ",".join(sorted(e.route_id for e in candidates))
    return f"confirm-{hashlib.sha256(ids.encode()).hexdigest()[:8]}"


def _open(batches: Sequence[Batch], observed: Observed) -> tuple[Batch, ...]:
    return tuple(
        b for b in batches if b.name not in observed.given_up and any(r.id not in observed.entries for r in b.routes)
    )


def _without_reused_default(observed: Observed, default_id: str) -> Observed:
    """An earlier run's entry of the default route is not this run's: the default is always measured
    on this run's hardware, as the baseline every route (reused ones too) is confirmed against."""
    entry = observed.entries.get(default_id)
    if entry is None or not entry.reused:
        return observed
    return replace(observed, entries={k: v for k, v in observed.entries.items() if k != default_id})


def sweep_decision(measured: Sequence[CacheEntry], default_id: str, floor: float) -> Decision:
    """The winner from the sweep alone, as the flow decides it before (or without) a confirmation
    round: against `floor` raised by the measured spread (`noise_margin`), and a reused number alone
    never wins (a reused route can win only through a confirmation round against this run's default)."""
    return choose_winner([e for e in measured if not e.reused], default_id, noise_margin(measured, floor))


def next_step(spec: FlowSpec, observed: Observed) -> Step:
    """The one next step of a target's flow. Raises `PlanError` when the spec cannot be planned
    against the compiler's knobs (the message names the field)."""
    knobs = as_built(observed.knobs, spec.settings, settings_are_knobs=spec.settings_are_knobs)
    space = build_space(knobs, spec.knobs, dict(spec.pinned), spec.measure_uncompiled)
    if spec.routes:
        stage1 = plan_listed(knobs, space, spec.routes, dict(spec.pinned))
    else:
        stage1 = plan_stage1(spec.mode, space, dict(spec.pinned), spec.max_routes)
    default = stage1[0]
    planned = list(stage1)
    observed = _without_reused_default(observed, default.id)
    entries = observed.entries
    default_entry = entries.get(default.id)
    if default_entry is not None and not default_entry.passed:
        return _default_failed(default_entry, [entries[r.id] for r in planned if r.id in entries], len(planned))

    batches = make_batches(stage1, spec.routes_per_batch, "stage1")
    pending = _open(batches, observed)
    if pending and not observed.out_of_time:
        return RunBatches(
            "stage1",
            pending,
            default,
            len(planned),
            f"{spec.mode} search: {len(stage1)} routes in stage 1 "
            f"({sum(r.id in entries for r in stage1)} already in the cache)",
        )
    if default_entry is None:
        why = (
            "the run's deadline passed"
            if observed.out_of_time
            else "its Job ended without writing the default route's entry"
        )
        return Failed(
            "DefaultRouteNotMeasured",
            f"the default route was not measured ({why}): there is nothing to compare the routes against",
            len(planned),
        )
    default_ms = default_entry.median_ms
    assert default_ms is not None  # it passed (or the flow failed above): it was timed

    cut: list[str] = []
    notes: list[str] = []
    if spec.mode == "mixed" and not spec.routes:
        measured = [entries[r.id] for r in stage1 if r.id in entries]
        margin = noise_margin(measured, spec.noise_margin)
        improving = improving_values(space, measured, default_ms, margin)
        budget = max(0, spec.max_routes - len(stage1))
        combined = plan_mixed_stage2(space, improving, dict(spec.pinned))
        # (a value beside the launch-free route was neither faster nor slower: never one of `combined`)
        launch_free, beside = beside_launch_free(space, measured, default_entry, margin, dict(spec.pinned))
        stage2 = (combined + beside)[:budget]
        kept = min(len(combined), budget)
        kept_beside = len(stage2) - kept
        names = ", ".join(sorted(improving)) or "none"
        note = f"stage 2: {len(improving)} improving knobs ({names}) -> {kept} combined routes"
        if beside:
            note += (
                f"; the default is host-bound and {launch_free} is not: {kept_beside} of {len(beside)} routes pair it "
                f"with a knob that was neither faster nor slower behind the default's launch overhead"
            )
        if len(combined) + len(beside) > len(stage2):
            parts = [f"{kept} of {len(combined)} stage-2 combinations (the most promising)"] if combined else []
            parts += (
                [f"{kept_beside} of {len(beside)} routes pairing {launch_free} with a neutral knob"] if beside else []
            )
            cut.append(f"spec.search.maxRoutes={spec.max_routes} kept " + " and ".join(parts))
        planned += stage2
        notes.append(note)
        pending = _open(make_batches(stage2, spec.routes_per_batch, "stage2"), observed)
        if pending and not observed.out_of_time:
            return RunBatches("stage2", pending, default, len(planned), notes[-1])

    measured = [entries[r.id] for r in planned if r.id in entries]
    unmeasured = len(planned) - len(measured)
    if unmeasured:
        why = "the run's deadline passed" if observed.out_of_time else "their Jobs ended without writing them"
        cut.append(f"{unmeasured} of {len(planned)} planned routes have no measurement ({why})")
    margin = noise_margin(measured, spec.noise_margin)
    decision = sweep_decision(measured, default.id, spec.noise_margin)
    unconfirmed = choose_winner(measured, default.id, margin)  # reused routes too: said in a note when it differs
    candidates = tuple(
        e for e in rank_candidates(measured, default.id, default_ms) if e.engine_uri and could_win(e, margin)
    )[: spec.top_k]
    if spec.top_k and spec.confirm_rounds >= 2 and candidates:
        name = confirmation_name(candidates)
        if name in observed.confirmations:
            decision = confirm(observed.confirmations[name], default.id, margin)
            if decision.rounds < spec.confirm_rounds:  # the worker stopped it early (`settled`): the reason says so
                why = (
                    ": no candidate could still be confirmed faster than the default"
                    if settled(observed.confirmations[name], default.id, spec.noise_margin)
                    else ""
                )
                decision = replace(
                    decision,
                    reason=f"{decision.reason}; the round stopped after {decision.rounds} of "
                    f"{spec.confirm_rounds} rounds{why}",
                )
        elif name in observed.given_up:
            cut.append("the confirmation round ended without results: the winner comes from the sweep alone")
        elif observed.out_of_time:
            cut.append("the run's deadline passed before the confirmation round: the winner comes from the sweep alone")
        else:
            return RunConfirmation(
                name, candidates, default_entry, spec.confirm_rounds, len(planned), spec.confirm_loads
            )
    if not decision.confirmed and unconfirmed.winner_id != decision.winner_id:
        notes.append(
            f"reused route {entries[unconfirmed.winner_id].route} led the sweep "
            f"({unconfirmed.speedup:.3f}x, {entries[unconfirmed.winner_id].reused_from}) but was not "
            f"confirmed on this run's hardware: a reused number alone never wins"
        )
    return Decided(decision, default_entry, tuple(measured), len(planned), "; ".join(cut) or None, tuple(notes))


def first_step(spec: FlowSpec, knobs: Sequence[Knob]) -> RunBatches:
    """The flow's first step, nothing measured yet: stage 1's batches, the default route first (what
    `enginewright plan` shows and what a run launches first)."""
    step = next_step(spec, Observed(knobs))
    if not isinstance(step, RunBatches):  # (with no entries the default is unmeasured: never)
        raise RuntimeError(f"the flow's first step is {type(step).__name__}, not stage 1's batches")
    return step


def _default_failed(default_entry: CacheEntry, measured: list[CacheEntry], planned: int) -> Failed:
    if default_entry.outcome is Outcome.accuracy_rejected:
        rejected = sum(e.outcome is Outcome.accuracy_rejected for e in measured)
        return Failed(
            "ReferenceMismatch",
            f"the default route failed accuracy validation ({rejected} of {len(measured)} measured "
            f"routes rejected; default: {default_entry.error}): the reference outputs do not match "
            f"this model. Check the reference pairs (spec.accuracy.pairs; --references for tune), "
            f"the metric and the threshold",
            planned,
        )
    return Failed(
        "DefaultRouteFailed",
        f"the default route failed ({default_entry.outcome.value}): {default_entry.error}",
        planned,
    )
