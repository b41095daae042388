"""The tuning cache in ConfigMaps: a target's cache entries, moved from the store (where workers
write them) into shards of at most `shardLimit` bytes, each entry placed once by route id
(`controller.shards`), so `kubectl get configmap` shows what was measured and a pass reads the
cache from the cluster.

A ConfigMap is replaced only when it is the run's (listed by label and owner, or found on 409
carrying the run's owner reference and labels); one left by a deleted run of the same name is adopted
(waited for while it is being deleted); any other of the same name is left alone and the run
stalls with NameTaken.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from enginewright import failpoints
from enginewright.api.cache import CacheEntry
from enginewright.api.models import Target
from enginewright.api.names import ANNOTATION_SHARD
from enginewright.controller import metrics
from enginewright.controller.children import (
    RunRef,
    child_name,
    is_ours,
    labels,
    left_by_a_deleted_run,
    owner_uid,
    selector,
)
from enginewright.controller.errors import Problem, Waiting, api_exception
from enginewright.controller.settings import Settings
from enginewright.controller.shards import data_key, place
from enginewright.controller.status import Emit
from enginewright.controller.store_reads import list_keys
from enginewright.store.layout import RunKeys
from enginewright.store.objects import MissingObject, S3Store

log = logging.getLogger("enginewright.controller")


class ConfigMapCache:
    """A run's cache shards; keeps each shard's parsed entries by resourceVersion (in memory only)."""

    def __init__(self, settings: Settings, core):
        self.settings, self.core = settings, core
        self._parsed_shards: dict[tuple[str, str], tuple[str, dict[str, CacheEntry]]] = {}

    def aggregate(
        self, run: RunRef, target: Target, keys: RunKeys, runs: S3Store, emit: Emit, already_refused: list[str]
    ) -> tuple[dict[str, CacheEntry], list[str], list[str]]:
        """Move entries that are new in the store into the cache shards; return every entry, the shard
        names, and the entries refused (unreadable: never counted, their routes stay unmeasured)."""
        refused: list[str] = []
        maps = self.core.list_namespaced_config_map(
            run.namespace, label_selector=selector(run, target.gpu_type, component="cache")
        ).items
        owned = [m for m in maps if any(o.uid == run.uid for o in m.metadata.owner_references or [])]
        # A shard's index is its annotation, not its place in the list: a shard deleted under the run
        # leaves a gap, which is written again (its entries are placed anew, from the store).
        by_index = {int((m.metadata.annotations or {}).get(ANNOTATION_SHARD, "0")): m for m in owned}
        maps = [by_index.get(i) for i in range(max(by_index, default=-1) + 1)]
        gaps = {i for i, m in enumerate(maps) if m is None}
        shards = [dict(m.data or {}) if m is not None else {} for m in maps]
        present = {key for shard in shards for key in shard}
        new: dict[str, str] = {}
        for key in list_keys(runs, keys.entries):
            name = key.rsplit("/", 1)[-1]
            if name in present:
                continue
            try:
                raw = runs.get(key)
            except MissingObject:
                continue
            try:
                entry = CacheEntry.from_json(raw)
                if data_key(entry.route_id) != name:
                    raise ValueError(f"its route id {entry.route_id} does not match its key")
            except (ValueError, ValidationError) as exc:
                why = f"{name}: {str(exc).splitlines()[0][:200]}"
                refused.append(why)
                if why not in already_refused:
                    emit("Warning", "EntryRefused", f"{target.gpu_type}: cache entry {key} refused: {why}")
                continue
            new[name] = entry.to_json()
            if entry.reused:
                continue  # measured by an earlier run: counted there
            metrics.ROUTES_MEASURED.labels(outcome=entry.outcome.value).inc()
            metrics.GPU_SECONDS.labels(gpu_type=target.gpu_type).inc((entry.build_seconds or 0) + entry.spent_seconds)
            if entry.build_seconds:
                metrics.BUILD_SECONDS.observe(entry.build_seconds)
            if entry.timing:
                metrics.MEASURE_SECONDS.observe(entry.spent_seconds)
        placement = place(shards, new, self.settings.shard_limit)
        names = [
            child_name(run.name, "cache", target.gpu_type, str(i), limit=253) for i in range(len(placement.shards))
        ]
        for i in sorted(placement.changed | gaps):
            body = {
                "metadata": {
                    "name": names[i],
                    "namespace": run.namespace,
                    "labels": labels(run, target.gpu_type, component="cache"),
                    "annotations": {ANNOTATION_SHARD: str(i)},
                    "ownerReferences": [run.owner_reference()],
                },
                "data": placement.shards[i],
            }
            apply_config_map(self.core, run, body, exists=i < len(maps) and maps[i] is not None)
            failpoints.hit("shard-written")
        entries = {}
        for i, shard in enumerate(placement.shards):
            version = None if i in placement.changed or i in gaps else maps[i].metadata.resource_version
            entries.update(self._parsed(run.namespace, names[i], version, shard))
        return entries, names, refused

    def _parsed(self, namespace: str, name: str, version: str | None, shard: dict[str, str]) -> dict[str, CacheEntry]:
        """A shard's entries, parsed once per resourceVersion (a cache in memory only: it is rebuilt from
        the ConfigMaps after a restart), so a pass parses only shards that changed."""
        key = (namespace, name)
        cached = self._parsed_shards.get(key)
        if version is not None and cached and cached[0] == version:
            return cached[1]
        parsed = {}
        for text in shard.values():
            entry = CacheEntry.from_json(text)
            parsed[entry.route_id] = entry
        if version is not None:
            self._parsed_shards[key] = (version, parsed)
        else:
            self._parsed_shards.pop(key, None)
        return parsed


def existing_config_map(metadata: dict, run: RunRef, wanted_labels: dict[str, str]) -> str:
    """What an existing ConfigMap of a child's name (plain-dict metadata) is to this run: "ours"
    (replaced), "deleted run's" (a deleted run of the same name left it: adopted, replaced with this
    run's owner reference), "being deleted" (a deleted run's that is going: waited for) or "not
    ours" (left alone: NameTaken)."""
    if left_by_a_deleted_run(metadata, run, wanted_labels):
        return "being deleted" if metadata.get("deletionTimestamp") else "deleted run's"
    return "ours" if is_ours(metadata, run, wanted_labels) else "not ours"


def apply_config_map(core, run: RunRef, body: dict, exists: bool) -> None:
    """Create the ConfigMap, or replace it when it is this run's (listed by label and owner, or
    found on 409 carrying the run's owner reference and labels). One that a deleted run of the same
    name left (GitOps deletes a run and applies it again before the garbage collector got to it) is
    adopted: replaced, with this run's owner reference, so the run does not wait on the garbage
    collector; while it is being deleted the run waits (`Waiting`). Any other ConfigMap of that name
    that is not the run's is left alone: the run stalls with NameTaken."""
    ApiException = api_exception()
    name = body["metadata"]["name"]
    if exists:
        core.replace_namespaced_config_map(name, run.namespace, body)
        return
    try:
        core.create_namespaced_config_map(run.namespace, body)
        return
    except ApiException as exc:
        if exc.status != 409:
            raise
    existing = core.api_client.sanitize_for_serialization(core.read_namespaced_config_map(name, run.namespace))
    meta = existing["metadata"]
    found = existing_config_map(meta, run, body["metadata"]["labels"])
    if found == "being deleted":
        raise Waiting(
            "DeletedRunsChildren",
            f"waiting for ConfigMap {run.namespace}/{name} of the deleted TuningRun {run.name} "
            f"(uid {owner_uid(meta)}) to be deleted: it is being deleted, and its name is this run's",
        )
    if found == "not ours":
        raise Problem(
            "NameTaken",
            f"ConfigMap {run.namespace}/{name} exists and is not this run's (it has no "
            f"owner reference to TuningRun {run.name} uid {run.uid} with its labels): the operator "
            f"leaves it alone; rename the TuningRun, or move that ConfigMap out of the way",
        )
    body = {**body, "metadata": {**body["metadata"], "resourceVersion": meta["resourceVersion"]}}
    core.replace_namespaced_config_map(name, run.namespace, body)
    if found == "deleted run's":
        log.info(
            "%s/%s: adopted ConfigMap %s of the deleted run (uid %s)", run.namespace, run.name, name, owner_uid(meta)
        )
