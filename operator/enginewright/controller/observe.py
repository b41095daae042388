"""What one pass sees of one target before it asks the flow: the target's Jobs, its probe result, its
cache entries, its confirmation rounds, and whether the run is out of time — read from the cluster
and the store now, never remembered.

Observing moves what workers wrote into the places a pass reads: entries of earlier runs
(`controller.reuse`) and of the run's seed (`controller.seed`) are copied into the run's prefix
first (once), and entries new in the store are placed into the cache ConfigMaps
(`controller.cache`), so all of them are observed as the run's own.

`observe_target` is the shell; `TargetObservation`'s view of it (`observed`, `recorded`) and
`given_up` are pure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from enginewright.api.cache import CacheEntry
from enginewright.api.contracts import ConfirmationResult, ProbeResult
from enginewright.api.models import Target, TargetStatus, TuningRunSpec
from enginewright.controller.cache import ConfigMapCache
from enginewright.controller.children import RunRef
from enginewright.controller.jobs import WorkerJobs, job_state
from enginewright.controller.reuse import Reused, copy_reused
from enginewright.controller.seed import Seeded, copy_seeded
from enginewright.controller.status import Emit, run_deadline
from enginewright.controller.store_reads import list_keys, read_typed
from enginewright.search.flow import Observed
from enginewright.store.layout import RunKeys, run_prefix
from enginewright.store.objects import S3Store

REFUSED_SHOWN = 20  # entries refused, listed in the status


@dataclass(frozen=True)
class TargetObservation:
    """One target as one pass found it. Until the probe has written a usable result only the first
    five fields are observed (nothing else can be read without the compiler's knobs)."""

    keys: RunKeys
    jobs: dict[str, dict]  # batch name -> Job (a plain dict); the pass adds the Jobs it creates
    deadline: float | None  # epoch seconds: the run's creation plus spec.search.deadlineSeconds
    out_of_time: bool
    probe: ProbeResult | str | None  # None: not written yet; text: written, but not a ProbeResult
    entries: dict[str, CacheEntry] = field(default_factory=dict)  # route id -> entry
    shards: list[str] = field(default_factory=list)  # the cache ConfigMaps, by name
    refused: list[str] = field(default_factory=list)  # entries that could not be read
    confirmations: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # name -> rounds
    reused: Reused = field(default_factory=Reused)
    seeded: Seeded | None = None

    def observed(self, probe: ProbeResult) -> Observed:
        """What the flow is told (`search.flow.next_step`): the compiler's knobs, the entries, the
        confirmation rounds, the batches given up, whether the run is out of time."""
        return Observed(probe.compiler_knobs(), self.entries, self.confirmations, given_up(self.jobs), self.out_of_time)

    def recorded(self, status: TargetStatus) -> TargetStatus:
        """`status` with what observing did: the cache shards, the entries refused, the routes taken
        from earlier runs and from the seed."""
        return status.model_copy(
            update={
                "cache_config_maps": self.shards,
                "refused": self.refused[:REFUSED_SHOWN],
                "reused": len(self.reused.routes),
                "reused_from": self.reused.runs,
                "seeded": len(self.seeded.routes) if self.seeded else 0,
                "seed": self.seeded.note if self.seeded else None,
            }
        )


def given_up(jobs: dict[str, dict]) -> frozenset[str]:
    """Batches (and confirmation rounds) whose Job ended: what they did not write, they never will.
    The probe's Job is not a batch of the flow."""
    return frozenset(batch for batch, job in jobs.items() if job_state(job) != "active" and batch != "probe")


def previous_target(previous: dict, gpu_type: str) -> TargetStatus | None:
    """The target's status as the last pass wrote it (None: no pass has)."""
    return next(
        (TargetStatus.model_validate(t) for t in previous.get("targets") or [] if t.get("gpuType") == gpu_type),
        None,
    )


def observe_target(
    run: RunRef,
    spec: TuningRunSpec,
    target: Target,
    meta: dict,
    before: TargetStatus | None,
    *,
    runs: S3Store,
    jobs: WorkerJobs,
    cache: ConfigMapCache,
    seed_store: Callable[[str], S3Store],
    emit: Emit,
) -> TargetObservation:
    """Read the target from the cluster and the store (`runs`: the runs bucket; `seed_store`: a bucket
    read with the run's own key, for spec.search.seedCache)."""
    keys = RunKeys(run_prefix(run.namespace, run.name, run.uid, target.gpu_type))
    found = jobs.of_target(run, target)  # before the store: a finished Job's entries are already there
    probe = read_typed(runs, keys.probe, ProbeResult)
    deadline = run_deadline(spec, meta)
    out_of_time = deadline is not None and time.time() >= deadline
    if not isinstance(probe, ProbeResult) or not probe.ok:
        return TargetObservation(keys, found, deadline, out_of_time, probe)
    reused = copy_reused(runs, run.namespace, spec, keys, probe)
    seeded = copy_seeded(runs, seed_store, spec, keys, probe)
    entries, shards, refused = cache.aggregate(run, target, keys, runs, emit, before.refused if before else [])
    confirmations = {}
    for key in list_keys(runs, keys.confirmations):
        result = read_typed(runs, key, ConfirmationResult)
        if isinstance(result, ConfirmationResult):
            confirmations[key.rsplit("/", 1)[-1].removesuffix(".json")] = result.rounds
    return TargetObservation(
        keys, found, deadline, out_of_time, probe, entries, shards, refused, confirmations, reused, seeded
    )
