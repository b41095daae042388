"""One reconcile pass of a TuningRun: observe the cluster and the store, ask the flow for each
target's next step, make the world match, and return the status to write.

Level-based: everything comes from what is observed now — the run, its Jobs (by label), its cache
ConfigMaps, the store's entries, probes and confirmation rounds — never from memory. A pass can run
twice, after a restart, or on a half-done step and still do the right thing: Job names are
deterministic (a 409 is adopted when it is ours), entries are placed in shards once by route id,
and publishing is idempotent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import ValidationError

from enginewright import failpoints
from enginewright.api.contracts import ProbeResult
from enginewright.api.models import Target, TargetStatus, TuningRunSpec
from enginewright.controller import metrics
from enginewright.controller.cache import ConfigMapCache, apply_config_map
from enginewright.controller.children import RunRef, selector
from enginewright.controller.dry_run import plan_config_map, planned
from enginewright.controller.errors import Problem, StoreUnavailable, Waiting, api_exception, api_reason
from enginewright.controller.jobs import (
    WorkerJobs,
    batches_to_start,
    confirm_request,
    job_state,
    probe_request,
    sweep_request,
)
from enginewright.controller.observe import TargetObservation, observe_target, previous_target
from enginewright.controller.preflight import check_inputs, run_client
from enginewright.controller.publish import publish_winner
from enginewright.controller.scheduling import owned, verdict
from enginewright.controller.settings import Settings
from enginewright.controller.status import (
    FINISHED,
    Emit,
    confirming,
    decided_status,
    published,
    run_status,
    stalled,
    sweeping,
    target_counts,
    target_failed,
    unpublished,
    waiting_for_store,
    waiting_on_cluster,
)
from enginewright.controller.tenancy import bucket_refusal, image_refusal, publish_bucket, seed_refusal
from enginewright.search.flow import Decided, Failed, FlowSpec, RunBatches, RunConfirmation, next_step
from enginewright.search.planners import PlanError
from enginewright.store.layout import RunKeys
from enginewright.store.objects import S3Store


@dataclass
class Clients:
    """What a pass talks to (made in `handlers.reconciler`)."""

    core: Any  # kubernetes.client.CoreV1Api (the client is untyped)
    batch: Any  # kubernetes.client.BatchV1Api
    s3: Any  # minio.Minio, with the operator's key
    s3_as: Callable[[str, str], Any]  # (access key id, secret key) -> minio.Minio with a run's own key


class Reconciler:
    """One pass of a run at a time (`reconcile`), from what the cluster and the store hold now; keeps
    nothing between passes but the cache shards it already parsed."""

    def __init__(self, settings: Settings, clients: Clients):
        self.settings, self.k8s = settings, clients
        self.runs = self.store(settings.runs_bucket)  # the bucket the workers write to
        self.jobs = WorkerJobs(settings, clients.batch, clients.core, self.runs)
        self.cache = ConfigMapCache(settings, clients.core)

    def store(self, bucket: str) -> S3Store:
        return S3Store(self.k8s.s3, bucket)

    # ================================================================== the pass
    def reconcile(self, body: dict, emit: Emit) -> dict | None:
        """The status to write after one pass (None: nothing to do, the run is finished)."""
        meta, previous = body["metadata"], body.get("status") or {}
        generation = meta.get("generation", 1)
        if meta.get("deletionTimestamp"):
            return None
        run = RunRef(meta["name"], meta["namespace"], meta["uid"])
        if previous.get("observedGeneration") == generation and previous.get("phase") in ("Succeeded", "Failed"):
            self.jobs.expire(run)  # after the final status is written: from now on nothing reads them
            return None
        began = time.monotonic()
        try:
            spec = TuningRunSpec.model_validate(body["spec"])
        except ValidationError as exc:
            problems = "; ".join(f"spec.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            return self._stalled(previous, generation, "InvalidSpec", problems, emit, final=True)
        try:
            # What a run names on the operator's credentials: checked on every pass (cheap, no I/O).
            refusal = (
                image_refusal(spec, self.settings)
                or bucket_refusal(spec, self.settings)
                or seed_refusal(spec, run.namespace, self.settings)
            )
            if refusal:
                raise Problem(refusal.reason, refusal.message)
            if not any(t.get("stage") not in ("pending", "probing") for t in previous.get("targets") or []):
                # until the first target is past its probe: then the inputs were fine
                check_inputs(run, spec, self.settings, self.k8s.core, self.k8s.s3, self.k8s.s3_as)
            targets = [self._target(run, spec, target, meta, previous, emit) for target in spec.targets]
        except Problem as problem:
            return self._stalled(previous, generation, problem.reason, problem.message, emit)
        except api_exception() as exc:
            if exc.status != 403 or "being terminated" in str(exc.body or ""):
                raise
            # The operator's own permissions: say so on the run (the rest of the run is fine), retry.
            metrics.RECONCILE_ERRORS.labels(error="Forbidden").inc()
            return self._stalled(
                previous,
                generation,
                "Forbidden",
                f"the operator was refused: {api_reason(exc)}; check its RBAC (the Helm chart grants what it needs)",
                emit,
            )
        except Waiting as wait:
            if previous.get("message") != wait.message:
                emit("Normal", wait.reason, wait.message)
            return waiting_on_cluster(previous, generation, wait.reason, wait.message)
        except StoreUnavailable as exc:
            metrics.RECONCILE_ERRORS.labels(error="StoreUnavailable").inc()
            message = f"waiting for the object store: {exc}"
            if previous.get("message") != message:
                emit("Warning", "StoreUnavailable", message)
            return waiting_for_store(previous, generation, message)
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - began)
        status, event = run_status(
            targets,
            previous,
            generation,
            objective=spec.timing.objective.value,
            accuracy_validated=not spec.accuracy.disabled,
            dry_run=spec.search.dry_run,
        )
        if event:
            emit(*event)
        return status

    def _stalled(
        self, previous: dict, generation: int, reason: str, message: str, emit: Emit, final: bool = False
    ) -> dict:
        if previous.get("message") != message:
            emit("Warning", reason, message)
        return stalled(previous, generation, reason, message, final)

    # ================================================================== one target
    def _target(
        self, run: RunRef, spec: TuningRunSpec, target: Target, meta: dict, previous: dict, emit: Emit
    ) -> TargetStatus:
        """Observe the target (its Jobs, probe, cache entries, confirmation rounds), ask the flow for
        its next step, and act on it; returns the target's status."""
        before = previous_target(previous, target.gpu_type)
        if before and before.stage in FINISHED:
            return before
        # ---------------------------------------------------------------- observe
        seen = observe_target(
            run,
            spec,
            target,
            meta,
            before,
            runs=self.runs,
            jobs=self.jobs,
            cache=self.cache,
            seed_store=lambda bucket: S3Store(run_client(run, self.settings, self.k8s.core, self.k8s.s3_as), bucket),
            emit=emit,
        )
        keys, jobs, probe = seen.keys, seen.jobs, seen.probe
        status = TargetStatus(
            gpu_type=target.gpu_type, stage="probing", cache_config_maps=before.cache_config_maps if before else []
        )
        if not isinstance(probe, ProbeResult) or not probe.ok:
            return self._probe(run, spec, target, seen, status, before, emit)
        # ---------------------------------------------------------------- ask the flow
        try:
            step = next_step(FlowSpec.of(spec), seen.observed(probe))
        except PlanError as exc:
            return self._failed(status, "InvalidKnobs", str(exc), emit)
        if before and before.stage == "stage1" and not (isinstance(step, RunBatches) and step.stage == "stage1"):
            failpoints.hit("stage1-done")
        # ---------------------------------------------------------------- act
        status = seen.recorded(target_counts(status, seen.entries, step))
        if spec.search.dry_run and isinstance(step, RunBatches):
            return self._dry_run(run, target, step, status)
        if isinstance(step, RunBatches):
            status = sweeping(status, step, self._run_batches(run, spec, target, seen, step))
            return self._scheduling(run, target, jobs, self._moved(status, before, emit), before, emit)
        if isinstance(step, RunConfirmation):
            self._confirm(run, spec, target, seen, step)
            status = confirming(status, step)
            return self._scheduling(run, target, jobs, self._moved(status, before, emit), before, emit)
        if seen.out_of_time:
            self.jobs.stop_active(run, jobs)
        if isinstance(step, Failed):
            return self._failed(status, step.reason, step.message, emit)
        return self._decided(run, spec, target, meta, keys, probe, step, status, emit)

    def _probe(
        self,
        run: RunRef,
        spec: TuningRunSpec,
        target: Target,
        seen: TargetObservation,
        status: TargetStatus,
        before: TargetStatus | None,
        emit: Emit,
    ) -> TargetStatus:
        """A target without a usable probe result: its probe Job (made once), or why it failed."""
        probe, jobs = seen.probe, seen.jobs
        if isinstance(probe, str):
            return self._failed(status, "InvalidProbe", probe, emit)
        if probe is not None:
            return self._failed(status, "InvalidInput", str(probe.error), emit)
        job = jobs.get("probe")
        if job is not None and job_state(job) != "active":
            name = job["metadata"]["name"]
            return self._failed(
                status,
                "ProbeFailed",
                f"the probe Job {name} ended ({job_state(job)}) without writing {seen.keys.probe}: "
                f"{self.jobs.last_words(run.namespace, name)}",
                emit,
            )
        request = probe_request(spec, target, seen.keys, self.settings.runs_bucket)
        self.jobs.ensure(run, spec, target, "probe", "probe", request, 1, jobs, seen.deadline)
        status = status.model_copy(update={"message": "probing the compiler on a node of this type"})
        return self._scheduling(run, target, jobs, self._moved(status, before, emit), before, emit)

    def _run_batches(
        self, run: RunRef, spec: TuningRunSpec, target: Target, seen: TargetObservation, step: RunBatches
    ) -> int:
        """A Job for each batch that has none, while fewer than `spec.search.parallelism` run; returns
        how many run now."""
        failpoints.hit(f"planned-{step.stage}")
        start, active = batches_to_start(step, seen.jobs, spec.search.parallelism)
        for batch in start:
            request = sweep_request(spec, target, seen.keys, self.settings.runs_bucket, batch, step, seen.deadline)
            self.jobs.ensure(
                run, spec, target, batch.stage, batch.name, request, len(batch.routes), seen.jobs, seen.deadline
            )
        return active

    def _confirm(
        self, run: RunRef, spec: TuningRunSpec, target: Target, seen: TargetObservation, step: RunConfirmation
    ) -> None:
        """The confirmation round's Job: the candidates' kept engines against the default's."""
        request = confirm_request(spec, target, seen.keys, self.settings.runs_bucket, step, seen.deadline)
        self.jobs.ensure(
            run, spec, target, "confirm", step.name, request, len(step.candidates), seen.jobs, seen.deadline
        )

    def _scheduling(
        self, run: RunRef, target: Target, jobs: dict, status: TargetStatus, before: TargetStatus | None, emit: Emit
    ) -> TargetStatus:
        """A target whose pods the scheduler cannot place says so (reason Unschedulable, the scheduler's
        message) from the pass that sees it; it gives up (its Jobs stopped, so an autoscaler is not left
        to add a node for nothing) once no pod of it has a node for the operator's configured wait. A
        pod on a node whose container cannot start (reason ContainerCannotStart, the kubelet's reason
        and message) is said and given up on the same way, after the start wait."""
        if not any(job_state(job) == "active" for job in jobs.values()):
            return status
        pods = self.k8s.core.list_namespaced_pod(run.namespace, label_selector=selector(run, target.gpu_type)).items
        plain = owned(
            [self.k8s.core.api_client.sanitize_for_serialization(p) for p in pods],
            {job["metadata"]["uid"] for job in jobs.values()},
        )
        seen = before.blocked_since if before is not None else None
        said = verdict(plain, time.time(), self.settings.unschedulable_seconds, self.settings.start_seconds, seen)
        if said is None:
            return status
        status = status.model_copy(update={"blocked_since": said.blocked_since})
        if said.give_up:
            self.jobs.stop_active(run, jobs)
            return self._failed(status, said.reason, said.message, emit)
        status = status.model_copy(update={"reason": said.reason, "message": said.message})
        if before is None or before.reason != said.reason:
            emit("Warning", said.reason, f"{target.gpu_type}: {status.message}")
        return status

    def _moved(self, status: TargetStatus, before: TargetStatus | None, emit: Emit) -> TargetStatus:
        if before is None or before.stage != status.stage:
            emit("Normal", f"Stage{status.stage.capitalize()}", f"{status.gpu_type}: {status.message or status.stage}")
        return status

    @staticmethod
    def _failed(status: TargetStatus, reason: str, message: str, emit: Emit) -> TargetStatus:
        """`status.target_failed`, said once as a Warning event."""
        status = target_failed(status, reason, message)
        emit("Warning", reason, f"{status.gpu_type}: {status.message}")
        return status

    # ================================================================== how a target ends
    def _dry_run(self, run: RunRef, target: Target, step: RunBatches, status: TargetStatus) -> TargetStatus:
        plan = plan_config_map(run, target.gpu_type, step)
        apply_config_map(self.k8s.core, run, plan, exists=False)
        return planned(status, step, plan["metadata"]["name"])

    def _decided(
        self,
        run: RunRef,
        spec: TuningRunSpec,
        target: Target,
        meta: dict,
        keys: RunKeys,
        probe: ProbeResult,
        step: Decided,
        status: TargetStatus,
        emit: Emit,
    ) -> TargetStatus:
        status = decided_status(status, step)
        if not spec.publish.enabled:
            return unpublished(status, step)
        engine_uri = publish_winner(
            settings=self.settings,
            core=self.k8s.core,
            runs_store=self.runs,
            run=run,
            catalog_store=self.store(publish_bucket(spec, self.settings)),
            generation=meta.get("generation"),
            spec=spec,
            target=target,
            keys=keys,
            probe=probe,
            step=step,
            emit=emit,
        )
        return published(status, step, engine_uri)
