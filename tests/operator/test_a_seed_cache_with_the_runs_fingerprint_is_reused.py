"""`spec.search.seedCache` names a cache copied into a bucket the run's key reads (an earlier run's
entries and engines, as exported, beside a trtexec tuning cache). A run in a namespace with no
earlier runs takes the entries with its fingerprint as reused routes: they are not built, the default
is measured fresh and the seeded routes are confirmed against it; the status, the entries and the
provenance say they came from the seed. The trtexec cache's routes are counted as not reusable (its
format records no fingerprint), not used."""

import io
from pathlib import Path

from enginewright.controller.seed import SEED_TAG, TRTEXEC_NOT_REUSABLE
from enginewright.store.layout import RunKeys, run_prefix
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, apply, wait_condition
from tests.operator.test_an_identical_run_reuses_its_namespaces_entries import (
    DEFAULT,
    provenance,
    run_entries,
    tuning_run,
)

SEEDS = "enginewright-seeds"
TRTEXEC = Path(__file__).parents[1] / "trtexec_writer" / "fast.jsonl"


def put(s3, bucket: str, key: str, data: bytes) -> None:
    s3.put_object(bucket, key, io.BytesIO(data), len(data))


def test_a_seed_of_the_same_fingerprint_builds_only_the_default(
    cluster, operator, run_namespace, other_namespace, s3, example_in_store
):
    apply(cluster, run_namespace, tuning_run("first", run_namespace))
    wait_condition(cluster, run_namespace, "first", "Ready", 300)
    measured = run_entries(cluster, s3, run_namespace, "first")
    uid = get_json(cluster, "trun", "first", "-n", run_namespace)["metadata"]["uid"]
    source = RunKeys(run_prefix(run_namespace, "first", uid, "cpu")).prefix
    if not s3.bucket_exists(SEEDS):
        s3.make_bucket(SEEDS)
    seed = f"{other_namespace}/exported"  # the first run's entries and engines, copied as they are
    for obj in s3.list_objects(RUNS_BUCKET, prefix=source + "/", recursive=True):
        if "/entries/" in obj.object_name or "/engines/" in obj.object_name:
            data = s3.get_object(RUNS_BUCKET, obj.object_name).read()
            put(s3, SEEDS, f"{seed}/cpu/{obj.object_name.removeprefix(source + '/')}", data)
    put(s3, SEEDS, f"{seed}/trtexec/fast.jsonl", TRTEXEC.read_bytes())
    uri = f"s3://{SEEDS}/{seed}"

    apply(cluster, other_namespace, tuning_run("seeded", other_namespace, seedCache=uri))
    (target,) = wait_condition(cluster, other_namespace, "seeded", "Ready", 300)["targets"]
    assert target["seeded"] == 2 and target["reused"] == 0, target
    assert target["seed"].startswith(f"{uri}: 2 route(s) seeded") and TRTEXEC_NOT_REUSABLE in target["seed"]
    entries = run_entries(cluster, s3, other_namespace, "seeded")
    assert set(entries) == set(measured)
    assert not entries[DEFAULT].reused and entries[DEFAULT].started_at > measured[DEFAULT].finished_at
    for rid, entry in entries.items():
        if rid != DEFAULT:  # not built: the seed's measurement, marked where it came from
            assert entry.reused_from.startswith(f"{SEED_TAG} {uri}: s3://{SEEDS}/{seed}/cpu/entries/"), entry
            assert entry.started_at == measured[rid].started_at and entry.engine_sha256 == measured[rid].engine_sha256
    assert target["winner"] and (
        "confirmed" in target["decision"] or "no candidate was confirmed" in target["decision"]
    )
    reuse = provenance(s3, target)["reuse"]
    assert set(reuse["reused"]) == set(entries) - {DEFAULT}
    assert all(v.startswith(f"{SEED_TAG} {uri}") for v in reuse["reused"].values())
    operator.assert_clean()
