"""kopf handlers: a timer reconciles each TuningRun until it is finished, a deletion handler stops
its Jobs. The work is in `reconcile`; this module wires it to kopf, events and settings."""

from __future__ import annotations

import logging

import kopf

from enginewright.api.names import FINALIZER, GROUP, PLURAL, VERSION
from enginewright.controller import metrics
from enginewright.controller.jobs import RunRef
from enginewright.controller.reconcile import Clients, Reconciler
from enginewright.controller.settings import Settings

SETTINGS = Settings.from_env()
log = logging.getLogger("enginewright.controller")
_reconciler: Reconciler | None = None


def reconciler() -> Reconciler:
    global _reconciler
    if _reconciler is None:
        import urllib3
        from kubernetes import client, config
        from minio import Minio
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        import os
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=3, read=30), maxsize=16,
                                   retries=urllib3.Retry(total=2, backoff_factor=0.2))
        s3 = Minio(SETTINGS.s3_endpoint, access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
                   secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"), secure=SETTINGS.s3_secure, http_client=http)
        api = client.ApiClient()
        api.user_agent = f"enginewright-operator/{SETTINGS.operator_version}"  # tells its requests apart in audit logs
        _reconciler = Reconciler(SETTINGS, Clients(client.CoreV1Api(api), client.BatchV1Api(api), s3))
    return _reconciler


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.CRITICAL  # events are posted on purpose (kopf.event), not from log lines
    settings.watching.server_timeout = 60
    settings.execution.max_workers = 8
    if not SETTINGS.s3_endpoint:
        raise kopf.PermanentError("ENGINEWRIGHT_S3_ENDPOINT is not set: the operator needs the object store")
    reconciler()


@kopf.timer(GROUP, VERSION, PLURAL, interval=SETTINGS.interval, sharp=False)
def reconcile(body, patch, **_) -> None:
    """One level-based pass: observe, ask the flow for the next step, act, write the status."""
    where = f"{body['metadata']['namespace']}/{body['metadata']['name']}"

    def emit(kind: str, reason: str, message: str) -> None:
        kopf.event(body, type=kind, reason=reason, message=message[:1000])
        log.log(logging.WARNING if kind == "Warning" else logging.INFO, f"{where} {reason}: {message}")

    try:
        status = reconciler().reconcile(dict(body), emit)
    except Exception as exc:
        if transient(exc):  # the API server or the store is restarting: the next pass retries
            raise kopf.TemporaryError(f"{where}: waiting for the API server or the store "
                                      f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})", delay=5) from None
        raise
    if status is None:
        return
    previous = dict(body.get("status") or {})
    for target in status.get("targets") or []:
        metrics.ACTIVE_JOBS.labels(namespace=body["metadata"]["namespace"], run=body["metadata"]["name"],
                                   target=target["gpuType"]).set(target.get("activeJobs", 0))
    if status != previous:
        patch["status"] = {**{k: None for k in previous if k not in status}, **status}


def transient(exc: Exception) -> bool:
    """An error that says the other side is away for now, not that the request is wrong."""
    import urllib3
    from kubernetes.client.exceptions import ApiException
    if isinstance(exc, ApiException):
        return exc.status in (0, 429) or exc.status >= 500
    if type(exc).__name__ == "S3Error":
        return getattr(exc, "code", "") in ("ServiceUnavailable", "SlowDown", "InternalError", "RequestTimeout")
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


@kopf.on.delete(GROUP, VERSION, PLURAL)
def stop(body, logger, **_) -> None:
    """A deleted run stops its Jobs; its published engines stay in the catalog."""
    meta = body["metadata"]
    stopped = reconciler().stop_all(RunRef(meta["name"], meta["namespace"], meta["uid"]))
    logger.info(f"stopped {stopped} Job(s); published engines are kept")


def run() -> None:
    """Run the operator (standalone: a single-replica Deployment is the one active instance)."""
    from prometheus_client import start_http_server
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kopf says "Timer 'reconcile' succeeded" every pass of every run; keep its warnings and errors.
    for noisy in ("kopf.objects", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    start_http_server(SETTINGS.metrics_port)
    kopf.run(standalone=True, clusterwide=not SETTINGS.namespaces, namespaces=list(SETTINGS.namespaces),
             liveness_endpoint=f"http://0.0.0.0:{SETTINGS.health_port}/healthz")
