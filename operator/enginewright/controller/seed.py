"""Seeding a TuningRun from `spec.search.seedCache`: what a trtexec tuning cache, or a cache of
ours copied into the store, can stand for in this run, under the rules of reuse (`controller.reuse`).

The seed is one object (`s3://bucket/key`) or, when there is no object at that key, the objects under
`key/`. Its trtexec files (`*.jsonl`) are read as `enginewright cache import` reads them
(`trtexec.format.TrtexecCache`, with an `import.json` beside it giving the options it was imported with);
its cache entries (`entries/*.json`, as a `tune --cache` directory or a run's prefix holds them) are
read as entries. Everything is read with the run's own store key, and `controller.tenancy` refuses a
seed in another namespace's runs.

What a trtexec cache can vouch for: the tuner version (the compiler), each route, whether it crashed,
its accuracy loss under the header's metric and threshold, and its gpu_time. What it cannot: its
header names the model and the data by path (`files`, `command_line`), never by digest, and records
no GPU, compute capability, CUDA, driver, input shapes or build settings. So no route of a trtexec
cache carries the fingerprint a run needs: each is reported as not reusable, with that reason, and
measured by the run. An entry of ours is taken when its fingerprint is this run's for its route,
part for part, and it is not the default route's (measured fresh by every run) nor itself a copy;
its kept engine must be beside it with the sha256 it measured. A taken entry is copied into the
run's prefix marked `reusedFrom: seedCache <uri>: <entry>`, so the flow, the confirmation round,
the report and provenance treat it as a reused route: it wins only through the confirmation round
against this run's fresh default. `<prefix>/seeded.json` records, once, what was taken and why the
rest was not.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from pydantic import Field, ValidationError

from enginewright.api.cache import CacheEntry
from enginewright.api.contracts import ProbeResult
from enginewright.api.fingerprint import Fingerprint
from enginewright.api.models import ReuseMode, TuningRunSpec, WireModel
from enginewright.controller.errors import Problem, StoreUnavailable, store_errors
from enginewright.controller.reuse import default_route_id
from enginewright.controller.store_reads import list_keys, read_typed
from enginewright.store.layout import RunKeys
from enginewright.store.objects import MissingObject, S3Store, parse_s3_uri
from enginewright.trtexec.format import TrtexecCache
from enginewright.trtexec.imports import CACHE_FILE, META_FILE

SEED_TAG = "seedCache"
"""How a seeded entry's reusedFrom begins: `seedCache <seed uri>: <entry uri>`."""

TRTEXEC_NOT_REUSABLE = (
    "a trtexec cache records no fingerprint (its header names the model and data by path, not sha256, "
    "and records no GPU, CUDA, driver, shapes or build settings)"
)
DEFAULT_NOT_REUSABLE = "the default route is measured fresh by every run"


class Seeded(WireModel):
    """`<prefix>/seeded.json`: what the run took from its seed, written once."""

    source: str = Field(description="spec.search.seedCache.")
    objects: list[str] = Field(default_factory=list, description="The objects read from it.")
    routes: dict[str, str] = Field(default_factory=dict, description="Route id -> the entry it was copied from.")
    not_reusable: dict[str, int] = Field(default_factory=dict, description="Why -> how many routes.")
    damaged: int = Field(0, description="Lines of its trtexec files skipped as damaged (as cache import skips them).")

    @property
    def note(self) -> str:
        """One line for the status."""
        parts = [f"{self.source}: {len(self.routes)} route(s) seeded"]
        parts += [f"{n} not reusable: {why}" for why, n in sorted(self.not_reusable.items())]
        if self.damaged:
            parts.append(f"{self.damaged} damaged trtexec line(s) skipped")
        return "; ".join(parts)


def seed_objects(listed: Iterable[str]) -> tuple[list[str], list[str]]:
    """(trtexec files, entry files) among the keys under a seed prefix; the rest (engines, imports'
    metadata, reports) is not read as a cache."""
    trtexec, entries = [], []
    for key in sorted(listed):
        if key.endswith(".jsonl"):
            trtexec.append(key)
        elif key.endswith(".json") and key.rsplit("/", 2)[-2:-1] == ["entries"]:
            entries.append(key)
    return trtexec, entries


def judge(
    found: Iterable[tuple[str, CacheEntry]], fingerprint: Fingerprint, default_id: str, have: set[str]
) -> tuple[dict[str, tuple[str, CacheEntry]], dict[str, str]]:
    """(route id -> (key, entry) taken: the newest with this run's fingerprint for its route, of the
    routes this run has no entry of its own for; route id -> why none of its entries was taken)."""
    taken: dict[str, tuple[str, CacheEntry]] = {}
    why: dict[str, str] = {}
    for key, entry in found:
        route = entry.route_id
        if route in have:
            continue  # measured (or reused from an earlier run) already
        if route == default_id:
            why[route] = DEFAULT_NOT_REUSABLE
        elif entry.reused:
            why[route] = "a copy of another run's entry (seed from the run that measured it)"
        elif entry.fingerprint is None:
            why[route] = TRTEXEC_NOT_REUSABLE if entry.stage == "imported" else "no fingerprint (written before them)"
        elif entry.fingerprint.digest != fingerprint.for_route(route).digest:
            parts = fingerprint.for_route(route).differences(entry.fingerprint)
            why[route] = f"another fingerprint ({', '.join(parts)} differ)"
        else:
            best = taken.get(route)
            if best is None or (entry.finished_at or "") > (best[1].finished_at or ""):
                taken[route] = (key, entry)
    return taken, {route: reason for route, reason in why.items() if route not in taken}


def read_trtexec(raw: bytes, meta: dict | None = None) -> TrtexecCache:
    """A trtexec file as `cache import` reads it; `meta` is the `import.json` beside an import's file
    (the threshold and knob defaults it was imported with)."""
    meta = meta or {}
    return TrtexecCache(
        raw.splitlines(),
        threshold=meta.get("threshold"),
        defaults=meta.get("defaults"),
        keep_entries=False,  # no route of it is reusable (no fingerprint): its route ids suffice
    )


def copy_seeded(
    runs: S3Store,
    seed_store: Callable[[str], S3Store],
    spec: TuningRunSpec,
    keys: RunKeys,
    probe: ProbeResult,
) -> Seeded | None:
    """Copy the seed's entries that carry this run's fingerprint (and their kept engines, checked
    against their sha256) into the run's prefix, marked reusedFrom; once, recorded in
    `<prefix>/seeded.json`. `seed_store(bucket)` reads with the run's own key. Raises Problem when
    the seed is not there, not readable with that key, or not a cache."""
    uri = spec.search.seed_cache
    if uri is None or spec.search.reuse is ReuseMode.none or probe.fingerprint is None:
        return None
    record = read_typed(runs, keys.seeded, Seeded)
    if isinstance(record, Seeded) and record.source == uri:
        return record
    default_id = default_route_id(spec, probe)
    if default_id is None:
        return None  # the flow says what is wrong with the knobs
    bucket, key = parse_s3_uri(uri)
    seed = seed_store(bucket)
    with _seed_errors(uri):
        if seed.exists(key):
            trtexec, entry_keys = ([key], []) if not key.endswith(".json") else ([], [key])
        else:
            trtexec, entry_keys = seed_objects(list_keys(seed, key + "/"))
        if not trtexec and not entry_keys:
            raise Problem(
                "ObjectNotFound",
                f"spec.search.seedCache: no object {uri}, and no trtexec cache (*.jsonl) or cache entries "
                f"(entries/*.json) under {uri}/",
            )
        found: list[tuple[str, CacheEntry]] = []
        why: Counter = Counter()
        damaged = 0
        for file in trtexec:
            meta = None
            if file.endswith("/" + CACHE_FILE) and seed.exists(file.rsplit("/", 1)[0] + "/" + META_FILE):
                meta = _json(seed, file.rsplit("/", 1)[0] + "/" + META_FILE)
            try:
                cache = read_trtexec(seed.get(file), meta)
            except ValueError as exc:
                raise Problem("InvalidSeedCache", f"spec.search.seedCache: {seed.uri(file)}: {exc}") from None
            damaged += len(cache.damaged)
            why[TRTEXEC_NOT_REUSABLE] += len(cache.route_ids - {default_id})
            why[DEFAULT_NOT_REUSABLE] += int(default_id in cache.route_ids)
        for file in entry_keys:
            try:
                found.append((file, CacheEntry.from_json(seed.get(file))))
            except (ValueError, ValidationError) as exc:
                first = str(exc).splitlines()[0]
                raise Problem(
                    "InvalidSeedCache", f"spec.search.seedCache: {seed.uri(file)} is not a cache entry: {first}"
                ) from None
    have = _own_routes(runs, keys)
    taken, refused = judge(found, probe.fingerprint, default_id, have)
    why.update(refused.values())
    routes: dict[str, str] = {}
    for route_id, (key, entry) in sorted(taken.items()):
        update = {"reused_from": f"{SEED_TAG} {uri}: {seed.uri(key)}"}
        if entry.engine_uri:
            try:
                with _seed_errors(uri):
                    engine = seed.get(RunKeys(key.rsplit("/entries/", 1)[0]).engine(route_id, probe.engine_suffix))
            except Problem:
                why["its kept engine is not beside it in the seed"] += 1
                continue
            if hashlib.sha256(engine).hexdigest() != entry.engine_sha256:
                why["its kept engine is not the one it measured"] += 1
                continue
            with store_errors():
                runs.put(
                    keys.engine(route_id, probe.engine_suffix), engine, {"route-id": route_id, "route": entry.route}
                )
            update["engine_uri"] = runs.uri(keys.engine(route_id, probe.engine_suffix))
        with store_errors():
            runs.put(
                keys.entry(route_id),
                entry.model_copy(update=update).to_json().encode(),
                {"route-id": route_id, "outcome": entry.outcome.value},
            )
        routes[route_id] = update["reused_from"]
    record = Seeded(
        source=uri,
        objects=[seed.uri(k) for k in trtexec + entry_keys],
        routes=routes,
        not_reusable={k: n for k, n in why.items() if n},
        damaged=damaged,
    )
    with store_errors():
        runs.put(keys.seeded, record.model_dump_json(by_alias=True).encode())
    return record


def _own_routes(runs: S3Store, keys: RunKeys) -> set[str]:
    """Routes the run has an entry of its own for (measured, or reused from an earlier run); entries
    seeded by an interrupted earlier pass are seeded again, so the record lists them."""
    have = set()
    for key in list_keys(runs, keys.entries):
        try:
            with store_errors():
                entry = CacheEntry.from_json(runs.get(key))
        except (MissingObject, ValueError):
            have.add(key.rsplit("/", 1)[-1].removesuffix(".json"))  # unreadable: the aggregation reports it
            continue
        if not (entry.reused_from or "").startswith(SEED_TAG):
            have.add(entry.route_id)
    return have


def _json(seed: S3Store, key: str) -> dict:
    try:
        data = json.loads(seed.get(key))
    except ValueError as exc:
        raise Problem("InvalidSeedCache", f"spec.search.seedCache: {seed.uri(key)}: {exc}") from None
    if not isinstance(data, dict):
        raise Problem("InvalidSeedCache", f"spec.search.seedCache: {seed.uri(key)} is not an import.json object")
    return data


@contextmanager
def _seed_errors(uri: str) -> Iterator[None]:
    """The store's answers about the seed as Problems naming spec.search.seedCache: a refusal of the
    run's key is StoreAccessDenied, a missing object ObjectNotFound; the store away is
    StoreUnavailable, as in `errors.store_errors` (the pass is retried)."""
    try:
        yield
    except (Problem, StoreUnavailable):
        raise
    except MissingObject as missing:
        raise Problem("ObjectNotFound", f"spec.search.seedCache: {missing}") from None
    except Exception as exc:
        if type(exc).__name__ != "S3Error":
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        raise Problem(
            "StoreAccessDenied",
            f"spec.search.seedCache: the store refused the run's key reading {uri} "
            f"({getattr(exc, 'code', None)}); the seed is read with the namespace's store key: grant it "
            f"read access, or seed from a bucket it can read",
        ) from None
