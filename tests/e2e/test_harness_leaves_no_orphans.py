"""The harness leaves no process behind, even when the process that started it is killed."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.cluster.harness import wait_for

SCRIPT = """
import sys, time
from tests.cluster.harness import LocalCluster
c = LocalCluster(nodes=[{"name": "solo", "labels": {"nvidia.com/gpu.product": "cpu"}, "gpus": 0}])
c.start()
print(" ".join(str(p.popen.pid) for p in c.processes), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status


def test_killing_the_parent_kills_the_whole_cluster(cluster):
    env = {**os.environ, "ENGINEWRIGHT_BIN": str(cluster.binaries)}
    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 6 and all(alive(p) for p in pids)  # etcd, apiserver, kcm, scheduler, S3, node agent
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_for(lambda: not any(alive(p) for p in pids), 30, "every cluster process to exit", 0.2)
