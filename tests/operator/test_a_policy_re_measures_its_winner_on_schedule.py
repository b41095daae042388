"""A TuningPolicy with `triggers.schedule` against the real control plane (an operator of this test's
own on namespaces `p-*`, a Node of a GPU type of its own, the ONNX Runtime template): with the stack
unchanged, a target whose current run published a winner is re-measured once that run is a schedule
old, counted from its `startedAt` in the policy's status: not before (a restarted operator included),
and each scheduled re-measure of the same stack gets a name of its own; a confirmed winner is kept,
a lost one starts a full re-tune under a name of its own too (not the stack's first run).

The schedule is at least an hour, so the test moves `startedAt` back instead of waiting: the
policy's status is where the time lives, so that is what an operator reads after an hour too. The
runs stall before any Job (no store Secret), and the outcomes the policy reads are written into their
status as a finished run's reconcile leaves it (`finish`, from the re-measure test)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from enginewright.api.policy import Stack
from enginewright.controller.policy import run_name, scheduled_remeasure_name, scheduled_retune_name
from enginewright.controller.settings import Settings
from tests.cluster.harness import wait_for
from tests.operator import test_a_policy_retunes_when_a_nodes_driver_changes as driver_test
from tests.operator.conftest import Operator
from tests.operator.test_a_policy_re_measures_its_winner_when_a_nodes_driver_changes import WINNER, finish
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import (
    checked_again,
    policy,
    policy_doc,
    policy_event_posted,
    recorded,
    runs,
    start_policy_operator,
    template_for,
)

p_namespace, gpu_node = driver_test.p_namespace, driver_test.gpu_node  # that test's fixtures


def an_hour_ago() -> str:
    return (datetime.now(timezone.utc) - timedelta(hours=1, minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def started_back(cluster, namespace: str) -> str:
    """Move the target's startedAt back past the 1h schedule (the status as an hour later); the time."""
    target = policy(cluster, namespace)["status"]["targets"][0]
    since = an_hour_ago()
    cluster.kubectl(
        "patch", "tpol", "mlp", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"targets": [{**target, "startedAt": since}]}}),
    )  # fmt: skip
    return since


def test_a_schedule_re_measures_the_published_winner_when_due_and_not_before(cluster, p_namespace, gpu_node, tmp_path):
    node, gpu_type = gpu_node
    operators: list[Operator] = []

    def start() -> Operator:
        operators.append(start_policy_operator(cluster, tmp_path / f"operator-{len(operators)}.log"))
        return operators[-1]

    doc = policy_doc(template_for(gpu_type), triggers={"schedule": "1h"})
    stack = Stack(driver_major="550", compiler_image=Settings().default_image("onnxruntime"), model_digest=None)
    first = run_name("mlp", gpu_type, stack)
    try:
        operator = start()
        cluster.kubectl("apply", "-n", p_namespace, "-f", "-", input=json.dumps(doc))
        target = recorded(cluster, p_namespace, first)
        assert not target.get("nextRemeasure")  # nothing published yet: nothing to re-measure
        finish(cluster, p_namespace, first, gpu_type, WINNER)

        # Published: the status says when the schedule is due, and nothing starts before it,
        # a restarted operator included.
        def due_said():
            target = policy(cluster, p_namespace)["status"]["targets"][0]
            return target if target.get("nextRemeasure") else None

        target = wait_for(due_said, 60, "the policy to say when it re-measures", 0.2)
        in_an_hour = datetime.strptime(target["startedAt"], "%Y-%m-%dT%H:%M:%SZ") + timedelta(hours=1)
        assert target["nextRemeasure"] == in_an_hour.strftime("%Y-%m-%dT%H:%M:%SZ")
        operator.stop()
        operator = start()
        checked_again(operator)
        assert list(runs(cluster, p_namespace)) == [first]

        # An hour later: a re-measure of the winner on the same stack, named for the time it counts from.
        since = started_back(cluster, p_namespace)
        check = scheduled_remeasure_name("mlp", gpu_type, stack, since)
        target = recorded(cluster, p_namespace, check)
        assert (
            target["reason"] == "Scheduled"
            and target["remeasure"] == WINNER
            and target["stack"]
            == {
                "driverMajor": "550",
                "compilerImage": stack.compiler_image,
            }
        )
        assert not target.get("nextRemeasure")  # while it goes
        search = runs(cluster, p_namespace)[check]["spec"]["search"]
        assert search["routes"] == [WINNER] and search["reuse"] == "none"
        policy_event_posted(
            cluster, p_namespace, "RunStarted", lambda e: check in e["message"] and "Scheduled" in e["message"]
        )

        # Confirmed: kept, nothing more starts, and the schedule counts from the re-measure.
        finish(cluster, p_namespace, check, gpu_type, WINNER)
        target = wait_for(due_said, 60, "the re-measure to be recorded as confirmed", 0.2)
        assert target["reason"] == "WinnerConfirmed" and target["run"] == check
        checked_again(operator)
        assert sorted(runs(cluster, p_namespace)) == sorted([first, check])

        # An hour after that: a second scheduled re-measure of the same stack, under another name;
        # it keeps the default, so the full re-tune starts, named for it (not `first`, the stack's run).
        since = started_back(cluster, p_namespace)
        again = scheduled_remeasure_name("mlp", gpu_type, stack, since)
        assert again != check
        target = recorded(cluster, p_namespace, again)
        finish(cluster, p_namespace, again, gpu_type, "")
        full = scheduled_retune_name("mlp", gpu_type, stack, target["startedAt"])
        target = recorded(cluster, p_namespace, full)
        assert target["reason"] == "WinnerRegressed" and full != first
        assert target["runs"] == [first, check, again, full]
        assert not runs(cluster, p_namespace)[full]["spec"]["search"].get("routes")  # the full re-tune
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", p_namespace, "--timeout=60s", check=False)
        for running in operators:
            running.stop()
    for running in operators:
        running.assert_clean()
