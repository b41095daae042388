"""TuningPolicies whose `spec.triggers.schedule` the CRD refuses today but that the API server stored
anyway, against the real control plane (an operator of the policy tests' own on `p-*`):

- a schedule that is not a duration (7d) or is under the 1h minimum (30m): the policy is Stalled
  with reason InvalidInput naming the field and the value, one Warning Event says so (not one per
  check), it starts no run; corrected, it starts its run and is Ready;
- a schedule past Go's largest duration (3000000h): under the previous release's CRD (an unbounded
  pattern it matched, so its rule's duration() failed with an evaluation error; Helm never upgrades
  a chart's CRDs, so clusters keep it) the API server refuses every status write of the policy; one
  Warning StatusRefused says why, and the operator keeps checking it (kopf's own status write would
  have ended its timer for good) and starts no run (the operator's model refuses the value too). Under
  the CRD as generated now (digits bounded: the value fails the pattern, which ratchets, and the rule
  is not evaluated) the same policy's status is written: Stalled, InvalidInput, naming the value;
  once corrected it starts its run.

The operator's log holds no traceback. How such values get stored: an older CRD (before the
schedule's pattern and CEL rule) accepted them. The test removes both from the installed CRD,
applies the policies, and installs the CRD as generated again: the API server does not re-validate
stored objects, and on update ratchets an unchanged field that fails a rule (not one whose rule
fails to evaluate), while an edit to another bad value is refused."""

from __future__ import annotations

import json

from tests.cluster.harness import REPO, wait_for
from tests.conftest import get_json
from tests.operator import test_a_policy_retunes_when_a_nodes_driver_changes as driver_test
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import (
    checked_again,
    policy,
    policy_doc,
    recorded,
    runs,
    start_policy_operator,
    template_for,
)

p_namespace, gpu_node = driver_test.p_namespace, driver_test.gpu_node  # that test's fixtures

CRD = "tuningpolicies.tuning.enginewright.io"
SCHEDULE = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/triggers/properties/schedule"
BAD = {"mlp": "7d", "hourly": "30m"}  # not a duration of h, m, s; shorter than the 1h minimum
UNEVALUABLE = {"forever": "3000000h"}  # past what Go's and CEL's duration() hold
OLD_PATTERN = r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"  # the previous release's: 3000000h matched it
OLD_RULE = f"!self.matches(r'{OLD_PATTERN}') || duration(self) >= duration('1h')"  # and its rule


def stalled(cluster, namespace: str, name: str) -> dict | None:
    status = get_json(cluster, "tpol", name, "-n", namespace).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Stalled" and c["status"] == "True"), None)


def warnings(cluster, namespace: str, name: str) -> list[dict]:
    items = get_json(cluster, "events", "-n", namespace)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["type"] == "Warning"]


def test_a_bad_schedule_stored_past_the_crd_stalls_the_policy_until_it_is_corrected(
    cluster, p_namespace, gpu_node, tmp_path
):
    _, gpu_type = gpu_node
    operator = None
    try:
        # The CRD as it was before the schedule was validated.
        cluster.kubectl(
            "patch", "crd", CRD, "--type=json",
            "-p", json.dumps([{"op": "remove", "path": f"{SCHEDULE}/pattern"},
                              {"op": "remove", "path": f"{SCHEDULE}/x-kubernetes-validations"}]),
        )  # fmt: skip
        try:
            for name, schedule in {**BAD, **UNEVALUABLE}.items():
                doc = policy_doc(template_for(gpu_type), triggers={"schedule": schedule})
                doc["metadata"]["name"] = name
                text = json.dumps(doc)

                def stored(text=text):
                    return (
                        cluster.kubectl("apply", "-n", p_namespace, "-f", "-", input=text, check=False).returncode == 0
                    )

                wait_for(stored, 30, f"the API server to store schedule {schedule} (the older CRD in use)", 0.2)
        finally:  # the previous release's CRD: as generated, with the unbounded pattern
            cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds" / f"{CRD}.yaml"))
            cluster.kubectl(
                "patch", "crd", CRD, "--type=json",
                "-p", json.dumps([{"op": "replace", "path": f"{SCHEDULE}/pattern", "value": OLD_PATTERN},
                                  {"op": "replace", "path": f"{SCHEDULE}/x-kubernetes-validations/0/rule",
                                   "value": OLD_RULE}]),
            )  # fmt: skip

        def refused():
            edit = cluster.kubectl(
                "patch", "tpol", "mlp", "-n", p_namespace, "--type=merge", "--dry-run=server",
                "-p", json.dumps({"spec": {"triggers": {"schedule": "5m"}}}), check=False,
            )  # fmt: skip
            return edit.returncode != 0 and "must be at least 1h" in edit.stderr

        # The operator starts once the generated CRD is in use (else its first status writes could
        # still pass under the older one).
        wait_for(refused, 30, "the API server to refuse a bad schedule again (the previous CRD in use)", 0.2)
        operator = start_policy_operator(cluster, tmp_path / "operator.log")

        for name, schedule in BAD.items():
            stall = wait_for(lambda: stalled(cluster, p_namespace, name), 60, f"{name} to stall", 0.2)
            assert stall["reason"] == "InvalidInput", stall
            assert "triggers.schedule" in stall["message"] and schedule in stall["message"], stall
        checked_again(operator, 6)
        assert not runs(cluster, p_namespace)  # forever's too: 3000000h is no duration to the operator
        for name in BAD:
            (warning,) = warnings(cluster, p_namespace, name)
            assert warning["reason"] == "InvalidInput", warning
        said = warnings(cluster, p_namespace, "forever")
        # each once, not at every check (the status that would record the first was never written)
        assert sorted(w["reason"] for w in said) == ["InvalidInput", "StatusRefused"], said
        said = {w["reason"]: w for w in said}
        assert "spec.triggers.schedule" in said["StatusRefused"]["message"], said
        assert stalled(cluster, p_namespace, "forever") is None  # its status was never written

        # The CRD as generated now: forever's status is written, Stalled, naming the value.
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds" / f"{CRD}.yaml"))
        stall = wait_for(
            lambda: stalled(cluster, p_namespace, "forever"), 60, "forever to stall (the current CRD)", 0.2
        )
        assert stall["reason"] == "InvalidInput" and "3000000h" in stall["message"], stall
        assert sorted(w["reason"] for w in warnings(cluster, p_namespace, "forever")) == [
            "InvalidInput",
            "StatusRefused",
        ]

        # Corrected, each is checked again: its first run recorded, Ready, not Stalled.
        for name in ("mlp", "forever"):
            cluster.kubectl(
                "patch", "tpol", name, "-n", p_namespace, "--type=merge",
                "-p", json.dumps({"spec": {"triggers": {"schedule": "168h"}}}),
            )  # fmt: skip
            first = lambda: next(iter(policy(cluster, p_namespace, name).get("status", {}).get("targets") or []), None)  # noqa: E731
            run = wait_for(first, 60, f"the corrected policy {name}'s first run", 0.2)["run"]
            target = recorded(cluster, p_namespace, run, name)
            assert target["reason"] == "Initial" and run in runs(cluster, p_namespace)
            assert stalled(cluster, p_namespace, name) is None
        assert stalled(cluster, p_namespace, "hourly")
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", p_namespace, "--timeout=60s", check=False)
        if operator is not None:
            operator.stop()
    assert operator is not None
    operator.assert_clean()
