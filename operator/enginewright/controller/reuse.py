"""Reuse across TuningRuns (`spec.search.reuse: sameFingerprint`): which entries of earlier runs of the
same namespace stand for this run's measurement of their route: `entry_keys` and `pick` choose them
(pure), `copy_reused` lists and copies them in the store.

An earlier entry is taken when its fingerprint (`api.fingerprint`) is this target's for its route,
part for part, and it is not the default route's (the default is measured fresh by every run). The
newest entry of a route wins. `copy_reused` copies it, and its kept engine, into this run's own
prefix, marked `reusedFrom`: from then on the flow, the Jobs, the confirmation round and publishing
read it as one of the run's entries, and a reused route can win only through the confirmation.
Only keys under `runs/<this namespace>/` are ever read, so a tenant never reads another's entries.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from pydantic import Field, ValidationError

from enginewright.api.cache import CacheEntry
from enginewright.api.contracts import ProbeResult
from enginewright.api.fingerprint import Fingerprint
from enginewright.api.models import ReuseMode, TuningRunSpec, WireModel
from enginewright.controller.errors import store_errors
from enginewright.controller.store_reads import list_keys, read_typed
from enginewright.search.flow import FlowSpec
from enginewright.search.planners import PlanError, baseline, build_space
from enginewright.store.keys import object_key
from enginewright.store.layout import RunKeys
from enginewright.store.objects import MissingObject, S3Store


class Reused(WireModel):
    """`<prefix>/reused.json`: what the run took from earlier runs, written once they are copied."""

    routes: dict[str, str] = Field(default_factory=dict, description="Route id -> the entry it was copied from.")
    runs: list[str] = Field(default_factory=list, description="The earlier runs (<run>-<uid8>) they came from.")


def source_run(key: str, namespace_prefix: str) -> str:
    """`runs/<ns>/<run>-<uid8>/<gpu>/entries/<id>.json` -> `<run>-<uid8>`."""
    return key.removeprefix(namespace_prefix).split("/", 1)[0]


def entry_keys(keys: Iterable[str], namespace_prefix: str, gpu_segment: str, own_prefix: str) -> list[str]:
    """The entry keys of other runs of the namespace for the same GPU type."""
    found = []
    for key in keys:
        if not key.startswith(namespace_prefix):
            continue  # another namespace's: never read
        parts = key.removeprefix(namespace_prefix).split("/")
        if (
            len(parts) == 4
            and parts[1] == gpu_segment
            and parts[2] == "entries"
            and parts[3].endswith(".json")
            and not key.startswith(own_prefix + "/")
        ):
            found.append(key)
    return found


def pick(
    found: Iterable[tuple[str, CacheEntry]], fingerprint: Fingerprint, default_id: str, have: set[str]
) -> dict[str, tuple[str, CacheEntry]]:
    """Route id -> (key, entry) of the newest matching entry of each route this run has no entry for."""
    chosen: dict[str, tuple[str, CacheEntry]] = {}
    for key, entry in found:
        if entry.route_id == default_id or entry.route_id in have or entry.reused or entry.fingerprint is None:
            continue
        if entry.fingerprint.digest != fingerprint.for_route(entry.route_id).digest:
            continue
        best = chosen.get(entry.route_id)
        if best is None or (entry.finished_at or "") > (best[1].finished_at or ""):
            chosen[entry.route_id] = (key, entry)
    return chosen


def default_route_id(spec: TuningRunSpec, probe: ProbeResult) -> str | None:
    """The id of this run's default route (never reused: measured fresh); None when the knobs do not
    plan (the flow reports why)."""
    pinned = dict(spec.search.pinned)
    try:
        space = build_space(probe.compiler_knobs(), FlowSpec.of(spec).knobs, pinned, spec.search.measure_uncompiled)
        return baseline(pinned, space).id
    except PlanError:
        return None


def copy_reused(runs: S3Store, namespace: str, spec: TuningRunSpec, keys: RunKeys, probe: ProbeResult) -> Reused:
    """Copy the entries of earlier runs of this namespace that carry this target's fingerprint (and
    their kept engines, checked against their sha256) into this run's prefix, marked reusedFrom;
    once, recorded in `<prefix>/reused.json`. Only `runs/<namespace>/` is
    read: a tenant never reads another's entries."""
    if spec.search.reuse is ReuseMode.none or probe.fingerprint is None:
        return Reused()
    record = read_typed(runs, keys.reused, Reused)
    if isinstance(record, Reused):
        return record
    default_id = default_route_id(spec, probe)
    if default_id is None:
        return Reused()  # the flow says what is wrong with the knobs
    namespace_prefix = object_key("runs", namespace) + "/"
    have = {key.rsplit("/", 1)[-1].removesuffix(".json") for key in list_keys(runs, keys.entries)}
    found = []
    for key in entry_keys(
        list_keys(runs, namespace_prefix), namespace_prefix, keys.prefix.rsplit("/", 1)[-1], keys.prefix
    ):
        try:
            with store_errors():
                found.append((key, CacheEntry.from_json(runs.get(key))))
        except (MissingObject, ValueError, ValidationError):
            continue  # unreadable entries of other runs are theirs to report
    routes: dict[str, str] = {}
    for route_id, (key, entry) in sorted(pick(found, probe.fingerprint, default_id, have).items()):
        source = RunKeys(key.rsplit("/entries/", 1)[0])
        update = {"reused_from": f"{source_run(key, namespace_prefix)}: {runs.uri(key)}"}
        with store_errors():
            if entry.engine_uri:
                try:
                    engine = runs.get(source.engine(route_id, probe.engine_suffix))
                except MissingObject:
                    continue
                if hashlib.sha256(engine).hexdigest() != entry.engine_sha256:
                    continue  # not the engine it measured: measured again
                runs.put(
                    keys.engine(route_id, probe.engine_suffix), engine, {"route-id": route_id, "route": entry.route}
                )
                update["engine_uri"] = runs.uri(keys.engine(route_id, probe.engine_suffix))
            runs.put(
                keys.entry(route_id),
                entry.model_copy(update=update).to_json().encode(),
                {"route-id": route_id, "outcome": entry.outcome.value},
            )
        routes[route_id] = update["reused_from"]
    record = Reused(routes=routes, runs=sorted({v.split(":", 1)[0] for v in routes.values()}))
    with store_errors():
        runs.put(keys.reused, record.model_dump_json(by_alias=True).encode())
    return record
