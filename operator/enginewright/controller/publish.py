"""Publishing a target's winner to the catalog: the measured engine bytes (never a rebuild), read
back and checked against the digest recorded when they were measured, then `provenance.json`,
`report.md` and `routes.json` (every route measured, for the catalog site), then the model's
`index.json` — so a reader never finds an index entry without its engine and provenance. Every step
is idempotent: a pass interrupted anywhere repeats cleanly.

Before anything is uploaded, the model's index is read and the publishing namespace checked against
its owner (`controller.tenancy`); the whole publication holds the index's lock, so the check and the
index write see the same index.

`publish_winner` is the reconciler's way in: it gathers what the publication records (provenance,
report, the index entry, the measuring node's GPU facts), publishes, turns what went wrong into a
Problem on the run, and writes the catalog site when the operator serves one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import defaultdict

from enginewright import failpoints, report
from enginewright.api.contracts import (
    AccuracyFacts,
    CompilerFacts,
    EngineFacts,
    GpuFacts,
    IndexEntry,
    ModelFacts,
    ProbeResult,
    Provenance,
    ReuseFacts,
    RouteFacts,
    RunFacts,
    SearchFacts,
    TimingFacts,
)
from enginewright.api.models import Target, TuningRunSpec
from enginewright.controller.children import RunRef
from enginewright.controller.errors import Problem, PublishError, PublishRefused, api_exception, store_errors
from enginewright.controller.settings import Settings
from enginewright.controller.status import Emit, now
from enginewright.controller.tenancy import claimed, model_refusal
from enginewright.search.flow import Decided
from enginewright.store.layout import CatalogKeys, RunKeys
from enginewright.store.objects import MissingObject, S3Store

log = logging.getLogger("enginewright.controller")
_index_locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
_site_lock = threading.Lock()  # the catalog site's index lists every model: one writer at a time


def read_index(catalog_store, keys: CatalogKeys) -> dict | None:
    try:
        return json.loads(catalog_store.get(keys.index))
    except MissingObject:
        return None


def shapes_hash(shapes: dict) -> str:
    return hashlib.sha256(json.dumps(shapes, sort_keys=True).encode()).hexdigest()[:12]


def provenance(
    *,
    run: dict,
    spec,
    target,
    step: Decided,
    probe: ProbeResult,
    node: dict,
    keys: CatalogKeys,
    engine_uri: str,
    operator_version: str,
    published_at: str,
) -> dict:
    """Everything the engine's result depends on and how it was measured (`api.contracts.Provenance`,
    as written to `provenance.json`)."""
    winner, default, decision = step.winner, step.default, step.decision
    accuracy = spec.accuracy
    versions = winner.versions or default.versions or probe.versions
    return Provenance(
        engine=EngineFacts(uri=engine_uri, sha256=winner.engine_sha256, size=winner.engine_size),
        model=ModelFacts(
            uri=spec.model.uri,
            sha256=probe.model_sha256,
            format=spec.model.format.value,
            name=keys.model,
            input_shapes=probe.input_shapes,
            declared_shapes=[s.wire() for s in spec.compiler.input_shapes],
        ),
        accuracy=AccuracyFacts(
            disabled=accuracy.disabled,
            reason=accuracy.reason,
            metric=accuracy.metric.value,
            threshold=accuracy.threshold,
            atol=accuracy.atol,
            rtol=accuracy.rtol,
            pairs=[p.wire() for p in accuracy.pairs],
            data_digests=probe.data_sha256,
            loss_per_output=winner.loss,
            outputs=list(accuracy.outputs) or None,
        ),
        route=RouteFacts(
            id=winner.route_id,
            route=winner.route,
            knobs=winner.knobs,
            base_settings=dict(spec.compiler.settings),
            pinned=dict(spec.search.pinned),
        ),
        compiler=CompilerFacts(name=spec.compiler.name.value, versions=versions.wire() if versions else None),
        gpu=GpuFacts(product=keys.gpu_product, **node),
        timing=TimingFacts(
            objective=spec.timing.objective.value,
            winner_ms=winner.median_ms,
            default_ms=default.median_ms,
            speedup=decision.speedup,
            speedup_name=step.headline()["name"],
            sweep_speedup=winner.speedup,
            speedup_interval=(
                [step.headline()["low"], step.headline()["high"]] if step.headline()["low"] is not None else None
            ),
            loads=decision.loads or None,
            times_ms=decision.times or None,
            host={
                "note": step.headline()["host"],
                "default": default.host.wire() if default.host else None,
                "hostCpuMs": {
                    "default": default.measurements.host_cpu_ms if default.measurements else None,
                    "winner": winner.measurements.host_cpu_ms if winner.measurements else None,
                },
            },
            confirmed=decision.confirmed,
            measurements={
                "winner": winner.measurements.wire() if winner.measurements else None,
                "default": default.measurements.wire() if default.measurements else None,
            },
            how_measured=(
                decision.reason + f"; each route timed against the default in paired rounds of "
                f"~{spec.timing.round_seconds}s per engine over {spec.timing.loads} loads of each "
                f"({spec.timing.min_rounds}-{spec.timing.max_rounds} rounds, stopped once placed on the "
                f"spread across loads), {spec.timing.warmup_iterations} warm-up calls; the confirmation "
                f"round: {spec.search.confirm.loads} loads of each"
            ),
            confirmation_ratios=decision.ratios or None,
            noise_margin=decision.margin,
        ),
        search=SearchFacts(
            mode=spec.search.mode.value,
            routes_planned=step.planned,
            routes_measured=len(step.entries),
            outcomes=step.summary()["routes"],
            cut_short=step.cut_short,
        ),
        run=RunFacts(**run),
        operator_version=operator_version,
        published_at=published_at,
        reuse=ReuseFacts(
            fingerprint=winner.fingerprint.wire() if winner.fingerprint else None,
            fingerprint_sha256=winner.fingerprint.digest if winner.fingerprint else None,
            reused={e.route_id: e.reused_from for e in step.entries if e.reused},
            winner_reused_from=winner.reused_from,
        ),
    ).model_dump(mode="json", by_alias=True)


def publish(
    runs_store,
    catalog_store,
    keys: CatalogKeys,
    engine_key: str,
    engine_suffix: str,
    expected_sha256: str,
    provenance_doc: dict,
    report_md: str,
    index_entry: dict,
    namespace: str,
    settings: Settings,
    routes_doc: dict | None = None,
) -> str:
    """Copy the measured engine into the catalog and record it; returns the engine's catalog URI.
    Raises PublishRefused, before writing anything, when `namespace` may not publish `keys.model`."""
    target_key = keys.engine(engine_suffix)
    failpoints.hit("publish-start")
    with _index_locks[catalog_store.uri(keys.index)]:
        index = read_index(catalog_store, keys)
        refusal = model_refusal(namespace, keys.model, catalog_store.uri(keys.index), index, settings)
        if refusal:
            raise PublishRefused(refusal)
        data = runs_store.get(engine_key)
        if hashlib.sha256(data).hexdigest() != expected_sha256:
            raise PublishError(
                f"{runs_store.uri(engine_key)} has sha256 {hashlib.sha256(data).hexdigest()}, not "
                f"the {expected_sha256} measured: refusing to publish a different engine"
            )
        catalog_store.put(target_key, data, {"route-id": provenance_doc["route"]["id"]})
        back = catalog_store.get(target_key)
        if hashlib.sha256(back).hexdigest() != expected_sha256:
            raise PublishError(
                f"{catalog_store.uri(target_key)} read back with a different sha256: the upload was "
                f"damaged; it will be retried"
            )
        failpoints.hit("engine-published")
        catalog_store.put(keys.provenance, json.dumps(provenance_doc, indent=2, sort_keys=True).encode())
        catalog_store.put(keys.report, report_md.encode())
        if routes_doc is not None:
            catalog_store.put(keys.routes, json.dumps(routes_doc, indent=1, sort_keys=True).encode())
        index = claimed(index or {"model": keys.model, "entries": []}, namespace, settings)
        entries = [e for e in index.get("entries", []) if e.get("folder") != keys.folder]
        index["entries"] = sorted([*entries, index_entry], key=lambda e: (e["gpuProduct"], e["publishedAt"]))
        catalog_store.put(keys.index, json.dumps(index, indent=2, sort_keys=True).encode())
    return catalog_store.uri(target_key)


def index_entry(
    *, keys: CatalogKeys, step: Decided, probe: ProbeResult, engine_uri: str, run: RunRef, node: dict, published_at: str
) -> dict:
    """The model's `index.json` entry for this publication (`api.contracts.IndexEntry`, as written)."""
    winner = step.winner
    return IndexEntry(
        gpu_product=keys.gpu_product,
        compiler_version=keys.compiler_version,
        folder=keys.folder,
        engine=engine_uri,
        sha256=winner.engine_sha256,
        route=winner.route,
        speedup=step.decision.speedup,
        confirmed=step.decision.confirmed,
        model_sha256=probe.model_sha256,
        run=f"{run.namespace}/{run.name}",
        run_uid=run.uid,
        published_at=published_at,
        compute_capability=node.get("computeCapability"),
    ).wire()


def gpu_facts(node_name: str, node_labels: dict[str, str]) -> dict:
    """The measuring node's GPU facts, from GPU feature discovery's labels (those it has)."""
    major, minor = node_labels.get("nvidia.com/gpu.compute.major"), node_labels.get("nvidia.com/gpu.compute.minor")
    facts = {
        "node": node_name,
        "computeCapability": f"{major}.{minor}" if major and minor else None,
        "driver": ".".join(
            filter(None, (node_labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")))
        )
        or None,
    }
    return {k: v for k, v in facts.items() if v}


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
        target=target,
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
        keys=catalog, step=step, probe=probe, engine_uri=engine_uri, run=run, node=node, published_at=published_at
    )
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
                run.namespace,
                settings,
                report.measured_routes(summary, list(step.entries)).wire(),
            )
    except PublishRefused as exc:
        raise Problem(exc.refusal.reason, exc.refusal.message) from None
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
