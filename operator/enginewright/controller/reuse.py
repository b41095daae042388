"""Reuse across TuningRuns (`spec.search.reuse: sameFingerprint`): which entries of earlier runs of the
same namespace stand for this run's measurement of their route. Pure: the reconciler lists and copies.

An earlier entry is taken when its fingerprint (`api.fingerprint`) is this target's for its route,
part for part, and it is not the default route's (the default is measured fresh by every run). The
newest entry of a route wins. The reconciler copies it, and its kept engine, into this run's own
prefix, marked `reusedFrom`: from then on the flow, the Jobs, the confirmation round and publishing
read it as one of the run's entries, and a reused route can win only through the confirmation.
Only keys under `runs/<this namespace>/` are ever read, so a tenant never reads another's entries.
"""

from __future__ import annotations

from typing import Iterable

from enginewright.api.cache import CacheEntry
from enginewright.api.fingerprint import Fingerprint
from enginewright.api.models import WireModel
from pydantic import Field


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
        if (len(parts) == 4 and parts[1] == gpu_segment and parts[2] == "entries" and parts[3].endswith(".json")
                and not key.startswith(own_prefix + "/")):
            found.append(key)
    return found


def pick(found: Iterable[tuple[str, CacheEntry]], fingerprint: Fingerprint, default_id: str,
         have: set[str]) -> dict[str, tuple[str, CacheEntry]]:
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
