"""A cache ConfigMap deleted under a run (by hand, or by a cleanup tool) is rebuilt from the store on
the next pass, whichever shard it was: the pass is level-based, so it writes the shards it finds
missing instead of replacing a ConfigMap that is not there. (It once took the shards' positions in
the list for their indices: with shard 0 of 2 gone, every pass replaced `...-cache-0`, got a 404 and
ended, and the run never moved again.)"""

from types import SimpleNamespace

import pytest

from enginewright.api.cache import CacheEntry, Outcome, TimingStats
from enginewright.api.models import Target
from enginewright.api.routes import Route
from enginewright.controller.cache import ConfigMapCache
from enginewright.controller.children import RunRef
from enginewright.controller.settings import Settings
from enginewright.controller.shards import data_key
from enginewright.store.layout import RunKeys

RUN = RunRef("run", "team-a", "uid-1")
TARGET = Target(gpu_type="NVIDIA-H200")
KEYS = RunKeys("runs/team-a/run-uid-1/nvidia-h200")


class Core:
    """The ConfigMaps of one namespace, as the API server answers for them."""

    def __init__(self):
        self.maps: dict[str, SimpleNamespace] = {}
        self.version = 0
        self.api_client = self

    def sanitize_for_serialization(self, config_map):
        meta = config_map.metadata
        return {
            "metadata": {
                "name": meta.name,
                "resourceVersion": meta.resource_version,
                "labels": meta.labels,
                "ownerReferences": [{"uid": o.uid, "controller": True} for o in meta.owner_references],
            },
            "data": config_map.data,
        }

    def read_namespaced_config_map(self, name, namespace):
        return self.maps[name]

    def list_namespaced_config_map(self, namespace, label_selector):
        return SimpleNamespace(items=list(self.maps.values()))

    def _store(self, body):
        self.version += 1
        meta = body["metadata"]
        self.maps[meta["name"]] = SimpleNamespace(
            data=dict(body["data"]),
            metadata=SimpleNamespace(
                name=meta["name"],
                annotations=dict(meta.get("annotations") or {}),
                labels=dict(meta["labels"]),
                resource_version=str(self.version),
                owner_references=[SimpleNamespace(uid=o["uid"]) for o in meta["ownerReferences"]],
            ),
        )

    def create_namespaced_config_map(self, namespace, body):
        from kubernetes.client.exceptions import ApiException

        if body["metadata"]["name"] in self.maps:
            raise ApiException(status=409, reason="AlreadyExists")
        self._store(body)

    def replace_namespaced_config_map(self, name, namespace, body):
        from kubernetes.client.exceptions import ApiException

        if name not in self.maps:
            raise ApiException(status=404, reason="Not Found")
        self._store(body)


class Runs:
    """The runs bucket, holding the entries the workers wrote."""

    def __init__(self, entries):
        self.objects = {KEYS.entry(e.route_id): e.to_json().encode() for e in entries}

    def list(self, prefix):
        return [k for k in sorted(self.objects) if k.startswith(prefix)]

    def get(self, key):
        return self.objects[key]


def entry(threads: str) -> CacheEntry:
    route = Route.of({"intra_op_num_threads": threads})
    return CacheEntry(
        target=TARGET.gpu_type,
        route_id=route.id,
        route=route.canonical,
        outcome=Outcome.ok,
        knobs={"intra_op_num_threads": threads},
        batch="stage1-b000",
        baseline_ms=10.0,
        timing=TimingStats(median_ms=5.0, mean_ms=5.0, p90_ms=5.0, min_ms=5.0, n=5),
    )


@pytest.mark.parametrize("deleted", [0, 1, 2])
def test_a_deleted_cache_shard_is_written_again_and_every_entry_is_still_read(deleted):
    entries = [entry(str(n)) for n in (1, 2, 3)]
    one = max(len(data_key(e.route_id)) + len(e.to_json()) for e in entries)
    cache = ConfigMapCache(Settings(shard_limit=one + 8), Core())  # one entry per shard
    runs = Runs(entries)

    def emit(*event):
        raise AssertionError(f"no entry is refused: {event}")

    found, names, refused = cache.aggregate(RUN, TARGET, KEYS, runs, emit, [])
    assert len(names) == 3 and set(cache.core.maps) == set(names) and not refused
    del cache.core.maps[names[deleted]]

    found_again, names_again, _ = cache.aggregate(RUN, TARGET, KEYS, runs, emit, [])
    assert set(found_again) == set(found) == {e.route_id for e in entries}
    assert set(names_again) <= set(cache.core.maps)  # every shard the status names exists
    held = [key for m in cache.core.maps.values() for key in m.data]
    assert sorted(held) == sorted(data_key(e.route_id) for e in entries)  # each entry in one shard, once

    written = cache.core.version
    assert cache.aggregate(RUN, TARGET, KEYS, runs, emit, [])[:2] == (found_again, names_again)
    assert cache.core.version == written  # settled: the next pass writes nothing
