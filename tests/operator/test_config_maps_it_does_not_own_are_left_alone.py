"""The operator writes a ConfigMap only when it is the run's: created by it, or found carrying the
run's owner reference and labels. A user's ConfigMap that happens to have the name a run would use
(`<run>-plan-<target>`, `<run>-cache-<target>-<n>`) is never replaced (nor, through an owner reference
it would have gained, garbage-collected with the run): the run stalls with NameTaken."""

import json
import time

from tests.conftest import get_json
from tests.operator.conftest import apply, condition, event_posted, manifest, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


def test_a_users_config_map_with_the_plan_name_is_not_replaced(cluster, operator, run_namespace):
    mine = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "victim-plan-cpu"},
        "data": {"settings.yaml": "team: data\n"},
    }
    cluster.kubectl("apply", "-n", run_namespace, "-f", "-", input=json.dumps(mine))
    doc = manifest("victim", knobs=KNOB)
    doc["spec"]["search"]["dryRun"] = True
    apply(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "victim", "Stalled", 180)
    stall = condition(status, "Stalled")
    assert stall["reason"] == "NameTaken" and f"ConfigMap {run_namespace}/victim-plan-cpu" in stall["message"], stall
    event_posted(cluster, run_namespace, "victim", lambda e: e["type"] == "Warning" and e["reason"] == "NameTaken")
    kept = get_json(cluster, "configmap", "victim-plan-cpu", "-n", run_namespace)
    assert kept["data"] == {"settings.yaml": "team: data\n"} and not kept["metadata"].get("ownerReferences")

    cluster.kubectl("delete", "trun", "victim", "-n", run_namespace, "--wait=true", "--timeout=60s")
    deadline = time.monotonic() + 30  # give the garbage collector time to act on anything it owned
    while time.monotonic() < deadline:
        assert get_json(cluster, "configmap", "victim-plan-cpu", "-n", run_namespace)["data"] == mine["data"]
        if not [j for j in get_json(cluster, "jobs", "-n", run_namespace)["items"]]:
            break
        time.sleep(0.5)
    assert get_json(cluster, "configmap", "victim-plan-cpu", "-n", run_namespace)["data"] == mine["data"]
    operator.assert_clean()


def test_a_users_config_map_with_a_cache_shard_name_is_not_replaced(cluster, operator, run_namespace):
    mine = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shard-cache-cpu-0"}, "data": {"keep": "me"}}
    cluster.kubectl("apply", "-n", run_namespace, "-f", "-", input=json.dumps(mine))
    apply(cluster, run_namespace, manifest("shard", knobs=KNOB))
    status = wait_condition(cluster, run_namespace, "shard", "Stalled", 240)
    stall = condition(status, "Stalled")
    assert stall["reason"] == "NameTaken" and "shard-cache-cpu-0" in stall["message"], stall
    kept = get_json(cluster, "configmap", "shard-cache-cpu-0", "-n", run_namespace)
    assert kept["data"] == {"keep": "me"} and not kept["metadata"].get("ownerReferences")
    operator.assert_clean()
