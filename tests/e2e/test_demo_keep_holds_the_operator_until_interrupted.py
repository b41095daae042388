"""`operator_demo.py --keep` does what it says: after the run it keeps the cluster and the operator
running (the printed KUBECONFIG reaches the cluster, the operator's process is alive), and Ctrl-C
stops them all. (The run itself is cut short with --timeout: what is kept is the point here.)"""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.cluster.harness import wait_for

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_keep_holds_the_operator_and_the_cluster_until_ctrl_c(tmp_path):
    log = tmp_path / "demo.log"
    with open(log, "wb") as out:
        demo = subprocess.Popen(
            [sys.executable, "examples/operator_demo.py", "--keep", "--timeout", "3"],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:

        def holding() -> bool:
            assert demo.poll() is None, log.read_text()[-3000:]  # the demo exited: stop waiting
            return "Ctrl-C (or SIGTERM) stops them all" in log.read_text()

        wait_for(holding, 180, "the demo to hold its components", interval=0.5, detail=lambda: log.read_text()[-3000:])
        text = log.read_text()
        operator_pid = int(re.search(r"the operator \(pid (\d+)", text).group(1))
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", text).group(1)
        kubectl = Path(re.search(r"export PATH=([^:]+):", text).group(1)) / "kubectl"
        assert alive(operator_pid), text[-2000:]
        got = subprocess.run(
            [str(kubectl), "--kubeconfig", kubeconfig, "get", "trun", "-n", "demo"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0 and "demo-mlp" in got.stdout, got
        workdir = Path(kubeconfig).parent
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) in (0, 1), log.read_text()[-2000:]
        assert not alive(operator_pid) and not workdir.exists(), log.read_text()[-2000:]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
