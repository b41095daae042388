"""A TuningPolicy with `triggers.schedule` whose target's run published the default route, against the
real control plane (an operator of the policy tests' own on `p-*`, a Node of a GPU type of its own):
once that run is a schedule old, the policy re-measures the default against the run's runners-up
(the stage-1 routes closest to it, read from its cache ConfigMap), and a runner-up that wins starts
the full re-tune (RunnerUpWins, a Normal Event), under the scheduled re-measure's own name.

As in the other schedule test, `startedAt` is moved back instead of waiting an hour, the runs stall
before any Job, and the outcomes and the cache the policy reads are written as a run leaves them
(`finish`, `cache_shard`, from the driver re-measure test)."""

from __future__ import annotations

import json

from enginewright.api.policy import Stack
from enginewright.controller.policy import run_name, scheduled_remeasure_name, scheduled_retune_name
from enginewright.controller.settings import Settings
from tests.cluster.harness import wait_for
from tests.operator import test_a_policy_retunes_when_a_nodes_driver_changes as driver_test
from tests.operator.test_a_policy_re_measures_its_winner_on_schedule import started_back
from tests.operator.test_a_policy_re_measures_its_winner_when_a_nodes_driver_changes import (
    CLOSE,
    WINNER,
    cache_shard,
    finish,
)
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import (
    policy,
    policy_doc,
    policy_event_posted,
    recorded,
    runs,
    start_policy_operator,
    template_for,
)

p_namespace, gpu_node = driver_test.p_namespace, driver_test.gpu_node  # that test's fixtures


def test_a_schedule_re_measures_a_winning_default_against_its_runners_up(cluster, p_namespace, gpu_node, tmp_path):
    _, gpu_type = gpu_node
    operator = start_policy_operator(cluster, tmp_path / "operator.log")
    doc = policy_doc(template_for(gpu_type), triggers={"schedule": "1h"})
    stack = Stack(driver_major="550", compiler_image=Settings().default_image("onnxruntime"))
    first = run_name("mlp", gpu_type, stack)
    try:
        cluster.kubectl("apply", "-n", p_namespace, "-f", "-", input=json.dumps(doc))
        recorded(cluster, p_namespace, first)
        cache_shard(cluster, p_namespace, first, gpu_type)  # WINNER 0.85x, CLOSE 0.92x, FAR 1.10x the default
        finish(cluster, p_namespace, first, gpu_type, "")  # but the default was published

        def due_said():
            target = policy(cluster, p_namespace)["status"]["targets"][0]
            return target if target.get("nextRemeasure") else None

        wait_for(due_said, 60, "the policy to say when it re-measures the default", 0.2)
        since = started_back(cluster, p_namespace)
        check = scheduled_remeasure_name("mlp", gpu_type, stack, since)
        target = recorded(cluster, p_namespace, check)
        assert target["reason"] == "Scheduled" and target["remeasure"] == "" and target["runnersUp"] == [WINNER, CLOSE]
        assert runs(cluster, p_namespace)[check]["spec"]["search"]["routes"] == [WINNER, CLOSE]

        finish(cluster, p_namespace, check, gpu_type, CLOSE)  # a runner-up beat the default
        full = scheduled_retune_name("mlp", gpu_type, stack, target["startedAt"])
        target = recorded(cluster, p_namespace, full)
        assert target["reason"] == "RunnerUpWins" and target["runs"] == [first, check, full]
        policy_event_posted(
            cluster, p_namespace, "RunnerUpWins", lambda e: CLOSE in e["message"] and full in e["message"]
        )
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", p_namespace, "--timeout=60s", check=False)
        operator.stop()
    operator.assert_clean()
