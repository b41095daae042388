"""A worker pod deleted in the middle of its batch: the Job's next pod skips the routes whose
entries were written, and the run completes without measuring them again."""

import json

from tests.cluster.harness import wait_for
from tests.conftest import get_json
from tests.faults.conftest import cached_entries
from tests.operator.conftest import RUNS_BUCKET, apply, manifest, wait_condition

KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "extended"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "session.intra_op.allow_spinning", "values": ["0"]},
    {"name": "enable_cpu_mem_arena", "values": ["0"]},
]


def test_deleted_worker_pod_resumes(cluster, operators, fault_namespace, s3):
    operators.start()
    doc = manifest(
        "resumed", knobs=KNOBS, timing={"warmupIterations": 2, "roundSeconds": 0.1, "minRounds": 4, "maxRounds": 4}
    )
    doc["spec"]["search"].update(routesPerJob=8)
    doc["spec"]["search"]["confirm"] = {"topK": 0, "rounds": 2}
    apply(cluster, fault_namespace, doc)
    prefix = f"runs/{fault_namespace}/resumed-"

    def written():
        return {
            o.object_name: s3.get_object(RUNS_BUCKET, o.object_name).read()
            for o in s3.list_objects(RUNS_BUCKET, prefix=prefix, recursive=True)
            if "/entries/" in o.object_name
        }

    before = wait_for(lambda: found if len(found := written()) >= 2 else None, 180, "two entries written", 0.3)
    job = "resumed-cpu-stage1-b000"
    pods = get_json(cluster, "pods", "-n", fault_namespace, "-l", f"job-name={job}")["items"]
    running = [p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"]
    assert running, pods
    cluster.kubectl("delete", "pod", *running, "-n", fault_namespace, "--wait=false")

    status = wait_condition(cluster, fault_namespace, "resumed", "Ready", 300)
    (target,) = status["targets"]
    after = written()
    for key, data in before.items():  # measured once: the entry written before the deletion is untouched
        assert after[key] == data, key
    entries = cached_entries(cluster, fault_namespace, status)
    assert len(entries) == len({e.route_id for e in entries}) == target["planned"] == 6
    pods = get_json(cluster, "pods", "-n", fault_namespace, "-l", f"job-name={job}")["items"]
    assert pods and not {p["metadata"]["name"] for p in pods} & set(running)  # the Job made a new pod
    assert get_json(cluster, "job", job, "-n", fault_namespace)["status"].get("failed") == 1
    assert all(json.loads(data)["routeId"] for data in before.values())
