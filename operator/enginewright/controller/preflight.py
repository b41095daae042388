"""Checks before any Job: what the API server cannot check about a run, made while its first target is
not past its probe (then its inputs were fine). Each raises Problem naming the field to fix."""

from __future__ import annotations

import base64

from enginewright.api.models import TuningRunSpec
from enginewright.api.names import SECRET_ACCESS_KEY_ID, SECRET_SECRET_ACCESS_KEY
from enginewright.controller.children import RunRef
from enginewright.controller.errors import Problem, api_exception, store_errors
from enginewright.controller.settings import Settings
from enginewright.controller.store_reads import read_json
from enginewright.controller.tenancy import model_refusal, publish_bucket
from enginewright.store.layout import index_key
from enginewright.store.objects import S3Store, parse_s3_uri, readable


def check_inputs(run: RunRef, spec: TuningRunSpec, settings: Settings, core, s3, s3_as) -> None:
    """What the API server cannot check: the store Secret, the model and reference objects (read
    with the run's own key, so a run learns nothing its workers could not), the publish bucket and
    catalog model name. Raises Problem naming the field. `s3_as(key id, secret key)` is a store client
    with the run's own key; `s3` has the operator's."""
    where = f"Secret {run.namespace}/{settings.store_secret}"
    as_run = run_client(run, settings, core, s3_as)
    objects = [("spec.model.uri", spec.model.uri)]
    for i, pair in enumerate(spec.accuracy.pairs):
        objects += [
            (f"spec.accuracy.pairs[{i}].inputs", pair.inputs),
            (f"spec.accuracy.pairs[{i}].references", pair.references),
        ]
    for field_path, uri in objects:
        bucket, key = parse_s3_uri(uri)
        with store_errors():
            answer = readable(as_run, bucket, key)
        if answer == "missing":
            raise Problem("ObjectNotFound", f"{field_path}: no object {uri} in the store")
        if answer != "yes":
            raise Problem(
                "StoreAccessDenied",
                f"{field_path}: the store refused the credentials of {where} "
                f"reading {uri} ({answer}); the worker Jobs use that key: check its access key, "
                f"secret and its permissions on that bucket",
            )
    if spec.search.seed_cache:
        check_seed(spec.search.seed_cache, as_run, where)
    if spec.publish.enabled:
        check_publish_target(run, spec, settings, s3)
    # No check for a node of each GPU type: pools that scale from zero have none until a pod asks
    # for one. The Jobs are created, and a pod the scheduler cannot place is reported (`Reconciler._scheduling`).


def run_client(run: RunRef, settings: Settings, core, s3_as):
    """A store client with the run's own key (its namespace's Secret): what its workers can read, it
    can read. Raises Problem when the Secret is missing or lacks a key."""
    ApiException = api_exception()
    where = f"Secret {run.namespace}/{settings.store_secret}"
    try:
        secret = core.read_namespaced_secret(settings.store_secret, run.namespace)
        missing = [k for k in (SECRET_ACCESS_KEY_ID, SECRET_SECRET_ACCESS_KEY) if k not in (secret.data or {})]
        if missing:
            raise Problem(
                "StoreSecretInvalid", f"{where} lacks {', '.join(missing)}: workers read the store credentials from it"
            )
    except ApiException as exc:
        if exc.status != 404:
            raise
        raise Problem(
            "StoreSecretMissing",
            f"{where} does not exist: create it with keys {SECRET_ACCESS_KEY_ID} "
            f"and {SECRET_SECRET_ACCESS_KEY} (the object store credentials the worker Jobs use)",
        ) from None
    key_id, secret_key = (
        base64.b64decode(secret.data[k]).decode(errors="replace")
        for k in (SECRET_ACCESS_KEY_ID, SECRET_SECRET_ACCESS_KEY)
    )
    return s3_as(key_id, secret_key)


def check_seed(uri: str, as_run, where: str) -> None:
    """spec.search.seedCache names an object, or a prefix with objects under it, that the run's key
    can read (what is in them is read after the probe: `controller.seed`)."""
    bucket, key = parse_s3_uri(uri)
    with store_errors():
        answer = readable(as_run, bucket, key)
        if answer == "missing":
            try:
                answer = "yes" if next(S3Store(as_run, bucket).list(key + "/"), None) else "missing"
            except Exception as exc:
                if type(exc).__name__ != "S3Error":
                    raise
                answer = getattr(exc, "code", None) or "AccessDenied"
    if answer == "missing":
        raise Problem("ObjectNotFound", f"spec.search.seedCache: no object {uri} and nothing under {uri}/ in the store")
    if answer != "yes":
        raise Problem(
            "StoreAccessDenied",
            f"spec.search.seedCache: the store refused the credentials of {where} reading {uri} ({answer}); "
            f"the seed is read with that key: check its permissions on that bucket",
        )


def check_publish_target(run: RunRef, spec: TuningRunSpec, settings: Settings, s3) -> None:
    """The publish bucket exists and the catalog model name is this namespace's to publish (checked
    again when publishing: another namespace may publish it first meanwhile)."""
    bucket = publish_bucket(spec, settings)
    model = spec.publish.model_name or run.name
    key, store = index_key(model), S3Store(s3, bucket)
    try:
        with store_errors():
            exists = s3.bucket_exists(bucket)
            index = read_json(store, key) if exists else None
    except Exception as exc:
        if type(exc).__name__ != "S3Error":
            raise
        raise Problem(
            "StoreAccessDenied",
            f"spec.publish.bucket: the store refused the operator's key on "
            f"bucket {bucket!r} ({getattr(exc, 'code', None)}): the operator's administrators must grant it",
        ) from None
    if not exists:
        raise Problem(
            "StoreBucketMissing",
            f"spec.publish.bucket: the catalog bucket {bucket!r} does not exist "
            f"in the store; create it (or leave spec.publish.bucket out for the operator's catalog "
            f"bucket {settings.catalog_bucket!r})",
        )
    refusal = model_refusal(run.namespace, model, store.uri(key), index, settings)
    if refusal:
        raise Problem(refusal.reason, refusal.message)
