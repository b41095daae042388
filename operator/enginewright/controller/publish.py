"""Publishing a target's winner: `publish_winner` is the reconciler's way in. It gathers what the
publication records (provenance, report, the index entry, the measuring node's GPU facts), has
`catalog.writer` publish it under the operator's tenancy rules (`controller.tenancy`: the publishing
namespace checked against the model's owner, under the index's lock), turns what went wrong into a
Problem on the run, and writes the catalog site when the operator serves one.
"""

from __future__ import annotations

import logging
import threading

from enginewright import report
from enginewright.api.contracts import ProbeResult
from enginewright.api.models import Target, TuningRunSpec
from enginewright.catalog.writer import (
    PublishError,
    PublishRefused,
    gpu_facts,
    index_entry,
    provenance,
    publish,
    shapes_hash,
)
from enginewright.controller.children import RunRef
from enginewright.controller.errors import Problem, api_exception, store_errors
from enginewright.controller.settings import Settings
from enginewright.controller.status import Emit, now
from enginewright.controller.tenancy import claimed, model_refusal
from enginewright.search.flow import Decided
from enginewright.store.layout import CatalogKeys, RunKeys
from enginewright.store.objects import MissingObject, S3Store

log = logging.getLogger("enginewright.controller")
_site_lock = threading.Lock()  # the catalog site's index lists every model: one writer at a time


def node_facts(core, node_name: str | None) -> dict:
    """GPU facts of the node that measured the winner (only its name when the node cannot be read)."""
    if not node_name:
        return {}
    ApiException = api_exception()
    try:
        return gpu_facts(node_name, core.read_node(node_name).metadata.labels or {})
    except ApiException:
        return {"node": node_name}


def publish_winner(
    *,
    settings: Settings,
    core,
    runs_store: S3Store,
    catalog_store: S3Store,
    run: RunRef,
    generation: int | None,
    spec: TuningRunSpec,
    target: Target,
    keys: RunKeys,
    probe: ProbeResult,
    step: Decided,
    emit: Emit,
) -> str:
    """Publish the target's decided route to `catalog_store`, and say so (`emit`: type, reason,
    message); returns the engine's catalog URI. Raises
    Problem when it cannot be (no engine, another engine's bytes, a model another namespace owns, the
    bucket gone); StoreUnavailable when the store is away (the next pass publishes again)."""
    winner = step.winner
    if not winner.engine_sha256:
        raise Problem("NoEngine", f"{target.gpu_type}: the winning route {winner.route_id} has no measured engine")
    versions = winner.versions or step.default.versions
    named = versions or probe.versions
    if named is None or probe.model_sha256 is None:
        raise Problem(
            "ProbeIncomplete",
            f"{target.gpu_type}: the probe result names no compiler version or "
            "model digest, so the catalog key cannot be formed: delete the run's probe Job to probe again",
        )
    compiler_version = named.compiler
    catalog = CatalogKeys(
        model=spec.publish.model_name or run.name,
        gpu_product=target.gpu_type,
        compiler_version=compiler_version,
        model_sha256=probe.model_sha256,
        shapes_hash=shapes_hash(probe.input_shapes),
        run_uid=run.uid,
    )
    node = node_facts(core, versions.node if versions else None)
    published_at = now()
    engine_uri = catalog_store.uri(catalog.engine(probe.engine_suffix))
    run_facts = {
        "namespace": run.namespace,
        "name": run.name,
        "uid": run.uid,
        "generation": generation,
        "target": target.gpu_type,
    }
    doc = provenance(
        run=run_facts,
        spec=spec,
        step=step,
        probe=probe,
        node=node,
        keys=catalog,
        engine_uri=engine_uri,
        operator_version=settings.operator_version,
        published_at=published_at,
    )
    summary = {
        "model": catalog.model,
        "backend": spec.compiler.name.value,
        "mode": spec.search.mode.value,
        "metric": spec.accuracy.metric.value,
        "threshold": spec.accuracy.threshold,
        **step.summary(),
    }
    entry = index_entry(
        keys=catalog,
        step=step,
        probe=probe,
        engine_uri=engine_uri,
        run=f"{run.namespace}/{run.name}",
        run_uid=run.uid,
        node=node,
        published_at=published_at,
    )

    def admit(index: dict) -> dict:  # the operator's tenancy rules, under the index's lock
        refusal = model_refusal(run.namespace, catalog.model, catalog_store.uri(catalog.index), index, settings)
        if refusal:
            raise PublishRefused(refusal.reason, refusal.message)
        return claimed(index, run.namespace, settings)

    try:
        with store_errors():
            publish(
                runs_store,
                catalog_store,
                catalog,
                keys.engine(winner.route_id, probe.engine_suffix),
                probe.engine_suffix,
                winner.engine_sha256,
                doc,
                report.markdown(summary, list(step.entries)),
                entry,
                admit,
                report.measured_routes(summary, list(step.entries)).wire(),
            )
    except PublishRefused as exc:
        raise Problem(exc.reason, exc.message) from None
    except PublishError as exc:
        raise Problem("PublishFailed", str(exc)) from None
    except MissingObject as exc:
        raise Problem("EngineMissing", f"{target.gpu_type}: {exc}") from None
    except Exception as exc:
        if type(exc).__name__ == "S3Error" and getattr(exc, "code", "") == "NoSuchBucket":
            raise Problem(
                "StoreBucketMissing",
                f"spec.publish.bucket: the catalog bucket "
                f"{catalog_store.bucket!r} does not exist in the store (it was removed after the "
                f"run's checks); create it and the run publishes",
            ) from None
        raise
    emit("Normal", "Published", f"{target.gpu_type}: {engine_uri} (sha256 {winner.engine_sha256[:12]})")
    if settings.catalog_site:
        write_catalog_site(catalog_store, catalog.model)
    return engine_uri


def write_catalog_site(catalog_store: S3Store, model: str) -> None:
    """The catalog site's index and the model's page into the bucket just published to. The store
    away: the pass is retried (publishing again is idempotent), so a finished run's site is written."""
    from enginewright.catalog.reader import Catalog
    from enginewright.catalog.site import publish_site

    with _site_lock, store_errors():
        written = publish_site(Catalog(catalog_store), model)
    log.info("catalog site: wrote %s", ", ".join(catalog_store.uri(k) for k in written))
