"""A second TuningRun with the same fingerprint in the same namespace (spec.search.reuse defaults to
sameFingerprint) builds only the default route, takes every other route from the first run's
entries (its status says how many and from which run), confirms them against its own fresh default,
and publishes provenance naming what was reused. The same run in another namespace reuses nothing:
tenants never read each other's entries, even in one bucket. reuse: none measures everything."""

import json

from enginewright.api.cache import CacheEntry
from enginewright.api.routes import route_id
from enginewright.store.layout import RunKeys, run_prefix
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, apply, manifest, wait_condition

KNOBS = [{"name": "graph_optimization_level", "values": ["basic"]}, {"name": "enable_mem_pattern", "values": ["0"]}]
DEFAULT = route_id("")


def tuning_run(name: str, namespace: str, **search) -> dict:
    doc = manifest(name, knobs=KNOBS)
    # A catalog model belongs to the namespace that first published it: one of this test's own.
    doc["spec"].setdefault("publish", {})["modelName"] = f"reuse-{name}-{namespace}"
    # Every route keeps its engine and stays a candidate: the confirmation round runs in every run.
    doc["spec"]["search"].update({"saveAllEngines": True, "noiseMargin": 0.001, **search})
    return doc


def run_entries(cluster, s3, namespace: str, name: str) -> dict[str, CacheEntry]:
    uid = get_json(cluster, "trun", name, "-n", namespace)["metadata"]["uid"]
    keys = RunKeys(run_prefix(namespace, name, uid, "cpu"))
    return {
        CacheEntry.from_json(s3.get_object(RUNS_BUCKET, o.object_name).read()).route_id: CacheEntry.from_json(
            s3.get_object(RUNS_BUCKET, o.object_name).read()
        )
        for o in s3.list_objects(RUNS_BUCKET, prefix=keys.entries, recursive=True)
    }


def provenance(s3, target: dict) -> dict:
    folder = target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/").rsplit("/", 1)[0]
    return json.loads(s3.get_object(RUNS_BUCKET, f"{folder}/provenance.json").read())


def test_an_identical_run_builds_only_the_default(
    cluster, operator, run_namespace, other_namespace, s3, example_in_store
):
    apply(cluster, run_namespace, tuning_run("first", run_namespace))
    (first,) = wait_condition(cluster, run_namespace, "first", "Ready", 300)["targets"]
    assert first["reused"] == 0 and first["planned"] == 3
    measured = run_entries(cluster, s3, run_namespace, "first")
    assert len(measured) == 3 and all(e.fingerprint is not None and not e.reused for e in measured.values())

    apply(cluster, run_namespace, tuning_run("second", run_namespace))
    status = wait_condition(cluster, run_namespace, "second", "Ready", 300)
    (second,) = status["targets"]
    uid8 = get_json(cluster, "trun", "first", "-n", run_namespace)["metadata"]["uid"][:8]
    assert second["reused"] == 2 and second["reusedFrom"] == [f"first-{uid8}"]
    entries = run_entries(cluster, s3, run_namespace, "second")
    assert not entries[DEFAULT].reused and entries[DEFAULT].started_at > measured[DEFAULT].finished_at
    for rid, entry in entries.items():
        if rid != DEFAULT:  # not built again: the first run's measurement, where it came from said
            assert entry.reused_from.startswith(f"first-{uid8}: ")
            assert entry.started_at == measured[rid].started_at and entry.engine_sha256 == measured[rid].engine_sha256
    assert second["winner"]  # decided through the confirmation round against the fresh default
    assert "confirmed" in second["decision"] or "no candidate was confirmed" in second["decision"]
    reuse = provenance(s3, second)["reuse"]
    assert set(reuse["reused"]) == set(entries) - {DEFAULT} and reuse["fingerprintSha256"]

    # The same run, another tenant (the same runs bucket): nothing to reuse.
    apply(cluster, other_namespace, tuning_run("first", other_namespace))
    (elsewhere,) = wait_condition(cluster, other_namespace, "first", "Ready", 300)["targets"]
    assert elsewhere["reused"] == 0
    assert not any(e.reused for e in run_entries(cluster, s3, other_namespace, "first").values())

    apply(cluster, run_namespace, tuning_run("off", run_namespace, reuse="none"))
    (off,) = wait_condition(cluster, run_namespace, "off", "Ready", 300)["targets"]
    assert off["reused"] == 0 and not any(e.reused for e in run_entries(cluster, s3, run_namespace, "off").values())
