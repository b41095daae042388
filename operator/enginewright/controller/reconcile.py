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
from enginewright.api.contracts import BatchRequest, ConfirmationResult, ProbeResult
from enginewright.api.models import Target, TargetStatus, TuningRunSpec
from enginewright.controller import metrics
from enginewright.controller.cache import ConfigMapCache, apply_config_map
from enginewright.controller.errors import Problem, StoreUnavailable, Waiting, api_exception, api_reason
from enginewright.controller.jobs import RunRef, WorkerJobs, child_name, job_state, labels, selector
from enginewright.controller.preflight import check_inputs, run_client
from enginewright.controller.publish import publish_winner
from enginewright.controller.reuse import copy_reused
from enginewright.controller.scheduling import waiting
from enginewright.controller.seed import copy_seeded
from enginewright.controller.settings import Settings
from enginewright.controller.status import (
    FINISHED,
    Emit,
    decided_status,
    run_deadline,
    run_status,
    stalled,
    target_counts,
    target_done,
    target_failed,
    waiting_for_store,
    waiting_on_cluster,
)
from enginewright.controller.store_reads import list_keys, read_typed
from enginewright.controller.tenancy import bucket_refusal, image_refusal, publish_bucket, seed_refusal
from enginewright.search.flow import Decided, Failed, FlowSpec, Observed, RunBatches, RunConfirmation, next_step
from enginewright.search.planners import PlanError
from enginewright.store.layout import RunKeys, run_prefix
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
        before = next(
            (
                TargetStatus.model_validate(t)
                for t in previous.get("targets") or []
                if t.get("gpuType") == target.gpu_type
            ),
            None,
        )
        if before and before.stage in FINISHED:
            return before
        # ---------------------------------------------------------------- observe
        keys = RunKeys(run_prefix(run.namespace, run.name, run.uid, target.gpu_type))
        runs = self.runs
        jobs = self.jobs.of_target(run, target)  # before the store: a finished Job's entries are already there
        probe = read_typed(runs, keys.probe, ProbeResult)
        deadline = run_deadline(spec, meta)
        out_of_time = deadline is not None and time.time() >= deadline
        status = TargetStatus(
            gpu_type=target.gpu_type, stage="probing", cache_config_maps=before.cache_config_maps if before else []
        )
        if probe is None:
            job = jobs.get("probe")
            if job is not None and job_state(job) != "active":
                return self._failed(
                    status,
                    "ProbeFailed",
                    f"the probe Job {job['metadata']['name']} ended "
                    f"({job_state(job)}) without writing {keys.probe}: "
                    f"{self.jobs.last_words(run.namespace, job['metadata']['name'])}",
                    emit,
                )
            request = BatchRequest(
                target=target.gpu_type,
                mode="probe",
                stage="probe",
                batch="probe",
                bucket=self.settings.runs_bucket,
                prefix=keys.prefix,
                spec=spec,
            )
            self.jobs.ensure(run, spec, target, "probe", "probe", request, 1, jobs, deadline)
            status = status.model_copy(update={"message": "probing the compiler on a node of this type"})
            return self._scheduling(run, target, jobs, self._moved(status, before, emit), before, emit)
        if isinstance(probe, str):
            return self._failed(status, "InvalidProbe", probe, emit)
        if not probe.ok:
            return self._failed(status, "InvalidInput", str(probe.error), emit)
        reused = copy_reused(runs, run.namespace, spec, keys, probe)
        as_run = lambda bucket: S3Store(run_client(run, self.settings, self.k8s.core, self.k8s.s3_as), bucket)  # noqa: E731
        seeded = copy_seeded(runs, as_run, spec, keys, probe)
        entries, shard_names, refused = self.cache.aggregate(
            run, target, keys, runs, emit, before.refused if before else []
        )
        confirmations = {}
        for key in list_keys(runs, keys.confirmations):
            result = read_typed(runs, key, ConfirmationResult)
            if isinstance(result, ConfirmationResult):
                confirmations[key.rsplit("/", 1)[-1].removesuffix(".json")] = result.rounds
        given_up = frozenset(batch for batch, job in jobs.items() if job_state(job) != "active" and batch != "probe")
        # ---------------------------------------------------------------- ask the flow
        try:
            step = next_step(
                FlowSpec.of(spec), Observed(probe.compiler_knobs(), entries, confirmations, given_up, out_of_time)
            )
        except PlanError as exc:
            return self._failed(status, "InvalidKnobs", str(exc), emit)
        if before and before.stage == "stage1" and not (isinstance(step, RunBatches) and step.stage == "stage1"):
            failpoints.hit("stage1-done")
        # ---------------------------------------------------------------- act
        status = target_counts(status, entries, step).model_copy(
            update={
                "cache_config_maps": shard_names,
                "refused": refused[:20],
                "reused": len(reused.routes),
                "reused_from": reused.runs,
                "seeded": len(seeded.routes) if seeded else 0,
                "seed": seeded.note if seeded else None,
            }
        )
        if spec.search.dry_run and isinstance(step, RunBatches):
            return self._dry_run(run, target, step, status)
        if isinstance(step, RunBatches):
            status = self._run_batches(run, spec, target, keys, step, jobs, deadline, status)
            return self._scheduling(run, target, jobs, self._moved(status, before, emit), before, emit)
        if isinstance(step, RunConfirmation):
            status = self._confirm(run, spec, target, keys, step, jobs, deadline, status)
            return self._scheduling(run, target, jobs, self._moved(status, before, emit), before, emit)
        if out_of_time:
            self.jobs.stop_active(run, jobs)
        if isinstance(step, Failed):
            return self._failed(status, step.reason, step.message, emit)
        return self._decided(run, spec, target, meta, keys, probe, step, status, emit)

    def _run_batches(
        self,
        run: RunRef,
        spec: TuningRunSpec,
        target: Target,
        keys: RunKeys,
        step: RunBatches,
        jobs: dict,
        deadline: float | None,
        status: TargetStatus,
    ) -> TargetStatus:
        """A Job for each batch that has none, while fewer than `spec.search.parallelism` run."""
        failpoints.hit(f"planned-{step.stage}")
        active = sum(job_state(j) == "active" for b, j in jobs.items() if b != "probe")
        room = max(0, spec.search.parallelism - active)
        for batch in [b for b in step.batches if b.name not in jobs][:room]:
            request = BatchRequest(
                target=target.gpu_type,
                stage=batch.stage,
                batch=batch.name,
                bucket=self.settings.runs_bucket,
                prefix=keys.prefix,
                routes=[r.canonical for r in batch.routes],
                default_route=step.default.canonical,
                deadline=deadline,
                spec=spec,
            )
            self.jobs.ensure(run, spec, target, batch.stage, batch.name, request, len(batch.routes), jobs, deadline)
            active += 1
        return status.model_copy(update={"stage": step.stage, "active_jobs": active, "message": step.note})

    def _confirm(
        self,
        run: RunRef,
        spec: TuningRunSpec,
        target: Target,
        keys: RunKeys,
        step: RunConfirmation,
        jobs: dict,
        deadline: float | None,
        status: TargetStatus,
    ) -> TargetStatus:
        """The confirmation round's Job: the candidates' kept engines against the default's."""
        request = BatchRequest(
            target=target.gpu_type,
            mode="confirm",
            stage="confirm",
            batch=step.name,
            bucket=self.settings.runs_bucket,
            prefix=keys.prefix,
            routes=[e.route for e in step.candidates],
            default_route=step.default.route,
            deadline=deadline,
            spec=spec,
        )
        self.jobs.ensure(run, spec, target, "confirm", step.name, request, len(step.candidates), jobs, deadline)
        return status.model_copy(
            update={
                "stage": "confirming",
                "active_jobs": 1,
                "message": f"confirming {len(step.candidates)} candidate(s) against the default "
                f"over {step.rounds} interleaved rounds",
            }
        )

    def _scheduling(
        self, run: RunRef, target: Target, jobs: dict, status: TargetStatus, before: TargetStatus | None, emit: Emit
    ) -> TargetStatus:
        """A target whose pods the scheduler cannot place says so (reason Unschedulable, the scheduler's
        message) from the pass that sees it; it gives up (its Jobs stopped, so an autoscaler is not left
        to add a node for nothing) once no pod of it has a node for the operator's configured wait."""
        if not any(job_state(job) == "active" for job in jobs.values()):
            return status
        pods = self.k8s.core.list_namespaced_pod(run.namespace, label_selector=selector(run, target.gpu_type)).items
        found = waiting([self.k8s.core.api_client.sanitize_for_serialization(p) for p in pods], time.time())
        if found is None:
            return status
        wait = self.settings.unschedulable_seconds
        said = (
            f"{len(found.pods)} pod(s) cannot be scheduled ({found.pods[0]}, unschedulable for "
            f"{found.seconds:.0f}s): {found.message}"
        )
        if found.give_up(wait):
            self.jobs.stop_active(run, jobs)
            return self._failed(
                status,
                "Unschedulable",
                f"{said}; gave up after {wait:.0f}s (the operator's "
                f"scheduling.unschedulableTimeoutSeconds): check the GPU type, gpusPerJob, "
                f"nodeSelector, tolerations and resources against the cluster's node pools",
                emit,
            )
        limit = f"gives up after {wait:.0f}s without a node" if wait > 0 else "waits without a time limit"
        status = status.model_copy(
            update={
                "reason": "Unschedulable",
                "message": f"{said}; waiting for a node (a pool scaling up, or GPUs freed): {limit}",
            }
        )
        if before is None or before.reason != "Unschedulable":
            emit("Warning", "Unschedulable", f"{target.gpu_type}: {status.message}")
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
        lines = [f"{b.name} {r.id} {r.canonical or '(default)'}" for b in step.batches for r in b.routes]
        name = child_name(run.name, "plan", target.gpu_type, limit=253)
        apply_config_map(
            self.k8s.core,
            run,
            {
                "metadata": {
                    "name": name,
                    "namespace": run.namespace,
                    "labels": labels(run, target.gpu_type, component="plan"),
                    "ownerReferences": [run.owner_reference()],
                },
                "data": {"routes.txt": "\n".join(lines) + "\n"},
            },
            exists=False,
        )
        candidates = [r.canonical or "(default)" for b in step.batches for r in b.routes]
        return target_done(
            status.model_copy(update={"candidates": candidates[:64], "planned": len(candidates)}),
            f"dry run: {len(candidates)} routes in {len(step.batches)} Job(s) would be built (ConfigMap {name})",
        )

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
        decision, winner = step.decision, step.winner
        status = decided_status(status, step)
        if not spec.publish.enabled:
            return target_done(status, f"winner {winner.route or '(default)'}; {decision.reason} (publishing disabled)")
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
        result = (
            f"kept the default route ({decision.reason})"
            if decision.default_won
            else f"winner {winner.route}: {step.headline_text()}"
        )
        return target_done(
            status.model_copy(update={"engine_uri": engine_uri, "engine_sha256": winner.engine_sha256}),
            f"{result}; published {engine_uri}",
        )
