"""SIGKILL the operator at five points of one mixed run, restarting it each time: after planning,
while stage-1 Jobs are being created, during aggregation, between stage 1 and stage 2, and during
publish. The run completes; every route has exactly one cache entry; no Job was created twice (the
API server's audit log); the catalog holds exactly what an undisturbed operator publishes from the
same measurements, and the index lists the winner once."""

import json

from enginewright.api.models import TuningRunSpec
from enginewright.api.routes import Knob
from enginewright.search.flow import Decided, FlowSpec, Observed, next_step
from tests.faults.conftest import cached_entries, job_creations, wait_killed
from tests.operator.conftest import RUNS_BUCKET, apply, manifest, wait_condition

KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "extended"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "session.intra_op.allow_spinning", "values": ["0"]},
    {"name": "enable_cpu_mem_arena", "values": ["0"]},
]
KILLS = [
    "planned-stage1=kill@1",
    "job-created=kill@2",
    "shard-written=kill@1",
    "stage1-done=kill@1",
    "engine-published=kill@1",
]


def test_five_kills_lose_and_double_nothing(cluster, operators, fault_namespace, s3):
    doc = manifest("killed", mode="mixed", knobs=KNOBS)
    doc["spec"]["search"].update(routesPerJob=2, parallelism=3, noiseMargin=0.0)
    apply(cluster, fault_namespace, doc)
    for point in KILLS:
        wait_killed(operators.start(point), 240)
    operators.start()
    status = wait_condition(cluster, fault_namespace, "killed", "Ready", 300)
    (target,) = status["targets"]

    # Every planned route exactly once in the cache, and once in the store.
    entries = cached_entries(cluster, fault_namespace, status)
    ids = [e.route_id for e in entries]
    assert len(ids) == len(set(ids)) == target["planned"]
    prefix = f"runs/{fault_namespace}/killed-"
    stored = [
        o.object_name
        for o in s3.list_objects(RUNS_BUCKET, prefix=prefix, recursive=True)
        if "/entries/" in o.object_name
    ]
    assert len(stored) == target["planned"]

    # No Job was created twice: each deterministic name has exactly one successful create.
    creations = job_creations(cluster, fault_namespace)
    assert creations and set(creations.values()) == {1}, creations

    # The catalog: what an undisturbed operator decides from the same observations, published once.
    probe_key = next(
        o.object_name
        for o in s3.list_objects(RUNS_BUCKET, prefix=prefix, recursive=True)
        if o.object_name.endswith("/probe.json") and "/requests/" not in o.object_name
    )
    probe = json.loads(s3.get_object(RUNS_BUCKET, probe_key).read())
    confirmations = {}
    for obj in s3.list_objects(RUNS_BUCKET, prefix=probe_key.rsplit("/", 1)[0] + "/confirm/", recursive=True):
        confirmations[obj.object_name.rsplit("/", 1)[-1][:-5]] = json.loads(
            s3.get_object(RUNS_BUCKET, obj.object_name).read()
        )["rounds"]
    knobs = [Knob(k["name"], tuple(k["values"]) if k["values"] else None, k["default"]) for k in probe["knobs"]]
    spec = TuningRunSpec.model_validate(doc["spec"])
    step = next_step(FlowSpec.of(spec), Observed(knobs, {e.route_id: e for e in entries}, confirmations))
    assert isinstance(step, Decided)
    assert target["engineSha256"] == step.winner.engine_sha256
    folder = target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/").rsplit("/", 1)[0]
    names = sorted(o.object_name.rsplit("/", 1)[-1] for o in s3.list_objects(RUNS_BUCKET, prefix=folder + "/"))
    assert names == ["engine.ort.tar", "provenance.json", "report.md", "routes.json"]
    index = json.loads(s3.get_object(RUNS_BUCKET, "catalog/killed/index.json").read())
    assert [e["sha256"] for e in index["entries"]] == [target["engineSha256"]]
    for log_text in operators.log_text().split("\n"):
        assert "Traceback" not in log_text
