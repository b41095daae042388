"""kube-apiserver stopped and started again in the middle of a run: the operator reconnects and the
run completes."""

import time

from tests.cluster.harness import wait_for
from tests.faults.conftest import cached_entries
from tests.operator.conftest import apply, manifest, run_status, wait_condition

KNOBS = [{"name": "enable_mem_pattern", "values": ["0"]}, {"name": "enable_cpu_mem_arena", "values": ["0"]}]


def test_api_server_restart(cluster, operators, fault_namespace):
    operators.start()
    doc = manifest(
        "restarted", knobs=KNOBS, timing={"warmupIterations": 2, "roundSeconds": 0.1, "minRounds": 4, "maxRounds": 4}
    )
    apply(cluster, fault_namespace, doc)
    wait_for(
        lambda: (run_status(cluster, fault_namespace, "restarted").get("targets") or [{}])[0].get("stage") == "stage1",
        180,
        "the run's stage 1",
        interval=0.3,
        detail=lambda: run_status(cluster, fault_namespace, "restarted"),
    )
    cluster.stop_process("kube-apiserver")
    time.sleep(10)  # the outage itself, not a wait for a condition
    cluster.start_process("kube-apiserver")
    status = wait_condition(cluster, fault_namespace, "restarted", "Ready", 300)
    entries = cached_entries(cluster, fault_namespace, status)
    assert len(entries) == len({e.route_id for e in entries}) == status["targets"][0]["planned"] == 3
    assert "Traceback" not in operators.log_text()
