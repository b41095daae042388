"""A TuningRun deleted and applied again under the same name (as GitOps does): a new object, a new
prefix in the store, and it builds only the default route. Its one sweep Job is the batch that
holds the default, whose worker says it builds one route; every other route comes from the deleted
run's entries (stage 2, where one is planned, is planned from them), and the confirmation round
runs against the fresh default."""

from enginewright.api.names import LABEL_STAGE
from enginewright.controller.children import child_name
from tests.conftest import get_json, wait_for
from tests.operator.conftest import apply, events, jobs, manifest, pod_log, wait_condition
from tests.operator.test_an_identical_run_reuses_its_namespaces_entries import DEFAULT, run_entries

KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "extended"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "enable_cpu_mem_arena", "values": ["0"]},
]


def tuning_run(namespace: str) -> dict:
    doc = manifest("gitops", mode="mixed", knobs=KNOBS)
    doc["spec"].setdefault("publish", {})["modelName"] = f"gitops-{namespace}"
    # Several stage-1 batches; every route a candidate, and a margin small enough for stage 2 to plan.
    doc["spec"]["search"].update({"routesPerJob": 2, "saveAllEngines": True, "noiseMargin": 0.001})
    return doc


def sweeps(cluster, namespace: str) -> list[str]:
    """The names of the namespace's Jobs that build routes (neither the probe nor a confirmation)."""
    found = jobs(cluster, namespace)
    return [j["metadata"]["name"] for j in found if j["metadata"]["labels"][LABEL_STAGE] not in ("probe", "confirm")]


def test_a_run_applied_again_after_a_delete_builds_only_the_default(
    cluster, operator, run_namespace, s3, example_in_store
):
    apply(cluster, run_namespace, tuning_run(run_namespace))
    (first,) = wait_condition(cluster, run_namespace, "gitops", "Ready", 300)["targets"]
    uid = get_json(cluster, "trun", "gitops", "-n", run_namespace)["metadata"]["uid"]
    measured = run_entries(cluster, s3, run_namespace, "gitops")
    assert first["reused"] == 0 and len(measured) == first["planned"] >= 4
    assert len(sweeps(cluster, run_namespace)) >= 2

    cluster.kubectl("delete", "trun", "gitops", "-n", run_namespace, "--wait=true", "--timeout=60s")
    wait_for(lambda: not jobs(cluster, run_namespace), 60, "the deleted run's Jobs to go", 0.5)

    apply(cluster, run_namespace, tuning_run(run_namespace))
    (again,) = wait_condition(cluster, run_namespace, "gitops", "Ready", 300)["targets"]
    new_uid = get_json(cluster, "trun", "gitops", "-n", run_namespace)["metadata"]["uid"]
    assert new_uid != uid
    assert again["planned"] == first["planned"]  # the same plan (stage 2 planned from the reused entries)
    assert again["reused"] == first["planned"] - 1 and again["reusedFrom"] == [f"gitops-{uid[:8]}"]
    entries = run_entries(cluster, s3, run_namespace, "gitops")
    assert [rid for rid, e in entries.items() if not e.reused] == [DEFAULT]
    assert entries[DEFAULT].started_at > measured[DEFAULT].finished_at
    (sweep,) = sweeps(cluster, run_namespace)
    assert "] 1 routes (default included), built " in pod_log(cluster, run_namespace, sweep)
    assert again["winner"] and again["engineUri"]
    # The deleted run's cache ConfigMap (same name), if the garbage collector had not removed it yet,
    # was adopted: never a NameTaken stall, and the shard is the new run's.
    assert "NameTaken" not in {e["reason"] for e in events(cluster, run_namespace, "gitops")}
    shard = get_json(cluster, "configmap", child_name("gitops", "cache", "cpu", "0", limit=253), "-n", run_namespace)
    assert [o["uid"] for o in shard["metadata"]["ownerReferences"]] == [new_uid]
    operator.assert_clean()
