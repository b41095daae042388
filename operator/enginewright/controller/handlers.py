"""kopf handlers: a daemon per TuningRun reconciles it until it is finished (woken by its Jobs'
events), a deletion handler stops its Jobs; a timer per TuningPolicy checks its targets' stacks.
The work is in `reconcile` and `policy_runs`; this module wires it to kopf, events and settings."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging

import kopf

from enginewright.api.names import FINALIZER, GROUP, KIND, LABEL_COMPONENT, PLURAL, POLICY_PLURAL, VERSION
from enginewright.controller import metrics
from enginewright.controller.children import RunRef
from enginewright.controller.errors import api_reason
from enginewright.controller.listed_namespaces import serve_listed_namespaces
from enginewright.controller.policy_runs import PolicyChecker
from enginewright.controller.reconcile import Clients, Reconciler
from enginewright.controller.settings import Settings
from enginewright.controller.shutdown import run_closing_generators

SETTINGS = Settings.from_env()
log = logging.getLogger("enginewright.controller")
_reconciler: Reconciler | None = None


def reconciler() -> Reconciler:
    global _reconciler
    if _reconciler is None:
        from kubernetes import client, config

        from enginewright.store.objects import s3_client, s3_client_from_env

        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        s3 = s3_client_from_env(SETTINGS.s3_endpoint, patient=False)

        def s3_as(access_key: str, secret_key: str):
            return s3_client(SETTINGS.s3_endpoint, access_key, secret_key, secure=SETTINGS.s3_secure, patient=False)

        api = client.ApiClient()
        api.user_agent = f"enginewright-operator/{SETTINGS.operator_version}"  # tells its requests apart in audit logs
        _reconciler = Reconciler(SETTINGS, Clients(client.CoreV1Api(api), client.BatchV1Api(api), s3, s3_as))
    return _reconciler


class DigestDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's last-handled configuration kept as a digest. kopf copies the spec, labels and annotations
    into an annotation of its own, and an object's annotations hold 256 KiB in all: past that, kopf's
    patch failed, and with it the patch that removes the finalizer, so `kubectl delete` hung. This
    operator has no create or update handlers (the spec is immutable; the daemon reads the object
    itself), so kopf needs only to know whether something changed: a digest says that in ~90 bytes.
    For an object being deleted nothing is stored, so the patch that removes the finalizer carries
    nothing that can be refused."""

    def build(self, *, body, extra_fields=None):
        essence = super().build(body=body, extra_fields=extra_fields)
        annotations = (essence.get("metadata") or {}).get("annotations") or {}
        for key in [k for k in annotations if k.startswith("kopf.zalando.org/")]:
            del annotations[key]  # kopf's own progress, not a change of the object
        text = json.dumps(essence, sort_keys=True, separators=(",", ":"))
        return {"sha256": hashlib.sha256(text.encode()).hexdigest()}

    def store(self, *, body, patch, essence) -> None:
        if body.get("metadata", {}).get("deletionTimestamp"):
            return
        super().store(body=body, patch=patch, essence=essence)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.diffbase_storage = DigestDiffBase()
    settings.posting.level = logging.CRITICAL  # events are posted on purpose (kopf.event), not from log lines
    settings.watching.server_timeout = 60
    settings.execution.max_workers = 8
    if not SETTINGS.s3_endpoint:
        raise kopf.PermanentError("ENGINEWRIGHT_S3_ENDPOINT is not set: the operator needs the object store")
    reconciler()


_wake: dict[str, asyncio.Event] = {}  # run uid -> set when one of its Jobs changed


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10)
async def reconcile_loop(stopped, body, meta, **_) -> None:
    """Reconcile one run until it is finished: a pass, then a pause that is short after a change
    and doubles (up to 4x the interval) while nothing changes, cut short when one of the run's Jobs
    changes. Everything a pass needs is read from the cluster and the store; the loop keeps only the
    status it last wrote (so it does not act on a stale copy of its own write)."""
    uid, where = meta["uid"], f"{meta['namespace']}/{meta['name']}"
    wake = _wake.setdefault(uid, asyncio.Event())
    written: dict | None = None
    idle = 0
    try:
        while not stopped:
            wake.clear()
            outcome = await asyncio.to_thread(reconcile_once, dict(body), written, where)
            if outcome is None:
                return  # finished: nothing more to do for this generation
            written, changed = outcome
            idle = 0 if changed else idle + 1
            try:
                await asyncio.wait_for(wake.wait(), timeout=SETTINGS.interval * min(2**idle, 4))
            except asyncio.TimeoutError:
                pass
    finally:
        _wake.pop(uid, None)


def reconcile_once(body: dict, written: dict | None, where: str) -> tuple[dict | None, bool] | None:
    """One level-based pass: observe, ask the flow for the next step, act, write the status.
    Returns (the status now, whether it changed), or None when the run is finished."""
    from kubernetes import client

    def emit(kind: str, reason: str, message: str) -> None:
        kopf.event(body, type=kind, reason=reason, message=message[:1000])
        log.log(logging.WARNING if kind == "Warning" else logging.INFO, f"{where} {reason}: {message}")

    previous = dict(written if written is not None else body.get("status") or {})
    meta = body["metadata"]
    try:
        status = reconciler().reconcile({**body, "status": previous}, emit)
        if status is None:
            if meta.get("deletionTimestamp"):
                metrics.forget_run(meta["uid"], meta["namespace"], meta["name"])
            else:  # finished (now, or before the operator started): its result stays on the metrics port
                metrics.observe_run(meta["uid"], meta["namespace"], meta["name"], previous, finished=True)
            return None
        metrics.observe_run(meta["uid"], meta["namespace"], meta["name"], status, finished=False)
        if status == previous:
            return status, False
        patch = {"status": {**{k: None for k in previous if k not in status}, **status}}
        client.CustomObjectsApi(reconciler().k8s.core.api_client).patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            body["metadata"]["namespace"],
            PLURAL,
            body["metadata"]["name"],
            patch,
            _content_type="application/merge-patch+json",
        )
        return status, True
    except Exception as exc:
        metrics.RECONCILE_ERRORS.labels(error=type(exc).__name__).inc()
        if went_away(exc):
            # The run (or a child) was deleted while this pass ran in its thread: a deleted run's daemon
            # is stopped, a live one's next pass sees what is left. Not an error of the handler.
            log.info(f"{where}: an object went away during the pass (404); the next pass sees what is left")
            return previous, False
        if not transient(exc):
            raise
        # The API server or the store is restarting: say so once, and retry on the next pass.
        log.warning(f"{where}: waiting for the API server or the store ({briefly(exc)})")
        return previous, False


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_COMPONENT: "worker"})
async def job_changed(body, **_) -> None:
    """A run's Job changed (a pod started, ended, the Job finished): reconcile that run now."""
    for owner in body.get("metadata", {}).get("ownerReferences") or []:
        if owner.get("kind") == KIND and owner.get("uid") in _wake:
            _wake[owner["uid"]].set()


# policy uid -> the Warnings of the last check whose status the API server refused (its StatusRefused
# among them), each said once: the checker says a Warning when the stored status does not hold it yet,
# which a refused status never does, so without this each check would say it again
_said_while_refused: dict[str, set[tuple[str, str]]] = {}


@kopf.timer(GROUP, VERSION, POLICY_PLURAL, interval=SETTINGS.policy_interval, id="policy_check")
def check_policy(body, **_) -> None:
    """Check a TuningPolicy's targets: start a TuningRun for each whose stack changed, write the status.

    A timer, not a watch of nodes: each check reads the nodes of the policy's GPU types by label (a
    `list`, no cluster-wide watch of every node and its heartbeats), and a check is complete by itself,
    so one missed while the operator was down is simply the next one. A driver change is seen within
    ENGINEWRIGHT_POLICY_INTERVAL seconds; a driver upgrade takes far longer than that.

    The status is written here, not through kopf's patch: when the API server refuses it (422: the
    stored spec no longer passes the CRD, e.g. it was stored under an older one), kopf's own write
    would end the timer for good, and with it every later check of the policy, corrected or not."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    meta = body["metadata"]
    where = f"{meta['namespace']}/{meta['name']}"
    said: set[tuple[str, str]] = set()  # every Warning this check has to say, said now or not

    def emit(kind: str, reason: str, message: str) -> None:
        if kind == "Warning":
            known = (reason, message) in _said_while_refused.get(meta["uid"], ())
            said.add((reason, message))
            if known:
                return
        kopf.event(body, type=kind, reason=reason, message=message[:1000])
        log.log(logging.WARNING if kind == "Warning" else logging.INFO, f"{where} {reason}: {message}")

    try:
        status = policy_checker().check(dict(body), emit)
    except Exception as exc:
        if went_away(exc) or transient(exc):
            # The API server is away, or the policy went while it was checked: the next check sees what is left.
            log.warning(f"{where}: policy check deferred ({briefly(exc)})")
            return
        raise
    if status is None:
        return
    try:
        client.CustomObjectsApi(reconciler().k8s.core.api_client).patch_namespaced_custom_object_status(
            GROUP, VERSION, meta["namespace"], POLICY_PLURAL, meta["name"], {"status": status},
            _content_type="application/merge-patch+json",
        )  # fmt: skip
        _said_while_refused.pop(meta["uid"], None)
    except ApiException as exc:
        if exc.status != 422:
            if went_away(exc) or transient(exc):
                log.warning(f"{where}: policy status not written ({exc.status}); the next check writes it")
                return
            raise
        refusal = api_reason(exc)
        message = f"the API server refused the policy's status: {refusal}; correct the spec to what the CRD accepts"
        emit("Warning", "StatusRefused", message)
        _said_while_refused[meta["uid"]] = said  # (one this check did not have is said again when it returns)


_policy_checker: PolicyChecker | None = None


def policy_checker() -> PolicyChecker:
    global _policy_checker
    if _policy_checker is None:
        from kubernetes import client

        api = reconciler().k8s.core.api_client
        _policy_checker = PolicyChecker(SETTINGS, client.CoreV1Api(api), client.CustomObjectsApi(api))
    return _policy_checker


def went_away(exc: Exception) -> bool:
    """A 404 from the API server: what the pass read or wrote was deleted under it."""
    from kubernetes.client.exceptions import ApiException

    return isinstance(exc, ApiException) and exc.status == 404


def transient(exc: Exception) -> bool:
    """An error that says the other side is away for now, not that the request is wrong."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        # A namespace being deleted refuses new objects; the run goes with it.
        terminating = exc.status == 403 and "being terminated" in str(exc.body or "")
        return exc.status in (0, 429) or exc.status >= 500 or terminating
    if type(exc).__name__ == "S3Error":
        return getattr(exc, "code", "") in ("ServiceUnavailable", "SlowDown", "InternalError", "RequestTimeout")
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


def briefly(exc: Exception) -> str:
    """An error in one line for a log: its type and first line, or, for urllib3's MaxRetryError (whose
    text is mostly the request's URL), the reason the connection failed."""
    reason = getattr(exc, "reason", None)
    text = str(reason if isinstance(reason, Exception) else exc)
    return f"{type(exc).__name__}: {(text.splitlines() or [''])[0][:200]}"


@kopf.on.delete(GROUP, VERSION, PLURAL)
def stop(body, logger, **_) -> None:
    """A deleted run stops its Jobs; its published engines stay in the catalog."""
    meta = body["metadata"]
    try:
        stopped = reconciler().jobs.stop_all(RunRef(meta["name"], meta["namespace"], meta["uid"]))
    except Exception as exc:
        if not transient(exc):
            raise
        # The API server is away (restarting): kopf keeps the finalizer and calls this again. Said in one
        # line; any other exception is kopf's to log with its traceback.
        raise kopf.TemporaryError(
            f"waiting for the API server to stop the run's Jobs ({briefly(exc)})", delay=5
        ) from exc
    metrics.forget_run(
        meta["uid"],
        meta["namespace"],
        meta["name"],
        [t.get("gpuType") for t in (body.get("status") or {}).get("targets") or []],
    )
    logger.info(f"stopped {stopped} Job(s); published engines are kept")


def run() -> None:
    """Run the operator (standalone: a single-replica Deployment is the one active instance)."""
    from prometheus_client import start_http_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kopf says "Handler 'job_changed' succeeded." on every event of every run's Jobs (and "Daemon
    # 'reconcile_loop' succeeded." as each run finishes): keep its warnings and errors.
    for noisy in ("kopf.objects", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    start_http_server(SETTINGS.metrics_port)
    if SETTINGS.namespaces:
        serve_listed_namespaces()  # a namespace kopf sees only in a listing is served too
    operator = kopf.operator(
        standalone=True,
        clusterwide=not SETTINGS.namespaces,
        namespaces=list(SETTINGS.namespaces),
        liveness_endpoint=f"http://0.0.0.0:{SETTINGS.health_port}/healthz",
    )
    try:  # as kopf.run, but kopf's watch streams are closed in order when it stops (see shutdown.py)
        asyncio.run(run_closing_generators(operator))
    except asyncio.CancelledError:
        pass
