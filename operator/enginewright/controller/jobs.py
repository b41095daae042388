"""Which Jobs a run's step needs, as plain manifests (pure: no API calls).

Names are deterministic (`<run>-<target>-<stage>-<batch>`, shortened with a hash to 63 characters),
so a retried create answers 409 instead of making a twin; the spec hash annotation lets the
controller adopt an existing Job only when it is the one it would have created.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from enginewright.api.models import Target, TuningRunSpec
from enginewright.api.names import (ANNOTATION_SPEC_HASH, API_VERSION, GPU_RESOURCE, KIND, LABEL_BATCH,
                                    LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_RUN, LABEL_STAGE, LABEL_TARGET,
                                    MANAGED_BY, SECRET_ACCESS_KEY_ID, SECRET_SECRET_ACCESS_KEY)
from enginewright.controller.settings import Settings

WORKDIR = "/var/lib/enginewright"  # an emptyDir: the root filesystem is read-only


@dataclass(frozen=True)
class RunRef:
    """The TuningRun a child object belongs to."""

    name: str
    namespace: str
    uid: str

    def owner_reference(self) -> dict:
        return {"apiVersion": API_VERSION, "kind": KIND, "name": self.name, "uid": self.uid,
                "controller": True, "blockOwnerDeletion": True}


def slug(text: str) -> str:
    """Lower-case DNS-label characters: NVIDIA-H200 -> nvidia-h200."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "x"


def child_name(*parts: str, limit: int = 63) -> str:
    """`part-part-...` as a DNS label of at most `limit` characters; too long -> cut + 8-hex hash."""
    name = "-".join(slug(p) for p in parts)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    return text if len(text) <= 63 else child_name(text)


def spec_hash(job_spec: dict) -> str:
    return hashlib.sha256(json.dumps(job_spec, sort_keys=True).encode()).hexdigest()[:16]


def labels(run: RunRef, target: str | None = None, stage: str | None = None, batch: str | None = None,
           component: str = "worker") -> dict[str, str]:
    out = {LABEL_RUN: label_value(run.name), LABEL_COMPONENT: component, LABEL_MANAGED_BY: MANAGED_BY}
    if target is not None:
        out[LABEL_TARGET] = slug(target)
    if stage is not None:
        out[LABEL_STAGE] = stage
    if batch is not None:
        out[LABEL_BATCH] = label_value(batch)
    return out


def selector(run: RunRef, target: str | None = None, component: str = "worker") -> str:
    """Label selector of a run's children (of one target when given), from the labels they carry."""
    wanted = labels(run, target, component=component)
    wanted.pop(LABEL_MANAGED_BY)
    return ",".join(f"{k}={v}" for k, v in wanted.items())


def is_ours(metadata: dict, run: RunRef, wanted_labels: dict[str, str]) -> bool:
    """Whether a child object (plain-dict metadata) is this run's to adopt: it names the run as its
    controlling owner (by uid) and carries the labels the operator gives it. Anything else of the same
    name is someone else's and is never replaced."""
    owned = any(o.get("uid") == run.uid and o.get("controller") for o in metadata.get("ownerReferences") or [])
    have = metadata.get("labels") or {}
    return owned and all(have.get(k) == v for k, v in wanted_labels.items())


def job_name(run: RunRef, target: str, batch: str) -> str:
    """`<run>-<target>-<batch>`; batch names carry their stage (stage1-b000, probe, confirm-1a2b3c4d)."""
    return child_name(run.name, target, batch)


def active_deadline(spec: TuningRunSpec, routes: int, seconds_left: float | None) -> int:
    """A Job may take a build and a measurement per route plus the default's, then it is stopped;
    never longer than what is left of the run's deadline (plus a minute to write what it has)."""
    budget = 2 * spec.search.route_timeout_seconds * (routes + 1) + 120
    if seconds_left is not None:
        budget = min(budget, int(seconds_left) + 60)
    return max(60, budget)


def worker_requests(target: Target, settings: Settings) -> dict[str, str]:
    """The worker container's requests: the operator's defaults (so the node that times routes does not
    give the worker best-effort CPU and memory), then the target's own. A resource the target limits
    without requesting gets no default request: Kubernetes requests the limit, which a default above
    the limit would make invalid."""
    limits = target.resources.limits
    defaults = {k: v for k, v in settings.worker_requests.items() if k not in limits}
    return {**defaults, **target.resources.requests}


def job_manifest(run: RunRef, spec: TuningRunSpec, target: Target, stage: str, batch: str, request_uri: str,
                 request_sha256: str, settings: Settings, deadline_seconds: int) -> dict:
    """The Job that runs one worker request (sweep batch, confirmation or probe) on `target`'s GPUs. The
    request itself is an object in the store (`request_uri`): it grows with the spec, and an environment
    variable holds at most ~128 KiB; its sha256 is in the Job, so the Job's spec hash covers the request
    and the worker refuses another one."""
    job_labels = labels(run, target.gpu_type, stage, batch)
    resources = {"requests": worker_requests(target, settings), "limits": dict(target.resources.limits)}
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
        {"name": "AWS_SECRET_ACCESS_KEY",
         "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_SECRET_ACCESS_KEY}}},
        {"name": "TMPDIR", "value": WORKDIR},
        {"name": "HOME", "value": WORKDIR},
        *({"name": k, "value": v} for k, v in sorted(settings.worker_env.items())),
    ]
    container = {
        "name": "worker", "image": settings.image(spec.compiler.name.value, spec.compiler.image),
        "command": [*settings.worker_command, "--workdir", f"{WORKDIR}/job"], "env": env,
        "volumeMounts": [{"name": "work", "mountPath": WORKDIR}],
        # The worker writes why it failed to /dev/termination-log; a crash that could not is told by
        # its log's end. Either is the pod's terminated message, which the controller puts in the status.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    if resources:
        container["resources"] = resources
    pod_spec = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": {settings.gpu_type_label: target.gpu_type, **target.node_selector},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }
    if target.tolerations:
        pod_spec["tolerations"] = [t.wire() for t in target.tolerations]
    job_spec = {
        "backoffLimit": spec.search.backoff_limit,
        # Exit code 2 is the worker's "bad input": retrying cannot help, so the Job fails at once.
        "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
            "containerName": "worker", "operator": "In", "values": [2]}}]},
        "activeDeadlineSeconds": deadline_seconds,
        "template": {"metadata": {"labels": job_labels}, "spec": pod_spec},
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(run, target.gpu_type, batch), "namespace": run.namespace,
                     "labels": job_labels, "annotations": {ANNOTATION_SPEC_HASH: spec_hash(
                         {k: v for k, v in job_spec.items() if k != "activeDeadlineSeconds"})},
                     "ownerReferences": [run.owner_reference()]},
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
