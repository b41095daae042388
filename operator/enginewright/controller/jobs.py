"""A run's worker Jobs: first what each runs and its manifest (pure: no API calls), then `WorkerJobs`,
which lists, creates, adopts, stops and expires them through the API server.

Names are deterministic (`<run>-<target>-<batch>`, shortened with a hash to 63 characters, `controller.children`),
so a retried create answers 409 instead of making a twin; the spec hash annotation lets the
controller adopt an existing Job only when it is the one it would have created.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from decimal import Decimal

from enginewright import failpoints
from enginewright.api.contracts import BatchRequest
from enginewright.api.models import Target, TuningRunSpec
from enginewright.api.names import (
    ANNOTATION_SPEC_HASH,
    GPU_RESOURCE,
    LABEL_BATCH,
    SECRET_ACCESS_KEY_ID,
    SECRET_SECRET_ACCESS_KEY,
)
from enginewright.controller import metrics
from enginewright.controller.children import RunRef, child_name, labels, left_by_a_deleted_run, owner_uid, selector
from enginewright.controller.errors import Problem, Waiting, api_exception, api_reason, store_errors
from enginewright.controller.settings import Settings
from enginewright.search.flow import RunBatches, RunConfirmation
from enginewright.search.planners import Batch
from enginewright.store.layout import RunKeys
from enginewright.store.objects import S3Store

log = logging.getLogger("enginewright.controller")

WORKDIR = "/var/lib/enginewright"  # an emptyDir: the root filesystem is read-only


def spec_hash(job_spec: dict) -> str:
    return hashlib.sha256(json.dumps(job_spec, sort_keys=True).encode()).hexdigest()[:16]


def job_name(run: RunRef, target: str, batch: str) -> str:
    """`<run>-<target>-<batch>`; batch names carry their stage (stage1-b000, probe, confirm-1a2b3c4d)."""
    return child_name(run.name, target, batch)


def probe_request(spec: TuningRunSpec, target: Target, keys: RunKeys, bucket: str) -> BatchRequest:
    """The probe's request: check the run's inputs on a node of the target's type and write the
    compiler's knobs and versions."""
    return BatchRequest(
        target=target.gpu_type, mode="probe", stage="probe", batch="probe", bucket=bucket, prefix=keys.prefix, spec=spec
    )


def sweep_request(
    spec: TuningRunSpec,
    target: Target,
    keys: RunKeys,
    bucket: str,
    batch: Batch,
    step: RunBatches,
    deadline: float | None,
) -> BatchRequest:
    """One batch's request: build and measure its routes, each against the step's default route."""
    return BatchRequest(
        target=target.gpu_type,
        stage=batch.stage,
        batch=batch.name,
        bucket=bucket,
        prefix=keys.prefix,
        routes=[r.canonical for r in batch.routes],
        default_route=step.default.canonical,
        deadline=deadline,
        spec=spec,
    )


def confirm_request(
    spec: TuningRunSpec, target: Target, keys: RunKeys, bucket: str, step: RunConfirmation, deadline: float | None
) -> BatchRequest:
    """The confirmation round's request: the candidates' kept engines against the default's, interleaved."""
    return BatchRequest(
        target=target.gpu_type,
        mode="confirm",
        stage="confirm",
        batch=step.name,
        bucket=bucket,
        prefix=keys.prefix,
        routes=[e.route for e in step.candidates],
        default_route=step.default.route,
        deadline=deadline,
        spec=spec,
    )


def batches_to_start(step: RunBatches, jobs: dict[str, dict], parallelism: int) -> tuple[list[Batch], int]:
    """The step's batches that have no Job yet, as many as fit beside the sweep Jobs still running
    (at most `parallelism` at once), and how many will then be running."""
    active = sum(job_state(j) == "active" for b, j in jobs.items() if b != "probe")
    start = [b for b in step.batches if b.name not in jobs][: max(0, parallelism - active)]
    return start, active + len(start)


def active_deadline(spec: TuningRunSpec, routes: int, seconds_left: float | None) -> int:
    """A Job may take a build and a measurement per route plus the default's, then it is stopped;
    never longer than what is left of the run's deadline (plus a minute to write what it has)."""
    budget = 2 * spec.search.route_timeout_seconds * (routes + 1) + 120
    if seconds_left is not None:
        budget = min(budget, int(seconds_left) + 60)
    return max(60, budget)


def worker_requests(target: Target, settings: Settings, builds: int = 1) -> dict[str, str]:
    """The worker container's requests: the operator's defaults (so the node that times routes does not
    give the worker best-effort CPU and memory), then the target's own. A resource the target limits
    without requesting gets no default request: Kubernetes requests the limit, which a default above
    the limit would make invalid. The defaults are one build's: a Job that builds `builds` routes at
    once (spec.search.buildParallelism) requests that many times its default cpu and memory."""
    limits = target.resources.limits
    defaults = {
        k: scaled(v, builds) if k in PER_BUILD else v for k, v in settings.worker_requests.items() if k not in limits
    }
    return {**defaults, **target.resources.requests}


PER_BUILD = ("cpu", "memory")  # the requests a build needs its own share of


def scaled(quantity: str, times: int) -> str:
    """A resource quantity `times` as large, in its own unit (2Gi x 3 = 6Gi, 500m x 3 = 1500m); once
    is the quantity unchanged, so a Job's spec (and its hash) stays what it was."""
    found = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)([A-Za-z][A-Za-z0-9+-]*)?", quantity.strip())
    if times == 1 or found is None:
        return quantity
    number = Decimal(found.group(1)) * times
    text = str(number.quantize(1)) if number == number.to_integral_value() else format(number.normalize(), "f")
    return text + (found.group(2) or "")


def job_manifest(
    run: RunRef,
    spec: TuningRunSpec,
    target: Target,
    stage: str,
    batch: str,
    request_uri: str,
    request_sha256: str,
    settings: Settings,
    deadline_seconds: int,
) -> dict:
    """The Job that runs one worker request (sweep batch, confirmation or probe) on `target`'s GPUs. The
    request itself is an object in the store (`request_uri`): it grows with the spec, and an environment
    variable holds at most ~128 KiB; its sha256 is in the Job, so the Job's spec hash covers the request
    and the worker refuses another one."""
    job_labels = labels(run, target.gpu_type, stage, batch)
    builds = 1 if stage in ("probe", "confirm") else spec.search.build_parallelism  # (those two build nothing)
    resources = {"requests": worker_requests(target, settings, builds), "limits": dict(target.resources.limits)}
    if target.gpus_per_job:
        resources["limits"][GPU_RESOURCE] = str(target.gpus_per_job)
        resources["requests"][GPU_RESOURCE] = str(target.gpus_per_job)
    resources = {k: v for k, v in resources.items() if v}
    secret = settings.store_secret
    env = [
        {"name": "ENGINEWRIGHT_BATCH_URI", "value": request_uri},
        {"name": "ENGINEWRIGHT_BATCH_SHA256", "value": request_sha256},
        {"name": "ENGINEWRIGHT_S3_ENDPOINT", "value": settings.s3_endpoint},
        {"name": "ENGINEWRIGHT_S3_SECURE", "value": "true" if settings.s3_secure else "false"},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_ACCESS_KEY_ID}}},
        {
            "name": "AWS_SECRET_ACCESS_KEY",
            "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_SECRET_ACCESS_KEY}},
        },
        {"name": "TMPDIR", "value": WORKDIR},
        {"name": "HOME", "value": WORKDIR},
        *({"name": k, "value": v} for k, v in sorted(settings.worker_env.items())),
    ]
    container = {
        "name": "worker",
        "image": settings.image(spec.compiler.name.value, spec.compiler.image),
        "command": [*settings.worker_command, "--workdir", f"{WORKDIR}/job"],
        "env": env,
        "volumeMounts": [{"name": "work", "mountPath": WORKDIR}],
        # The worker writes why it failed to /dev/termination-log; a crash that could not is told by
        # its log's end. Either is the pod's terminated message, which the controller puts in the status.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if resources:
        container["resources"] = resources
    pod_spec = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": {settings.gpu_type_label: target.gpu_type, **target.node_selector},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }
    if target.tolerations:
        pod_spec["tolerations"] = [t.wire() for t in target.tolerations]
    job_spec = {
        "backoffLimit": spec.search.backoff_limit,
        # Exit code 2 is the worker's "bad input": retrying cannot help, so the Job fails at once.
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "worker", "operator": "In", "values": [2]}}
            ]
        },
        "activeDeadlineSeconds": deadline_seconds,
        "template": {"metadata": {"labels": job_labels}, "spec": pod_spec},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(run, target.gpu_type, batch),
            "namespace": run.namespace,
            "labels": job_labels,
            "annotations": {
                ANNOTATION_SPEC_HASH: spec_hash({k: v for k, v in job_spec.items() if k != "activeDeadlineSeconds"})
            },
            "ownerReferences": [run.owner_reference()],
        },
        "spec": job_spec,
    }


def job_state(job: dict) -> str:
    """active, succeeded or failed, from a Job's conditions."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True":
            if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
                return "succeeded"
            if condition.get("type") in ("Failed", "FailureTarget"):
                return "failed"
    return "active"


class WorkerJobs:
    """The run's Jobs as the API server has them: listed by label and owner, created from
    `job_manifest` (the batch request written to the runs bucket first), adopted on 409 only when
    they are the Job this run would have created, stopped, and given a TTL once the run is finished."""

    def __init__(self, settings: Settings, batch, core, runs: S3Store):
        self.settings, self.batch, self.core, self.runs = settings, batch, core, runs

    def of_target(self, run: RunRef, target: Target) -> dict[str, dict]:
        """This target's Jobs by batch label, as plain dicts."""
        items = self.batch.list_namespaced_job(run.namespace, label_selector=selector(run, target.gpu_type)).items
        out = {}
        for job in items:
            data = self.batch.api_client.sanitize_for_serialization(job)
            owners = data["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == run.uid for o in owners):
                out[data["metadata"]["labels"].get(LABEL_BATCH)] = data
        return out

    def ensure(
        self,
        run: RunRef,
        spec: TuningRunSpec,
        target: Target,
        stage: str,
        batch: str,
        request: BatchRequest,
        routes: int,
        jobs: dict,
        deadline: float | None,
    ) -> None:
        """The Job of `batch`, unless `jobs` has it; added to `jobs`. Raises Problem when the store
        refuses the request or a Job of that name is not this run's."""
        if batch in jobs:
            return
        ApiException = api_exception()
        left = None if deadline is None else deadline - time.time()
        text = json.dumps(request.wire(), sort_keys=True).encode()
        runs, key = self.runs, RunKeys(request.prefix).request(batch)
        try:
            with store_errors():
                runs.put(key, text)  # the same bytes on every pass: rewriting it before a retried create is harmless
        except Exception as exc:
            if type(exc).__name__ != "S3Error":
                raise
            code = getattr(exc, "code", None)  # minio.error.S3Error's
            reason = "StoreBucketMissing" if code == "NoSuchBucket" else "StoreAccessDenied"
            raise Problem(
                reason,
                f"the store refused the operator's key writing the batch request {runs.uri(key)} "
                f"({code}): the operator's administrators must create the runs bucket "
                f"{self.settings.runs_bucket!r} or grant the key access to it",
            ) from None
        manifest = job_manifest(
            run,
            spec,
            target,
            stage,
            batch,
            runs.uri(key),
            hashlib.sha256(text).hexdigest(),
            self.settings,
            active_deadline(spec, routes, left),
        )
        name = manifest["metadata"]["name"]
        try:
            created = self.batch.create_namespaced_job(run.namespace, manifest)
            failpoints.hit("job-created")
            metrics.JOBS_CREATED.inc()
            jobs[batch] = self.batch.api_client.sanitize_for_serialization(created)
            log.info("created Job %s/%s", run.namespace, name)
        except ApiException as exc:
            if exc.status != 409:
                raise
            existing = self.batch.api_client.sanitize_for_serialization(
                self.batch.read_namespaced_job(name, run.namespace)
            )
            ours = any(o.get("uid") == run.uid for o in existing["metadata"].get("ownerReferences") or [])
            same = (existing["metadata"].get("annotations") or {}).get(ANNOTATION_SPEC_HASH) == manifest["metadata"][
                "annotations"
            ][ANNOTATION_SPEC_HASH]
            if left_by_a_deleted_run(existing["metadata"], run, manifest["metadata"]["labels"]):
                raise Waiting(
                    "DeletedRunsChildren",
                    f"waiting for the garbage collector to remove Job {run.namespace}/{name} of the deleted "
                    f"TuningRun {run.name} (uid {owner_uid(existing['metadata'])})",
                ) from None
            if not (ours and same):
                raise Problem(
                    "JobNameTaken",
                    f"Job {run.namespace}/{name} exists but was not created by this run "
                    f"for this batch ({'other owner' if not ours else 'different spec'}): delete it or "
                    f"rename the TuningRun",
                ) from None
            jobs[batch] = existing  # adopted: a create of ours that answered late, or a restart

    def last_words(self, namespace: str, job_name: str) -> str:
        """What the Job's last failed worker said (its terminated message: the worker's error line, e.g.
        S3's refusal with its code), or where to look when there is none."""
        ApiException = api_exception()
        try:
            pods = self.core.list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items
        except ApiException as exc:
            if exc.status != 403:
                raise
            pods = []  # (an operator installed without the pods rule: say where to look)
        said = sorted(
            (str(c.state.terminated.finished_at or ""), c.state.terminated.message)
            for pod in pods
            for c in (pod.status.container_statuses or [])
            if c.name == "worker" and c.state and c.state.terminated and c.state.terminated.message
        )
        if not said:
            return f"see its pod's log (kubectl logs -n {namespace} job/{job_name})"
        lines = [line.strip() for line in said[-1][1].splitlines() if line.strip()]
        own = [line for line in lines if line.startswith("enginewright worker:")]
        return f"its pod said: {(own or lines)[-1][:800]}"

    def stop_active(self, run: RunRef, jobs: dict) -> None:
        """The deadline cut the target, or its pods found no node: Jobs still running are stopped."""
        for job in jobs.values():
            if job_state(job) == "active":
                self.delete(run.namespace, job["metadata"]["name"])

    def delete(self, namespace: str, name: str) -> None:
        ApiException = api_exception()
        try:
            self.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise

    def expire(self, run: RunRef) -> None:
        """A finished run no longer reads its Jobs (an ended Job is how a pass knows a batch gave up, so
        they live while the run does): give each `ttlSecondsAfterFinished`, and Kubernetes removes it
        and its pods that long after it ended. Idempotent: a Job that has it already is left alone."""
        ttl = self.settings.job_ttl_seconds
        if ttl is None:
            return
        ApiException = api_exception()
        for job in self.batch.list_namespaced_job(run.namespace, label_selector=selector(run)).items:
            if job.spec.ttl_seconds_after_finished is not None or not any(
                o.uid == run.uid for o in job.metadata.owner_references or []
            ):
                continue
            try:
                self.batch.patch_namespaced_job(
                    job.metadata.name, run.namespace, {"spec": {"ttlSecondsAfterFinished": ttl}}
                )
            except ApiException as exc:
                if exc.status not in (403, 404, 422):
                    raise
                # The Job stays until the run is deleted (it is the run's child): say why, do not retry.
                log.warning(
                    "%s/%s: could not set ttlSecondsAfterFinished on Job %s: %s",
                    run.namespace,
                    run.name,
                    job.metadata.name,
                    api_reason(exc),
                )

    def stop_all(self, run: RunRef) -> int:
        """Deletion: stop every Job of the run (published engines stay in the catalog)."""
        items = self.batch.list_namespaced_job(run.namespace, label_selector=selector(run)).items
        for job in items:
            self.delete(run.namespace, job.metadata.name)
        return len(items)
