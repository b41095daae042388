"""Writing the engine catalog (layout: `store.layout.CatalogKeys`), beside its reader (`catalog.reader`).

What a publication records — `provenance.json` (`provenance`), the model's `index.json` entry
(`index_entry`), the measuring GPU's facts (`gpu_facts`) — and `publish`: the measured engine bytes
(never a rebuild), read back and checked against the digest recorded when they were measured, then
`provenance.json`, `report.md` and `routes.json` (every route measured, for the catalog site), then
the model's `index.json` — so a reader never finds an index entry without its engine and provenance.
An index entry records the stack its engine was measured on (`stack_of`); publishing on another stack
keeps the GPU type's older entries and marks them `supersededBy` (`superseded`) in the same index write.
Every step is idempotent: a publication interrupted anywhere repeats cleanly.

Who may publish under a model name is the caller's to decide (`admit`, given the model's index under
the index's lock, so the check and the index write see the same index); the operator's rules are
`controller.tenancy`'s. Nothing here calls Kubernetes or knows the operator (`gpu_facts` is given the
GPU feature discovery labels its caller read off the measuring node).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from typing import Callable

from enginewright import failpoints
from enginewright.api.cache import Versions
from enginewright.api.contracts import (
    AccuracyFacts,
    CompilerFacts,
    EngineFacts,
    EntryStack,
    GpuFacts,
    IndexEntry,
    ModelFacts,
    ProbeResult,
    Provenance,
    ReuseFacts,
    RouteFacts,
    RunFacts,
    SearchFacts,
    Supersession,
    TimingFacts,
    TunedAtBuild,
)
from enginewright.api.fingerprint import driver_major
from enginewright.api.models import TuningRunSpec
from enginewright.catalog.compatibility import compiler_name, inductor_parts
from enginewright.search.flow import Decided
from enginewright.store.layout import CatalogKeys
from enginewright.store.objects import MissingObject

# One writer of a model's index at a time in this process (the operator runs as one replica): the
# admission and the index write must see the same index.
_index_locks: dict[str, threading.Lock] = defaultdict(threading.Lock)


class PublishError(RuntimeError):
    """The engine cannot be published as measured (its bytes differ from the measured digest)."""


class PublishRefused(RuntimeError):
    """The publisher may not publish under this catalog model name (`reason`: a word for the refusal)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def read_index(catalog_store, keys: CatalogKeys) -> dict | None:
    """The model's `index.json` as stored (None before its first publication)."""
    try:
        return json.loads(catalog_store.get(keys.index))
    except MissingObject:
        return None


def shapes_hash(shapes: dict) -> str:
    """The catalog key's digest of the model's input shapes (as the probe read them)."""
    return hashlib.sha256(json.dumps(shapes, sort_keys=True).encode()).hexdigest()[:12]


def how_measured(reason: str, spec: TuningRunSpec) -> str:
    """The decision's reason and the protocol behind it, in words, for the provenance."""
    t = spec.timing
    return (
        reason + f"; each route timed against the default in paired rounds of ~{t.round_seconds}s per engine "
        f"over {t.loads} loads of each ({t.min_rounds}-{t.max_rounds} rounds, stopped once placed on the "
        f"spread across loads and rounds; a route slower than the default beyond the noise margin after "
        f"{t.min_rounds_if_slower}), {t.warmup_iterations} warm-up calls; the confirmation round: "
        f"{spec.search.confirm.loads} loads of each"
    )


def provenance(
    *,
    run: dict,
    spec: TuningRunSpec,
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
    headline = step.headline()
    accuracy = spec.accuracy
    versions = winner.versions or default.versions or probe.versions
    return Provenance(
        engine=EngineFacts(
            uri=engine_uri, sha256=winner.engine_sha256, size=winner.engine_size, tuned_at_build=TunedAtBuild.of(winner)
        ),
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
            speedup_name=headline["name"],
            sweep_speedup=winner.speedup,
            speedup_interval=([headline["low"], headline["high"]] if headline["low"] is not None else None),
            loads=decision.loads or None,
            times_ms=decision.times or None,
            host={
                "note": headline["host"],
                "moments": headline["moments"],
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
            how_measured=how_measured(decision.reason, spec),
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
    admit: Callable[[dict], dict],
    routes_doc: dict | None = None,
) -> str:
    """Copy the measured engine into the catalog and record it; returns the engine's catalog URI.
    `admit` is given the model's index as it is (a new one for the model's first publication) and
    returns the index to record the entry in (with its owner, say), or raises PublishRefused — before
    anything is written — when the publisher may not publish `keys.model`."""
    target_key = keys.engine(engine_suffix)
    failpoints.hit("publish-start")
    with _index_locks[catalog_store.uri(keys.index)]:
        index = admit(read_index(catalog_store, keys) or {"model": keys.model, "entries": []})
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
        entries = [e for e in index.get("entries", []) if e.get("folder") != keys.folder]
        index["entries"] = sorted(
            [*superseded(entries, index_entry), index_entry], key=lambda e: (e["gpuProduct"], e["publishedAt"])
        )
        catalog_store.put(keys.index, json.dumps(index, indent=2, sort_keys=True).encode())
    return catalog_store.uri(target_key)


def index_entry(
    *,
    keys: CatalogKeys,
    step: Decided,
    probe: ProbeResult,
    engine_uri: str,
    run: str,
    run_uid: str,
    node: dict,
    published_at: str,
) -> dict:
    """The model's `index.json` entry for this publication (`api.contracts.IndexEntry`, as written);
    `run` is `<namespace>/<name>`, `node` the measuring node's `gpu_facts`."""
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
        run=run,
        run_uid=run_uid,
        published_at=published_at,
        compute_capability=node.get("computeCapability"),
        stack=stack_of(keys.compiler_version, step.winner.versions or step.default.versions or probe.versions, node),
    ).wire()


def stack_of(compiler_version: str, versions: Versions | None, node: dict | None = None) -> EntryStack:
    """The stack an engine was measured on, from what the measuring process reported (`versions`) and,
    for the driver when it did not say, the measuring node's GPU facts (`gpu_facts`)."""
    torch = triton = None
    if compiler_name(compiler_version) == "inductor":
        torch, triton = inductor_parts(compiler_version)
    return EntryStack(
        driver_major=driver_major((versions.driver if versions else None) or (node or {}).get("driver")),
        compiler=compiler_name(compiler_version),
        compiler_version=compiler_version,
        torch=torch,
        triton=triton,
        cuda=versions.cuda if versions else None,
    )


def entry_stack(entry: dict) -> EntryStack:
    """An index entry's stack: as recorded, or (an entry written before stacks were) what its compiler
    version says, the driver and CUDA unknown."""
    recorded = entry.get("stack")
    return EntryStack.model_validate(recorded) if recorded else stack_of(entry.get("compilerVersion", ""), None)


def same_stack(a: EntryStack, b: EntryStack) -> bool:
    """Whether two entries were measured on one stack: the same compiler version, and the same driver
    major and CUDA where both say (a part one does not record cannot tell them apart)."""
    if a.compiler_version != b.compiler_version:
        return False
    return all(x is None or y is None or x == y for x, y in ((a.driver_major, b.driver_major), (a.cuda, b.cuda)))


def superseded(entries: list[dict], new: dict) -> list[dict]:
    """`entries` with those that `new` supersedes marked so (`supersededBy`): the entries of its GPU
    product measured on another stack that are current (not yet superseded), or that are superseded
    for `new`'s own stack by an entry no newer than `new`. They stay, the engines to fetch for their
    own stacks; one of the same stack is left as it is (the newer wins for that stack, as selection
    decides). So a mark names the entry a consumer on the new stack is handed now, the newest of that
    stack (a policy's re-measure publishes for a new stack, then its full re-tune publishes again
    for it); a mark for a third stack is kept, so the marks chain old -> newer -> newest, and
    publishing again is idempotent."""
    stack = entry_stack(new)
    mark = Supersession(run=new.get("run", ""), run_uid=new.get("runUid", ""), folder=new["folder"], stack=stack).wire()
    published = {e["folder"]: e.get("publishedAt", "") for e in entries}

    def marked_again(entry: dict) -> bool:
        if entry.get("gpuProduct") != new["gpuProduct"] or same_stack(entry_stack(entry), stack):
            return False
        by = entry.get("supersededBy")
        if not by:
            return True
        by_stack = EntryStack.model_validate(by["stack"]) if by.get("stack") else None
        return (
            by_stack is not None
            and same_stack(by_stack, stack)
            and published.get(by.get("folder"), "") <= new.get("publishedAt", "")
        )

    return [{**e, "supersededBy": mark} if marked_again(e) else e for e in entries]


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
