"""A TuningPolicy whose target has a published winner, against the real control plane (an operator of
this test's own on namespaces `p-*`, a Node of a GPU type of its own, the ONNX Runtime template): a
new `nvidia.com/cuda.driver.major` on the node starts a re-measure run (spec.search.routes = [the
winner]: the default and the winner only), not a full run, and the status and events say so; when
that re-measure keeps the default, the policy records a regression (WinnerRegressed: a Warning, the
condition, enginewright_policy_regressions_total) and starts the full re-tune named for the stack.
When the published run's cache holds stage-1 routes close to its winner, the next re-measure carries
those runners-up too, and one of them winning it starts the full re-tune as RunnerUpWins (an Event
naming it; neither the regression condition nor the counter).

The runs are in a namespace without the store Secret, so each stalls before any Job (what a run
measures is the other tests' subject). The two outcomes the policy reads are written into the runs'
status as a finished run's reconcile leaves it (phase Succeeded, the target's winner and engineUri):
this test is about what the policy does with them, not about producing them. So is the published
run's cache ConfigMap the runners-up are read from: written as a run's reconcile leaves it (its
labels and owner reference, entries by route id)."""

from __future__ import annotations

import json
import re

from enginewright.api.names import ANNOTATION_SHARD
from enginewright.api.policy import Stack
from enginewright.controller.children import RunRef, child_name, labels
from enginewright.controller.policy import remeasure_name, run_name
from enginewright.controller.settings import Settings
from enginewright.controller.shards import data_key
from tests.cluster.harness import wait_for
from tests.operator import test_a_policy_retunes_when_a_nodes_driver_changes as driver_test
from tests.operator.conftest import RUNS_BUCKET, Operator
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import (
    DRIVER,
    policy,
    policy_doc,
    policy_event_posted,
    recorded,
    runs,
    start_policy_operator,
    template_for,
)
from tests.unit.entries import measured

p_namespace, gpu_node = driver_test.p_namespace, driver_test.gpu_node  # that test's fixtures

WINNER = "-graph_optimization_level=basic"
CLOSE, FAR = "-intra_op_num_threads=2", "-enable_mem_pattern=0"  # stage-1 routes 0.92x and 1.10x the default


def cache_shard(cluster, namespace: str, run: str, gpu_type: str) -> None:
    """The cache ConfigMap of `run` as its reconcile writes it: the default, WINNER (0.85 of the
    default's time), CLOSE and FAR, stage 1, against a 1.0 ms default."""
    body = runs(cluster, namespace)[run]
    ref = RunRef(run, namespace, body["metadata"]["uid"])
    entries = [
        measured({}, 1.0, target=gpu_type),
        measured({"graph_optimization_level": "basic"}, 0.85, target=gpu_type, baseline_ms=1.0),
        measured({"intra_op_num_threads": "2"}, 0.92, target=gpu_type, baseline_ms=1.0),
        measured({"enable_mem_pattern": "0"}, 1.10, target=gpu_type, baseline_ms=1.0),
    ]
    shard = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": child_name(run, gpu_type, "cache", "0"),
            "namespace": namespace,
            "labels": labels(ref, gpu_type, component="cache"),
            "annotations": {ANNOTATION_SHARD: "0"},
            "ownerReferences": [{**ref.owner_reference(), "blockOwnerDeletion": False}],
        },
        "data": {data_key(e.route_id): e.to_json() for e in entries},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(shard))


def finish(cluster, namespace: str, run: str, gpu_type: str, route: str) -> None:
    """Write the status a succeeded run's reconcile leaves: its target's winner `route`, published."""
    target = {
        "gpuType": gpu_type,
        "stage": "done",
        "winner": {"routeId": "0" * 12, "route": route},
        "engineUri": f"s3://{RUNS_BUCKET}/catalog/mlp/{gpu_type}/engine.ort.tar",
    }
    status = {"phase": "Succeeded", "observedGeneration": 1, "targets": [target]}
    cluster.kubectl(
        "patch", "trun", run, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def regressions(operator: Operator) -> float:
    match = re.search(r"^enginewright_policy_regressions_total (\S+)$", operator.metrics(), re.M)
    return float(match.group(1)) if match else 0.0


def test_a_new_driver_re_measures_the_published_winner_and_a_lost_one_starts_the_full_re_tune(
    cluster,
    p_namespace,
    gpu_node,
    tmp_path,
):
    node, gpu_type = gpu_node
    operator = start_policy_operator(cluster, tmp_path / "operator.log")
    doc = policy_doc(template_for(gpu_type))
    image = Settings().default_image("onnxruntime")
    old = Stack(driver_major="550", compiler_image=image, model_digest=None)
    new = old.model_copy(update={"driver_major": "560"})
    first, check, full = (
        run_name("mlp", gpu_type, old),
        remeasure_name("mlp", gpu_type, new),
        run_name("mlp", gpu_type, new),
    )
    try:
        cluster.kubectl("apply", "-n", p_namespace, "-f", "-", input=json.dumps(doc))
        recorded(cluster, p_namespace, first)
        finish(cluster, p_namespace, first, gpu_type, WINNER)  # the first run published WINNER

        cluster.kubectl("label", "node", node, f"{DRIVER}=560", "--overwrite")
        target = recorded(cluster, p_namespace, check)
        assert target["reason"] == "DriverMajorChanged" and target["remeasure"] == WINNER
        assert "re-measuring the published winner" in target["message"] and "550 -> 560" in target["message"]
        assert sorted(runs(cluster, p_namespace)) == sorted([first, check])  # no full run
        search = runs(cluster, p_namespace)[check]["spec"]["search"]
        assert search["routes"] == [WINNER] and search["mode"] == "fast" and not search.get("knobs")
        policy_event_posted(cluster, p_namespace, "RunStarted", lambda e: check in e["message"])
        assert regressions(operator) == 0

        finish(cluster, p_namespace, check, gpu_type, "")  # the re-measure kept the default route
        target = recorded(cluster, p_namespace, full)
        assert target["reason"] == "WinnerRegressed" and target.get("remeasure") is None
        assert target["runs"] == [first, check, full]
        (warning,) = policy_event_posted(cluster, p_namespace, "WinnerRegressed")
        assert warning["type"] == "Warning" and WINNER in warning["message"] and full in warning["message"]
        conditions = {c["type"]: c for c in policy(cluster, p_namespace)["status"]["conditions"]}
        assert (
            conditions["WinnerRegressed"]["status"] == "True" and gpu_type in conditions["WinnerRegressed"]["message"]
        )
        assert not runs(cluster, p_namespace)[full]["spec"]["search"].get("routes")  # the full re-tune
        wait_for(lambda: regressions(operator) == 1, 30, "the regression counted", 0.2)

        # The full re-tune published WINNER again, CLOSE close behind it in its cache: the next driver
        # re-measures both; CLOSE winning it (a stage-1 route now beats the default and the winner)
        # starts the full re-tune as RunnerUpWins.
        finish(cluster, p_namespace, full, gpu_type, WINNER)
        cache_shard(cluster, p_namespace, full, gpu_type)
        newer = new.model_copy(update={"driver_major": "570"})
        check2, full2 = remeasure_name("mlp", gpu_type, newer), run_name("mlp", gpu_type, newer)
        cluster.kubectl("label", "node", node, f"{DRIVER}=570", "--overwrite")
        target = recorded(cluster, p_namespace, check2)
        assert target["remeasure"] == WINNER and target["runnersUp"] == [CLOSE, FAR]
        search = runs(cluster, p_namespace)[check2]["spec"]["search"]
        assert search["routes"] == [WINNER, CLOSE, FAR] and search["confirm"]["topK"] >= 3
        assert search["reuse"] == "none"
        finish(cluster, p_namespace, check2, gpu_type, CLOSE)  # the re-measure published the runner-up
        target = recorded(cluster, p_namespace, full2)
        assert target["reason"] == "RunnerUpWins" and not target.get("remeasure") and not target.get("runnersUp")
        (won,) = policy_event_posted(cluster, p_namespace, "RunnerUpWins")
        assert won["type"] == "Normal" and CLOSE in won["message"] and full2 in won["message"]
        conditions = {c["type"]: c for c in policy(cluster, p_namespace)["status"]["conditions"]}
        assert conditions["WinnerRegressed"]["status"] == "False"
        assert not runs(cluster, p_namespace)[full2]["spec"]["search"].get("routes")  # the full re-tune
        assert regressions(operator) == 1  # not a regression
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", p_namespace, "--timeout=60s", check=False)
        operator.stop()
    operator.assert_clean()
