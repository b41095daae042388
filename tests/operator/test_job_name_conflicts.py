"""Job names are deterministic and set by the operator: a create that answers 409 adopts the Job
when it is this run's (same owner, same spec hash), and stops with a clear reason when a Job of the
same name belongs to someone else."""

import json

from tests.cluster.harness import wait_for
from tests.conftest import get_json
from tests.operator.conftest import apply, condition, manifest, run_status, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


def test_a_foreign_job_with_the_same_name_stalls_the_run(cluster, operator, run_namespace):
    foreign = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "taken-cpu-probe"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"none": "none"},
                    "containers": [{"name": "x", "image": "x", "command": ["true"]}],
                }
            }
        },
    }
    cluster.kubectl("apply", "-n", run_namespace, "-f", "-", input=json.dumps(foreign))
    apply(cluster, run_namespace, manifest("taken", knobs=KNOB))
    status = wait_condition(cluster, run_namespace, "taken", "Stalled", 120)
    stalled = condition(status, "Stalled")
    assert stalled["reason"] == "JobNameTaken" and f"{run_namespace}/taken-cpu-probe" in stalled["message"]
    job = get_json(cluster, "job", "taken-cpu-probe", "-n", run_namespace)
    assert not job["metadata"].get("ownerReferences")  # left alone
    operator.assert_clean()


def test_a_create_that_answers_409_adopts_the_runs_own_job(cluster, operator, run_namespace):
    doc = manifest(
        "adopt", knobs=KNOB, timing={"warmupIterations": 2, "roundSeconds": 0.1, "minRounds": 4, "maxRounds": 4}
    )
    apply(cluster, run_namespace, doc)
    wait_for(
        lambda: (
            cluster.kubectl("get", "job", "adopt-cpu-stage1-b000", "-n", run_namespace, check=False).returncode == 0
        ),
        120,
        "the stage-1 Job",
        interval=0.3,
        detail=lambda: run_status(cluster, run_namespace, "adopt"),
    )
    # The operator finds its Jobs by label: without it, it creates the Job again, gets 409, and adopts.
    cluster.kubectl("label", "job", "adopt-cpu-stage1-b000", "-n", run_namespace, "tuning.enginewright.io/run-")
    status = wait_condition(cluster, run_namespace, "adopt", "Ready", 240)
    assert status["targets"][0]["done"] == status["targets"][0]["planned"] == 2
    creates = [
        e
        for e in cluster.audit_events()
        if e.get("verb") == "create"
        and e.get("stage") == "ResponseComplete"
        and (e.get("objectRef") or {}).get("name") == "adopt-cpu-stage1-b000"
        and (e.get("objectRef") or {}).get("namespace") == run_namespace
    ]
    codes = sorted(e["responseStatus"]["code"] for e in creates)
    assert codes.count(201) == 1 and 409 in codes, codes
    operator.assert_clean()
