"""GitOps deletes a TuningRun and applies it again at once; the garbage collector removes the deleted
run's children (its cache ConfigMap, of the same deterministic name) later, after `kubectl
delete`'s default background propagation. A leftover the new run can adopt, it adopts (the
second test turns the garbage collector off, so the leftover stays for certain); one that is being
deleted it waits for, Reconciling with reason DeletedRunsChildren, instead of stalling with NameTaken (which
kstatus, Flux and Argo CD read as failed), and reaches Ready once it is gone (the first test: a
finalizer holds the old ConfigMap while it is being deleted, as long as the test needs)."""

import json

from enginewright.controller.children import child_name
from tests.conftest import get_json, wait_for
from tests.operator.conftest import apply, condition, event_posted, events, manifest, run_status, wait_condition

HOLD = "tests.enginewright.io/hold"


def tuning_run(namespace: str) -> dict:
    doc = manifest("again", knobs=[{"name": "enable_mem_pattern", "values": ["0"]}])
    doc["spec"].setdefault("publish", {})["modelName"] = f"again-{namespace}"
    return doc


def test_a_run_applied_again_waits_for_the_deleted_runs_config_map(cluster, operator, run_namespace, example_in_store):
    apply(cluster, run_namespace, tuning_run(run_namespace))
    wait_condition(cluster, run_namespace, "again", "Ready", 300)
    old_uid = get_json(cluster, "trun", "again", "-n", run_namespace)["metadata"]["uid"]
    shard = child_name("again", "cache", "cpu", "0", limit=253)  # as controller/cache.py names shard 0
    patch = {"metadata": {"finalizers": [HOLD]}}
    cluster.kubectl("patch", "configmap", shard, "-n", run_namespace, "--type=merge", "-p", json.dumps(patch))
    try:
        cluster.kubectl("delete", "trun", "again", "-n", run_namespace, "--wait=true", "--timeout=60s")
        # Being deleted (as the garbage collector does), held by the finalizer: it cannot be adopted.
        cluster.kubectl("delete", "configmap", shard, "-n", run_namespace, "--wait=false")
        apply(cluster, run_namespace, tuning_run(run_namespace))

        def waiting_or_stalled():
            status = run_status(cluster, run_namespace, "again")
            stalled = condition(status, "Stalled").get("status") == "True"
            waiting = condition(status, "Reconciling").get("reason") == "DeletedRunsChildren"
            return status if stalled or waiting else None

        status = wait_for(waiting_or_stalled, 120, "the new run to wait for the deleted run's ConfigMap", 0.3)
        assert condition(status, "Stalled").get("status") != "True", json.dumps(status)[:2000]
        assert f"ConfigMap {run_namespace}/{shard}" in status["message"] and old_uid in status["message"]
        assert condition(status, "Reconciling")["status"] == "True"
    finally:
        clear = {"metadata": {"finalizers": None}}
        cluster.kubectl("patch", "configmap", shard, "-n", run_namespace, "--type=merge", "-p", json.dumps(clear))
    wait_condition(cluster, run_namespace, "again", "Ready", 300)
    new_uid = get_json(cluster, "trun", "again", "-n", run_namespace)["metadata"]["uid"]
    owners = get_json(cluster, "configmap", shard, "-n", run_namespace)["metadata"]["ownerReferences"]
    assert new_uid != old_uid and [o["uid"] for o in owners] == [new_uid]
    posted = event_posted(cluster, run_namespace, "again", lambda e: e["reason"] == "DeletedRunsChildren")
    assert "NameTaken" not in {e["reason"] for e in posted}
    operator.assert_clean()


def kube_controller_manager(cluster, controllers: str) -> None:
    """Restart the controller manager with `--controllers=<controllers>` (same port, same data)."""
    process = next(p for p in cluster.processes if p.name == "kube-controller-manager")
    process.argv[:] = [a for a in process.argv if not a.startswith("--controllers=")] + [f"--controllers={controllers}"]
    cluster.stop_process("kube-controller-manager")
    cluster.start_process("kube-controller-manager")


def test_a_run_applied_again_adopts_the_deleted_runs_config_map(cluster, operator, run_namespace, example_in_store):
    """With the garbage collector off (its controller left out of the controller manager), the deleted
    run's cache ConfigMap stays for certain: the new run takes it over without waiting."""
    apply(cluster, run_namespace, tuning_run(run_namespace))
    (first,) = wait_condition(cluster, run_namespace, "again", "Ready", 300)["targets"]
    old_uid = get_json(cluster, "trun", "again", "-n", run_namespace)["metadata"]["uid"]
    shard = child_name("again", "cache", "cpu", "0", limit=253)
    kube_controller_manager(cluster, "*,-garbage-collector-controller")
    try:
        cluster.kubectl("delete", "trun", "again", "-n", run_namespace, "--wait=true", "--timeout=60s")
        left = get_json(cluster, "configmap", shard, "-n", run_namespace)["metadata"]
        assert [o["uid"] for o in left["ownerReferences"]] == [old_uid] and not left.get("deletionTimestamp")
        apply(cluster, run_namespace, tuning_run(run_namespace))
        (again,) = wait_condition(cluster, run_namespace, "again", "Ready", 300)["targets"]
    finally:
        kube_controller_manager(cluster, "*")
    new_uid = get_json(cluster, "trun", "again", "-n", run_namespace)["metadata"]["uid"]
    owners = get_json(cluster, "configmap", shard, "-n", run_namespace)["metadata"]["ownerReferences"]
    assert new_uid != old_uid and [o["uid"] for o in owners] == [new_uid]
    assert again["reused"] == first["planned"] - 1  # every route but the default, from the store
    reasons = {e["reason"] for e in events(cluster, run_namespace, "again")}
    assert "NameTaken" not in reasons and "DeletedRunsChildren" not in reasons
    assert f"adopted ConfigMap {shard} of the deleted run (uid {old_uid})" in operator.log_text()
    operator.assert_clean()
