"""Pure parts of scheduling (which pods wait for a node, which wait on a node with a container that
cannot start, when a target gives up) and of the worker's resources (int-or-string quantities, default requests that never exceed a target's own limits)."""

import pytest
from pydantic import ValidationError

from enginewright.api.models import Resources, Target
from enginewright.controller.jobs import worker_requests
from enginewright.controller.scheduling import not_starting, owned, verdict, waiting
from enginewright.controller.settings import Settings
from enginewright.controller.status import seconds, stamp

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def test_a_kubernetes_time_reads_back_as_the_seconds_it_was_written_from():
    assert stamp(T0) == "2027-01-15T08:00:00Z" and seconds(stamp(T0)) == T0
    # the API server may write fractions (metav1.MicroTime) and other offsets
    assert seconds("2027-01-15T08:00:00.250000Z") == T0 + 0.25
    assert seconds("2027-01-15T09:00:00+01:00") == T0


def pod(name, node=None, phase="Pending", unschedulable_since=None, message="0/3 nodes are available"):
    conditions = []
    if unschedulable_since is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": stamp(unschedulable_since),
            }
        )
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions},
    }


def test_no_unschedulable_pod_is_no_wait():
    assert waiting([], T0) is None
    assert waiting([pod("a", node="n1", phase="Running"), pod("b")], T0) is None  # b: not yet looked at


def test_the_longest_waiting_pod_gives_the_message_and_the_time():
    found = waiting(
        [
            pod("b", unschedulable_since=T0 - 5, message="newer"),
            pod("a", unschedulable_since=T0 - 50, message="0/3 nodes: Insufficient nvidia.com/gpu"),
        ],
        T0,
    )
    assert found.pods == ("a", "b") and found.seconds == 50 and found.placed == 0
    assert found.message == "0/3 nodes: Insufficient nvidia.com/gpu"
    assert found.give_up(30) and not found.give_up(60) and not found.give_up(0)  # 0: never


def test_the_target_says_which_pods_wait_how_long_it_waits_and_what_to_check():
    found = waiting([pod("a", unschedulable_since=T0 - 50, message="0/3 nodes: Insufficient nvidia.com/gpu")], T0)
    said = "1 pod(s) cannot be scheduled (a, unschedulable for 50s): 0/3 nodes: Insufficient nvidia.com/gpu"
    assert (
        found.waiting_for(600)
        == f"{said}; waiting for a node (a pool scaling up, or GPUs freed): gives up after 600s without a node"
    )
    assert found.waiting_for(0).endswith(": waits without a time limit")
    assert found.gave_up(30).startswith(
        f"{said}; gave up after 30s (the operator's scheduling.unschedulableTimeoutSeconds)"
    )
    assert "nodeSelector, tolerations and resources" in found.gave_up(30)


def test_a_target_with_a_pod_on_a_node_does_not_give_up():
    found = waiting([pod("a", unschedulable_since=T0 - 500), pod("b", node="n1", phase="Running")], T0)
    assert found.placed == 1 and not found.give_up(30)


def test_ended_and_deleted_pods_do_not_count():
    gone = pod("c", unschedulable_since=T0 - 500)
    gone["metadata"]["deletionTimestamp"] = stamp(T0)
    assert (
        waiting(
            [pod("a", phase="Failed", unschedulable_since=T0 - 500), gone, pod("b", node="n1", phase="Succeeded")], T0
        )
        is None
    )


def on_node(name, since, waiting_reason=None, message="", phase="Pending", init=False):
    """A pod bound to node n1 since `since`, its one container (or init container) waiting for
    `waiting_reason`, or still being created (a pull in progress)."""
    state = {"waiting": {"reason": waiting_reason or "ContainerCreating", **({"message": message} if message else {})}}
    if phase == "Running":
        state = {"running": {"startedAt": stamp(since)}}
    status = {
        "phase": phase,
        "startTime": stamp(since),
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(since)}],
        "initContainerStatuses" if init else "containerStatuses": [{"name": "worker", "state": state}],
    }
    return {"metadata": {"name": name}, "spec": {"nodeName": "n1"}, "status": status}


def test_a_pod_whose_image_cannot_be_pulled_is_found_with_the_kubelets_reason_and_message():
    pull = 'Back-off pulling image "registry.example/worker:typo"'
    blocked = [on_node("b", T0 - 20, "ErrImagePull", "newer"), on_node("a", T0 - 900, "ImagePullBackOff", pull)]
    found = not_starting(blocked, T0, seen_since=T0 - 90)
    assert found.pods == ("a", "b") and found.reason == "ImagePullBackOff" and found.message == pull
    # The time is the operator's since it first saw one blocked, not the pod's on its node (900 s:
    # a slow pull that ended in one passing error is not blocked time).
    assert found.seconds == 90 and found.others == 0
    assert found.give_up(60) and not found.give_up(120) and not found.give_up(0)  # 0: never
    said = f"2 pod(s) on a node cannot start their container (a, ImagePullBackOff, seen for 90s): {pull}"
    assert found.waiting_for(600) == f"{said}; the kubelet retries: gives up after 600s"
    assert found.gave_up(60).startswith(f"{said}; gave up after 60s (the operator's scheduling.startTimeoutSeconds)")
    assert "pull secret" in found.gave_up(60) and "store.workerSecret" in found.gave_up(60)
    assert not_starting(blocked, T0).seconds == 0  # first seen now


def test_a_pod_still_pulling_or_running_keeps_the_target_and_init_containers_and_missing_config_count():
    pulling = on_node("c", T0 - 300)  # ContainerCreating: a pull in progress is not blocked
    found = not_starting([on_node("a", T0 - 900, "ErrImagePull"), pulling], T0, seen_since=T0 - 900)
    assert found.pods == ("a",) and found.others == 1 and not found.give_up(60)
    running = on_node("d", T0 - 900, phase="Running")
    assert not not_starting([on_node("a", T0 - 900, "ErrImagePull"), running], T0, T0 - 900).give_up(60)
    config = on_node("e", T0 - 40, "CreateContainerConfigError", 'secret "store" not found', init=True)
    assert not_starting([config], T0, T0 - 40).reason == "CreateContainerConfigError"


def test_ended_deleted_or_unplaced_pods_are_not_blocked():
    ended = on_node("c", T0 - 900, "ErrImagePull", phase="Failed")
    deleted = on_node("d", T0 - 900, "ErrImagePull")
    deleted["metadata"]["deletionTimestamp"] = stamp(T0)
    unplaced = on_node("e", T0 - 900, "ErrImagePull")
    unplaced["spec"] = {}
    assert not_starting([ended, deleted, unplaced, pod("f", unschedulable_since=T0 - 900)], T0, T0 - 900) is None


def test_a_container_that_cannot_start_is_said_first_and_neither_hides_the_other():
    unplaced = pod("a", unschedulable_since=T0 - 100)
    stuck = on_node("b", T0 - 100, "ImagePullBackOff", "no such tag")
    said = verdict([unplaced, stuck], T0, unschedulable_seconds=1800, start_seconds=600)
    # first sighting: said (it needs someone to act; a new node would meet it too), its time kept
    assert said.reason == "ContainerCannotStart" and not said.give_up and said.blocked_since == stamp(T0)
    assert "gives up after 600s" in said.message and "no such tag" in said.message
    said = verdict([unplaced, stuck], T0 + 600, 1800, 600, blocked_since=stamp(T0))  # the start wait passed
    assert said.reason == "ContainerCannotStart" and said.give_up
    long_unplaced = pod("a", unschedulable_since=T0 - 1800)
    said = verdict([long_unplaced, stuck], T0 + 60, 1800, 600, blocked_since=stamp(T0))
    assert said.reason == "ContainerCannotStart" and not said.give_up  # (a pod has a node: not Unschedulable's end)
    said = verdict([long_unplaced], T0 + 60, 1800, 600)
    assert said.reason == "Unschedulable" and said.give_up and said.blocked_since is None
    assert verdict([stuck], T0 + 5000, 1800, 0, blocked_since=stamp(T0)).give_up is False  # 0: never
    placed = verdict([unplaced, on_node("c", T0 - 5000), pod("d", node="n1", phase="Running")], T0, 1800, 600)
    assert placed.reason == "Unschedulable" and placed.blocked_since is None
    assert verdict([on_node("c", T0 - 5000), pod("d", node="n1", phase="Running")], T0, 1800, 600) is None


def test_only_pods_of_the_targets_own_jobs_count():
    """A run applied again under its name: its old Job's pod (same labels, unschedulable for an hour)
    must not end the new target at its first pass."""
    old = pod("old", unschedulable_since=T0 - 3600)
    old["metadata"]["ownerReferences"] = [{"kind": "Job", "uid": "job-of-the-deleted-run"}]
    new = pod("new", unschedulable_since=T0 - 5)
    new["metadata"]["ownerReferences"] = [{"kind": "Job", "uid": "job-1"}]
    assert verdict([old, new], T0, 1800, 600).give_up  # (all of them: the old pod's hour counts)
    mine = owned([old, new, pod("unowned")], {"job-1"})
    assert [p["metadata"]["name"] for p in mine] == ["new"]
    said = verdict(mine, T0, 1800, 600)
    assert said.reason == "Unschedulable" and not said.give_up and "unschedulable for 5s" in said.message


def test_quantities_are_int_or_string():
    assert Resources.model_validate({"requests": {"cpu": 2, "memory": "16Gi"}, "limits": {"cpu": "500m"}}).requests == {
        "cpu": "2",
        "memory": "16Gi",
    }
    for bad in ("lots", True, 1.5, ""):
        with pytest.raises(ValidationError, match="resource quantity"):
            Resources.model_validate({"requests": {"cpu": bad}})


def test_worker_requests_default_and_yield_to_the_target():
    settings = Settings(worker_requests={"cpu": "1", "memory": "2Gi"})
    plain = Target(gpu_type="cpu")
    assert worker_requests(plain, settings) == {"cpu": "1", "memory": "2Gi"}
    own = Target.model_validate({"gpuType": "cpu", "resources": {"requests": {"cpu": 4}, "limits": {"memory": "1Gi"}}})
    # cpu: the target's; memory: limited to 1Gi without a request, so no 2Gi default above its limit
    assert worker_requests(own, settings) == {"cpu": "4"}


def test_settings_from_the_environment():
    settings = Settings.from_env(
        {
            "ENGINEWRIGHT_WORKER_REQUESTS": '{"cpu": 2, "memory": "8Gi"}',
            "ENGINEWRIGHT_JOB_TTL_SECONDS": "",
            "ENGINEWRIGHT_UNSCHEDULABLE_SECONDS": "0",
            "ENGINEWRIGHT_START_TIMEOUT_SECONDS": "90",
        }
    )
    assert settings.start_seconds == 90 and Settings.from_env({}).start_seconds == 600
    assert settings.worker_requests == {"cpu": "2", "memory": "8Gi"}
    assert settings.job_ttl_seconds is None and settings.unschedulable_seconds == 0
    defaults = Settings.from_env({})
    assert defaults.job_ttl_seconds == 3600 and defaults.unschedulable_seconds == 1800
