"""Operator settings, read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field

from enginewright import __version__
from enginewright.api.names import DEFAULT_GPU_TYPE_LABEL
from enginewright.controller.shards import SHARD_LIMIT


@dataclass(frozen=True)
class Settings:
    s3_endpoint: str = ""  # host:port of the object store, as workers reach it
    s3_secure: bool = False
    runs_bucket: str = "enginewright"  # entries, engines, probes
    catalog_bucket: str = "enginewright"  # default for spec.publish.bucket
    store_secret: str = "enginewright-store"  # Secret in the run's namespace: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
    gpu_type_label: str = DEFAULT_GPU_TYPE_LABEL
    worker_images: dict[str, str] = field(default_factory=dict)  # compiler -> image
    worker_command: tuple[str, ...] = ("python", "-m", "enginewright.worker")
    worker_env: dict[str, str] = field(default_factory=dict)  # extra environment of worker containers
    # Requests of every worker container unless its target sets them (Helm: workerJobs.requests).
    worker_requests: dict[str, str] = field(default_factory=lambda: {"cpu": "1", "memory": "2Gi"})
    # A finished run's Jobs (and their pods, with their logs) are removed this long after they ended
    # (Helm: workerJobs.ttlSecondsAfterFinished); set once the run no longer reads them. None: kept.
    job_ttl_seconds: int | None = 3600
    namespaces: tuple[str, ...] = ()  # watched namespaces (globs allowed); empty = all
    shard_limit: int = SHARD_LIMIT  # bytes of cache entries per ConfigMap shard
    interval: float = 3.0  # seconds between reconcile passes of a running TuningRun
    # Seconds between checks of a TuningPolicy's stack (node driver labels, worker image, model digest).
    policy_interval: float = 60.0
    # A target whose pods have no node gives up after this long unschedulable (0: never). Long enough
    # for an autoscaler to bring up a GPU node from zero (minutes, driver installation included).
    unschedulable_seconds: float = 1800.0
    # A target whose pods on a node all have a container that cannot start (ErrImagePull, ImagePullBackOff,
    # CreateContainerConfigError, ...) gives up this long after the operator first saw one (its status's
    # blockedSince; 0: never). Room for a registry's brief outage; a slow pull (ContainerCreating) is not counted.
    start_seconds: float = 600.0
    metrics_port: int = 8080
    health_port: int = 8081
    operator_version: str = __version__
    # Tenancy (docs/install.md, "What a TuningRun creator can do"): what a run may name beyond the defaults.
    allowed_images: tuple[str, ...] = ()  # spec.compiler.image globs allowed besides the worker images
    publish_buckets: tuple[str, ...] = ()  # spec.publish.bucket values allowed besides catalog_bucket
    model_owners: dict[str, tuple[str, ...]] = field(default_factory=dict)  # model-name glob -> namespace globs
    # After each publish, write the catalog site (catalog/index.html, catalog/<model>/index.html) into
    # the bucket published to (Helm: store.catalogSite; docs/catalog-site.md).
    catalog_site: bool = True

    def image(self, compiler: str, override: str | None) -> str:
        return override or self.default_image(compiler)

    def default_image(self, compiler: str) -> str:
        return self.worker_images.get(compiler) or f"enginewright/worker-{compiler}:{__version__}"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        images = {
            c: env[f"ENGINEWRIGHT_WORKER_IMAGE_{c.upper()}"]
            for c in ("onnxruntime", "inductor", "tensorrt")
            if env.get(f"ENGINEWRIGHT_WORKER_IMAGE_{c.upper()}")
        }
        defaults = cls()
        return cls(
            s3_endpoint=env.get("ENGINEWRIGHT_S3_ENDPOINT", ""),
            s3_secure=env.get("ENGINEWRIGHT_S3_SECURE", "false").lower() == "true",
            runs_bucket=env.get("ENGINEWRIGHT_RUNS_BUCKET", defaults.runs_bucket),
            catalog_bucket=env.get("ENGINEWRIGHT_CATALOG_BUCKET", defaults.catalog_bucket),
            store_secret=env.get("ENGINEWRIGHT_STORE_SECRET", defaults.store_secret),
            gpu_type_label=env.get("ENGINEWRIGHT_GPU_TYPE_LABEL", defaults.gpu_type_label),
            worker_images=images,
            worker_command=tuple(shlex.split(env["ENGINEWRIGHT_WORKER_COMMAND"]))
            if env.get("ENGINEWRIGHT_WORKER_COMMAND")
            else defaults.worker_command,
            worker_env=json.loads(env["ENGINEWRIGHT_WORKER_ENV"]) if env.get("ENGINEWRIGHT_WORKER_ENV") else {},
            worker_requests={k: str(v) for k, v in json.loads(env["ENGINEWRIGHT_WORKER_REQUESTS"]).items()}
            if env.get("ENGINEWRIGHT_WORKER_REQUESTS")
            else defaults.worker_requests,
            job_ttl_seconds=_optional_int(env.get("ENGINEWRIGHT_JOB_TTL_SECONDS"), defaults.job_ttl_seconds),
            namespaces=tuple(n for n in env.get("ENGINEWRIGHT_NAMESPACES", "").split(",") if n),
            shard_limit=int(env.get("ENGINEWRIGHT_CACHE_SHARD_BYTES", defaults.shard_limit)),
            interval=float(env.get("ENGINEWRIGHT_RECONCILE_INTERVAL", defaults.interval)),
            policy_interval=float(env.get("ENGINEWRIGHT_POLICY_INTERVAL", defaults.policy_interval)),
            unschedulable_seconds=float(env.get("ENGINEWRIGHT_UNSCHEDULABLE_SECONDS", defaults.unschedulable_seconds)),
            start_seconds=float(env.get("ENGINEWRIGHT_START_TIMEOUT_SECONDS", defaults.start_seconds)),
            metrics_port=int(env.get("ENGINEWRIGHT_METRICS_PORT", defaults.metrics_port)),
            health_port=int(env.get("ENGINEWRIGHT_HEALTH_PORT", defaults.health_port)),
            allowed_images=_words(env.get("ENGINEWRIGHT_ALLOWED_IMAGES", "")),
            publish_buckets=_words(env.get("ENGINEWRIGHT_PUBLISH_BUCKETS", "")),
            model_owners={
                pattern: tuple(namespaces)
                for pattern, namespaces in json.loads(env.get("ENGINEWRIGHT_MODEL_OWNERS") or "{}").items()
            },
            catalog_site=env.get("ENGINEWRIGHT_CATALOG_SITE", "true").lower() in ("true", "1", "on"),
        )


def _words(text: str) -> tuple[str, ...]:
    """A comma- or space-separated list (Helm joins lists with commas)."""
    return tuple(w for w in text.replace(",", " ").split() if w)


def _optional_int(text: str | None, default: int | None) -> int | None:
    """Unset: the default; empty or "none": None (off); else the integer."""
    if text is None:
        return default
    return None if text.strip().lower() in ("", "none") else int(text)
