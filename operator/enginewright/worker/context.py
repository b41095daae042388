"""What one worker invocation needs, whatever started it (a Job or `enginewright tune`): the model,
the reference data the outputs are checked against, the store and its keys, the timing and search
settings, the deadline; and the fingerprint of every measurement it makes."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from enginewright.api.cache import CacheEntry, Versions
from enginewright.api.fingerprint import Fingerprint, fingerprint_of
from enginewright.api.models import Accuracy as AccuracySpec, Search, Timing, default_of
from enginewright.store.layout import RunKeys
from enginewright.store.objects import ObjectStore
from enginewright.worker.child import ChildRequest

log = logging.getLogger("enginewright.worker")


@dataclass
class Accuracy:
    """What the worker checks outputs against (local paths of the downloaded .npz files)."""

    inputs: list[Path]
    references: list[Path]
    metric: str = default_of(AccuracySpec, "metric").value
    threshold: float | None = None
    atol: float = default_of(AccuracySpec, "atol")
    rtol: float = default_of(AccuracySpec, "rtol")
    outputs: list[str] = field(default_factory=list)  # the outputs checked; empty: every model output

    @property
    def enabled(self) -> bool:
        return bool(self.references) and self.threshold is not None


@dataclass
class WorkerContext:
    """Everything one worker invocation needs, whatever started it (a Job or `enginewright tune`)."""

    backend: str
    model: Path
    accuracy: Accuracy
    store: ObjectStore
    prefix: str  # e.g. runs/<ns>/<run>-<uid8>/<gpu-type>
    target: str
    workdir: Path
    engine_suffix: str = ".engine"
    settings: dict[str, str] = field(default_factory=dict)
    input_shapes: list[dict] = field(default_factory=list)
    timing: Timing = field(default_factory=Timing)  # a dict of its fields is accepted too
    # paired rounds stop once a route is placed on either side of 1 - margin
    noise_margin: float = default_of(Search, "noise_margin")
    route_timeout: float = float(default_of(Search, "route_timeout_seconds"))
    deadline: float | None = None  # epoch seconds; routes not started by then are skipped
    save_all_engines: bool = default_of(Search, "save_all_engines")
    backend_options: dict = field(default_factory=dict)
    build_parallelism: int = default_of(Search, "build_parallelism")  # routes built at once (never beside a timing)
    measure_cpus: frozenset[int] | None = None  # CPUs every serving process is pinned to (see measuring_cpus)
    compiler: str | None = None  # set: entries of another compiler (a shared or imported cache) are not used
    seeds: dict[str, CacheEntry] = field(default_factory=dict)  # imported entries of this compiler, by route id
    # Reuse across runs: entries are stamped with `run` and the route's fingerprint; with `run` set, an
    # entry of another run is used only when its fingerprint equals this run's for that route (None:
    # every entry under the prefix is this run's own, as in a Job's run-scoped prefix).
    fingerprint: Fingerprint | None = None  # this run's context (route_id '')
    run: str | None = None
    reuse: bool = True  # False: entries of other runs are never used (they are still stamped)
    progress: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.timing, Timing):
            self.timing = Timing.model_validate(self.timing)

    @classmethod
    def of(
        cls,
        spec,
        *,
        model: Path,
        accuracy: Accuracy,
        store,
        prefix: str,
        target: str,
        workdir: Path,
        engine_suffix: str,
        deadline: float | None,
        progress: Callable[[str], None] | None,
        **local,
    ) -> WorkerContext:
        """The context of a worker that runs `spec` (a `TuningRunSpec`, or `tune`'s options as one:
        `cli.tune.TuneOptions.spec`): the compiler, timing and search settings come from the spec,
        where it runs from the caller; `local` sets the fields only `tune` uses (seeds, reuse, ...)."""
        compiler, search = spec.compiler, spec.search
        return cls(
            backend=compiler.name.value,
            model=model,
            accuracy=accuracy,
            store=store,
            prefix=prefix,
            target=target,
            workdir=workdir,
            engine_suffix=engine_suffix,
            settings=compiler.settings,
            input_shapes=[s.wire() for s in compiler.input_shapes],
            timing=spec.timing,
            noise_margin=search.noise_margin,
            route_timeout=search.route_timeout_seconds,
            save_all_engines=search.save_all_engines,
            build_parallelism=search.build_parallelism,
            deadline=deadline,
            measure_cpus=measuring_cpus(),
            progress=progress,
            **local,
        )

    def time_left(self) -> float:
        """Seconds until the run's deadline (0 once it passed; infinite without one)."""
        if self.deadline is None:
            return float("inf")
        return max(0.0, self.deadline - time.time())

    def child_request(self, action: str, workdir: Path, engine: Path | str, **fields) -> ChildRequest:
        """A request for a child process of this worker: its backend and timing, plus `fields`."""
        return ChildRequest(
            action=action,
            backend=self.backend,
            backend_options=self.backend_options,
            workdir=str(workdir),
            engine=str(engine),
            timing=self.timing,
            **fields,
        )

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


def context_fingerprint(ctx: WorkerContext, versions: Versions) -> Fingerprint:
    """The fingerprint (`api.fingerprint`, route id '') of every measurement this context makes, with
    `versions` the backend's on this machine: the entries it writes carry it per route, and an
    earlier run's entry is reused only when it carries the same."""
    import numpy as np

    def sha256(path: Path) -> str:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()

    accuracy = ctx.accuracy
    with np.load(accuracy.inputs[0], allow_pickle=False) as arrays:
        shapes = {name: list(arrays[name].shape) for name in arrays.files}
    return fingerprint_of(
        backend=ctx.backend,
        backend_options=ctx.backend_options,
        model_sha256=sha256(ctx.model),
        versions=versions,
        objective=ctx.timing.objective.value,
        input_shapes=shapes,
        declared_shapes=ctx.input_shapes,
        settings=ctx.settings,
        data_sha256=[sha256(p) for p in [*accuracy.inputs, *accuracy.references]],
        metric=accuracy.metric if accuracy.enabled else None,
        threshold=accuracy.threshold if accuracy.enabled else None,
        atol=accuracy.atol,
        rtol=accuracy.rtol,
        outputs=accuracy.outputs,
    )


def measuring_cpus() -> frozenset[int] | None:
    """The CPUs every engine-serving process is pinned to: `ENGINEWRIGHT_MEASURE_CPUS`, a list such
    as `3` or `2,3`; unset or `off`: not pinned. Off by default because it was measured to hurt: on
    the H200, with the eight serving processes of the A/A benchmark all pinned to one CPU, the
    attention block's default engine ran 1.5-2x slower (0.32-0.45 ms against 0.20-0.23 unpinned)
    and identical engines differed by up to 40% from process to process (±5% unpinned): their idle
    threads (CUDA driver, compile workers) share that core with the one measuring
    (docs/benchmarks.md). For nodes whose measuring cores are reserved (e.g. a static CPU manager)."""
    setting = os.environ.get("ENGINEWRIGHT_MEASURE_CPUS", "").strip()
    if setting in ("", "off"):
        return None
    return frozenset(int(cpu) for cpu in setting.split(","))
