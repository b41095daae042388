"""The backend interface: knobs, build, load, run, time, versions."""

from __future__ import annotations

import abc
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from enginewright.api.cache import TimingStats, Versions
from enginewright.search.routes import Knob


class BackendUnavailable(RuntimeError):
    """The compiler this backend needs is not installed or has no usable device here."""


@dataclass
class BuildRequest:
    """Everything a build depends on besides the route."""

    model_path: Path
    settings: dict[str, str] = field(default_factory=dict)
    input_shapes: list = field(default_factory=list)  # api.models.InputShape
    workdir: Path = Path(".")
    sample_inputs: dict | None = None  # named arrays of the first reference pair, for shape-specializing compilers


@dataclass
class TimingPlan:
    """How to time a runner: the fields of `api.models.Timing` (where the defaults are written)."""

    warmup_iterations: int
    iterations: int
    repeats: int
    min_seconds: float


class Runner(abc.ABC):
    """A loaded engine."""

    @abc.abstractmethod
    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once on host arrays, return host arrays by output name."""

    def timed_iterations(self, inputs: Mapping[str, np.ndarray], count: int) -> float:
        """Run `count` iterations and return the total elapsed milliseconds. CPU backends use a
        monotonic clock; GPU backends override this with device events."""
        prepared = self.prepare(inputs)
        start = time.perf_counter()
        for _ in range(count):
            self.run_prepared(prepared)
        return (time.perf_counter() - start) * 1000.0

    def prepare(self, inputs: Mapping[str, np.ndarray]):
        """Inputs in the form `run_prepared` wants (e.g. already on the device)."""
        return inputs

    def run_prepared(self, prepared) -> None:
        self.run(prepared)

    def describe(self) -> dict:
        """How the engine loaded (e.g. compile-cache hits), recorded in the cache entry."""
        return {}

    def close(self) -> None:
        """Release device memory and handles."""


def measure(runner: Runner, inputs: Mapping[str, np.ndarray], plan: TimingPlan) -> TimingStats:
    """Warm up, then `repeats` timed repeats of `iterations` runs each (more repeats while less than
    `min_seconds` was timed). Stats are over per-repeat mean iteration times."""
    if plan.warmup_iterations:
        runner.timed_iterations(inputs, plan.warmup_iterations)
    per_iteration: list[float] = []
    total_ms = 0.0
    while len(per_iteration) < plan.repeats or total_ms < plan.min_seconds * 1000.0:
        elapsed = runner.timed_iterations(inputs, plan.iterations)
        per_iteration.append(elapsed / plan.iterations)
        total_ms += elapsed
        if len(per_iteration) >= 10 * plan.repeats and len(per_iteration) >= 1000:
            break
    return stats_of(per_iteration, n=len(per_iteration) * plan.iterations)


def stats_of(samples: list[float], n: int | None = None) -> TimingStats:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return TimingStats(median_ms=statistics.median(ordered), mean_ms=statistics.fmean(ordered),
                       p90_ms=p90, min_ms=ordered[0], n=n if n is not None else len(samples))


class Backend(abc.ABC):
    """One compiler."""

    name: str = ""
    engine_suffix: str = ".engine"

    @abc.abstractmethod
    def knobs(self) -> list[Knob]:
        """Every route knob this compiler (as installed) supports."""

    @abc.abstractmethod
    def versions(self) -> Versions:
        """Compiler, CUDA, driver and GPU versions, for provenance and catalog keys."""

    @abc.abstractmethod
    def build(self, request: BuildRequest, route: dict[str, str]) -> bytes:
        """Build the route into engine bytes (raises on a build failure)."""

    @abc.abstractmethod
    def load(self, engine: bytes, workdir: Path) -> Runner:
        """Load engine bytes (possibly in a fresh process) into a runner."""

    def check_inputs(self, model_path: Path, inputs: Mapping[str, np.ndarray]) -> None:
        """Raise ValueError naming the input when `inputs` cannot feed the model. Optional."""

