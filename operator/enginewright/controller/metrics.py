"""Prometheus metrics of the operator (served on the metrics port by `handlers`).

Per-run series (`active_jobs`, `best_speedup`) come from the status each reconcile pass of a run
sees, so they are rebuilt from the cluster when the operator starts (kopf starts a reconcile of every
run it finds, finished ones included) and removed with the run: `active_jobs` when the run is
finished, every series of the run when it is deleted. `runs` counts runs by phase the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

PHASES = ("Pending", "Running", "Confirming", "Publishing", "Succeeded", "Failed")

ROUTES_MEASURED = Counter("enginewright_routes_measured_total", "Cache entries aggregated, by outcome", ["outcome"])
BUILD_SECONDS = Histogram(
    "enginewright_route_build_seconds", "Build time of a route", buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800)
)
MEASURE_SECONDS = Histogram(
    "enginewright_route_measure_seconds", "Timed execution of a route", buckets=(0.1, 0.5, 1, 5, 15, 60, 300)
)
GPU_SECONDS = Counter(
    "enginewright_gpu_seconds_total",
    "Seconds spent building and measuring routes on nodes "
    "of a GPU type (as status.targets[].gpuSeconds), counted as entries are aggregated",
    ["gpu_type"],
)
JOBS_CREATED = Counter("enginewright_jobs_created_total", "Worker Jobs created")
ACTIVE_JOBS = Gauge(
    "enginewright_active_jobs",
    "Worker Jobs running or waiting for a node, per unfinished run and target",
    ["namespace", "run", "target"],
)
RECONCILE_SECONDS = Histogram(
    "enginewright_reconcile_seconds",
    "Duration of one reconcile pass of a run",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RECONCILE_ERRORS = Counter(
    "enginewright_reconcile_errors_total",
    "Reconcile passes that failed and are retried, by error (an API server or store away, a refusal, a bug)",
    ["error"],
)
POLICY_CHECKS = Counter(
    "enginewright_policy_checks_total", "Checks of a TuningPolicy's targets against the stack their runs measured"
)
POLICY_RUNS_STARTED = Counter(
    "enginewright_policy_runs_started_total",
    "TuningRuns started by a TuningPolicy, by trigger (Initial, DriverMajorChanged, CompilerVersionChanged, "
    "ModelDigestChanged, or several joined by commas; Scheduled: a re-measure of triggers.schedule; "
    "WinnerRegressed, RunnerUpWins, RemeasureFailed: the full re-tune after a re-measure)",
    ["trigger"],
)
POLICY_REGRESSIONS = Counter(
    "enginewright_policy_regressions_total",
    "Published winners a TuningPolicy's re-measure found no faster than the default on a new stack (each starts a "
    "full re-tune)",
)
BEST_SPEEDUP = Gauge(
    "enginewright_best_speedup", "Winner over the default route, per run and target", ["namespace", "run", "target"]
)


class _Runs:
    """What the per-run series are made of: each run's namespace, name, phase and targets, by uid."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs: dict[str, tuple[str, str, str, frozenset[str]]] = {}

    def collect(self):
        counts = dict.fromkeys(PHASES, 0)
        with self.lock:
            for _, _, phase, _ in self.runs.values():
                counts[phase] = counts.get(phase, 0) + 1
        family = GaugeMetricFamily("enginewright_runs", "TuningRuns by phase", labels=["phase"])
        for phase, count in counts.items():
            family.add_metric([phase], count)
        yield family


RUNS = _Runs()
REGISTRY.register(RUNS)


def observe_run(uid: str, namespace: str, name: str, status: dict, finished: bool) -> None:
    """Set a run's series from its status (after a pass, or as read for a finished run)."""
    targets = status.get("targets") or []
    with RUNS.lock:
        RUNS.runs[uid] = (
            namespace,
            name,
            status.get("phase") or "Pending",
            frozenset(t["gpuType"] for t in targets if t.get("gpuType")),
        )
    for target in targets:
        labels = (namespace, name, target["gpuType"])
        if finished or target.get("stage") in ("done", "failed"):
            _remove(ACTIVE_JOBS, labels)
        else:
            ACTIVE_JOBS.labels(*labels).set(target.get("activeJobs", 0))
        speedup = (target.get("winner") or {}).get("speedup")
        if speedup is not None:
            BEST_SPEEDUP.labels(*labels).set(speedup)


def forget_run(uid: str, namespace: str, name: str, targets: Sequence[str] = ()) -> None:
    """The run is deleted: none of its series stays."""
    with RUNS.lock:
        known = RUNS.runs.pop(uid, None)
    for target in set(targets) | (set(known[3]) if known else set()):
        for gauge in (ACTIVE_JOBS, BEST_SPEEDUP):
            _remove(gauge, (namespace, name, target))


def _remove(gauge: Gauge, labels: tuple[str, ...]) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
