"""A TuningPolicy against the real control plane, with an operator of this test's own (namespaces
`p-*`) and a Node of a GPU type of its own: the policy starts its first TuningRun (owned by it, in
its namespace, named for the stack); an unchanged driver label starts nothing however often it is
checked; a new `nvidia.com/cuda.driver.major` on the node starts a run named for the new stack and
records it; a check that repeats after a lost status write, or after a restart, starts nothing
more; a run of the name the policy needs that is not the policy's is never adopted.

The runs are in a namespace without the store Secret, so each stalls before any Job: what they
would measure is the other tests' subject; this one's is which runs exist."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from enginewright.api.policy import Stack
from enginewright.controller.policy import run_name
from enginewright.controller.settings import Settings
from tests.cluster.harness import wait_for
from tests.cluster.operator_process import start_operator
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, TEST_INTERVAL, Operator, manifest, posted

DRIVER = "nvidia.com/cuda.driver.major"


@pytest.fixture
def p_namespace(cluster, crd_installed):
    name = f"p-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def gpu_node(cluster):
    """A Node of a GPU type no other test uses (no agent runs it: only its labels matter here)."""
    suffix = uuid.uuid4().hex[:6]
    gpu_type = f"POLICY-TEST-{suffix.upper()}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"policy-{suffix}", "labels": {"nvidia.com/gpu.product": gpu_type, DRIVER: "550"}},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
    yield node["metadata"]["name"], gpu_type
    cluster.kubectl("delete", "node", node["metadata"]["name"], "--ignore-not-found")


def checks(operator: Operator) -> float:
    match = re.search(r"^enginewright_policy_checks_total (\S+)$", operator.metrics(), re.M)
    return float(match.group(1)) if match else 0.0


def checked_again(operator: Operator, times: int = 3) -> None:
    """Wait until the operator has checked the policy `times` more times (no fixed sleep)."""
    start = checks(operator)
    wait_for(lambda: checks(operator) >= start + times, 60, f"{times} more policy checks", 0.2)


def start_policy_operator(cluster, log, **extra_env: str) -> Operator:
    """An operator of the policy tests' own: namespaces p-*, checks every half second (`extra_env`:
    more of its settings)."""
    started = start_operator(
        cluster,
        log,
        RUNS_BUCKET,
        ENGINEWRIGHT_NAMESPACES="p-*",
        ENGINEWRIGHT_RECONCILE_INTERVAL=TEST_INTERVAL,
        ENGINEWRIGHT_POLICY_INTERVAL="0.5",
        **extra_env,
    )
    return Operator(started.process, started.log, started.metrics_port, started.health_port)


def policy_doc(template: dict, **spec) -> dict:
    """The TuningPolicy `mlp` of `template` (a TuningRun spec), with more of its spec (`triggers`)."""
    return {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningPolicy",
        "metadata": {"name": "mlp"},
        "spec": {"template": template, **spec},
    }


def template_for(gpu_type: str) -> dict:
    """The tests' TuningRun spec, targeting `gpu_type` with no GPUs a Job."""
    template = manifest("unused")["spec"]
    template["targets"] = [{"gpuType": gpu_type, "gpusPerJob": 0}]
    return template


def runs(cluster, namespace: str) -> dict[str, dict]:
    return {r["metadata"]["name"]: r for r in get_json(cluster, "trun", "-n", namespace)["items"]}


def policy(cluster, namespace: str, name: str = "mlp") -> dict:
    return get_json(cluster, "tpol", name, "-n", namespace)


def recorded(cluster, namespace: str, run: str, name: str = "mlp") -> dict:
    """The policy's target status once it records `run` (and Ready says so)."""

    def done():
        status = policy(cluster, namespace, name).get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        targets = status.get("targets") or []
        return targets[0] if ready and targets and targets[0].get("run") == run else None

    return wait_for(done, 60, f"the policy to record {run}", 0.2)


def events(cluster, namespace: str, reason: str) -> list[dict]:
    items = get_json(cluster, "events", "-n", namespace)["items"]
    return [e for e in items if e["involvedObject"].get("kind") == "TuningPolicy" and e["reason"] == reason]


def policy_event_posted(cluster, namespace: str, reason: str, matches=lambda e: True) -> list[dict]:
    """The policies' `reason` events once one `matches` (`posted`: kopf posts them after the status)."""
    return posted(lambda: events(cluster, namespace, reason), matches, f"{namespace}: a {reason} event")


def test_a_new_driver_major_starts_one_run_named_for_the_new_stack(cluster, p_namespace, gpu_node, tmp_path):
    node, gpu_type = gpu_node
    operators: list[Operator] = []

    def start() -> Operator:
        operators.append(start_policy_operator(cluster, tmp_path / f"operator-{len(operators)}.log"))
        return operators[-1]

    doc = policy_doc(template_for(gpu_type))
    image = Settings().default_image("onnxruntime")  # the test operator sets no worker image
    first_stack = Stack(driver_major="550", compiler_image=image, model_digest=None)
    first, second = (
        run_name("mlp", gpu_type, first_stack),
        run_name("mlp", gpu_type, first_stack.model_copy(update={"driver_major": "560"})),
    )
    try:
        operator = start()
        cluster.kubectl("apply", "-n", p_namespace, "-f", "-", input=json.dumps(doc))
        target = recorded(cluster, p_namespace, first)
        assert target["stack"] == {"driverMajor": "550", "compilerImage": image}
        assert target["reason"] == "Initial" and target["runs"] == [first]
        uid = policy(cluster, p_namespace)["metadata"]["uid"]
        (run,) = runs(cluster, p_namespace).values()
        assert run["metadata"]["name"] == first and run["metadata"]["namespace"] == p_namespace
        assert [(o["kind"], o["uid"]) for o in run["metadata"]["ownerReferences"]] == [("TuningPolicy", uid)]
        assert [t["gpuType"] for t in run["spec"]["targets"]] == [gpu_type]
        assert run["spec"]["publish"]["modelName"] == "mlp"
        policy_event_posted(cluster, p_namespace, "RunStarted", lambda e: first in e["message"])

        # Unchanged: checked again and again, no second run.
        checked_again(operator)
        assert list(runs(cluster, p_namespace)) == [first]

        # The node's driver major changes: one run named for the new stack, and the status says why.
        cluster.kubectl("label", "node", node, f"{DRIVER}=560", "--overwrite")
        target = recorded(cluster, p_namespace, second)
        assert target["stack"]["driverMajor"] == "560" and target["observed"]["driverMajor"] == "560"
        assert target["reason"] == "DriverMajorChanged" and "550 -> 560" in target["message"]
        assert target["runs"] == [first, second]
        checked_again(operator)
        assert sorted(runs(cluster, p_namespace)) == sorted([first, second])

        # The status write lost (as if the operator died after creating the run): the next check finds
        # the run it made, adopts it, and starts none.
        stale = {**target, "stack": {"driverMajor": "550", "compilerImage": image}, "run": first, "runs": [first]}
        cluster.kubectl(
            "patch", "tpol", "mlp", "-n", p_namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"targets": [stale]}}),
        )  # fmt: skip
        target = recorded(cluster, p_namespace, second)
        assert target["runs"] == [first, second]
        policy_event_posted(cluster, p_namespace, "RunAdopted", lambda e: second in e["message"])
        assert sorted(runs(cluster, p_namespace)) == sorted([first, second])

        # A restarted operator checks again and starts nothing.
        operator.stop()
        operator = start()
        checked_again(operator)
        assert sorted(runs(cluster, p_namespace)) == sorted([first, second])
        assert (policy(cluster, p_namespace)["status"]["targets"][0]) == target

        # A run of the name the next stack needs exists and is not the policy's: never adopted.
        third = run_name("mlp", gpu_type, first_stack.model_copy(update={"driver_major": "570"}))
        squatter = manifest(third, targets=(gpu_type,))
        cluster.kubectl("apply", "-n", p_namespace, "-f", "-", input=json.dumps(squatter))
        cluster.kubectl("label", "node", node, f"{DRIVER}=570", "--overwrite")

        def stalled():
            status = policy(cluster, p_namespace).get("status") or {}
            return any(
                c["type"] == "Stalled" and c["status"] == "True" and c["reason"] == "RunNameTaken"
                for c in status.get("conditions") or []
            )

        wait_for(stalled, 60, "the policy to stall with RunNameTaken", 0.2)
        policy_event_posted(cluster, p_namespace, "RunNameTaken")
        taken = runs(cluster, p_namespace)[third]
        assert not taken["metadata"].get("ownerReferences")
        status = policy(cluster, p_namespace)["status"]
        assert status["targets"][0]["run"] == second and status["targets"][0]["observed"]["driverMajor"] == "570"

        # Deleted, the policy lets go (its timer stops, kopf removes its finalizer) and its runs go with it.
        # (Allowed past the operator's 60 s watch timeout: once, a deletion was seen only after it.)
        cluster.kubectl("delete", "tpol", "mlp", "-n", p_namespace, "--wait=false")
        gone = lambda: not get_json(cluster, "tpol", "-n", p_namespace)["items"]  # noqa: E731
        wait_for(gone, 150, "the deleted policy to go (its finalizer removed)", 0.5)
        wait_for(lambda: sorted(runs(cluster, p_namespace)) == [third], 120, "the policy's runs to be collected", 0.5)
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", p_namespace, "--timeout=60s", check=False)
        for running in operators:
            running.stop()
    for running in operators:
        running.assert_clean()
