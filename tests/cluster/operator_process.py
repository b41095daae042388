"""The operator as a process of its own (`python -m enginewright.controller`) against a LocalCluster:
used by the operator tests and by `make demo`."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.harness import REPO, _die_with_parent, free_port, wait_for


@dataclass
class OperatorProcess:
    process: subprocess.Popen
    log: Path
    metrics_port: int
    health_port: int

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def peak_rss_mib(self) -> float:
        """VmHWM of the operator process (its peak resident memory so far)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_operator(
    cluster, log: Path, buckets: str = "enginewright", wait_healthy: bool = True, **extra_env: str
) -> OperatorProcess:
    """Start the operator with the cluster's kubeconfig and store; workers run the venv's Python.
    With `wait_healthy`, return once its health endpoint answers."""
    metrics_port, health_port = free_port(), free_port()
    # Worker pods get only their own env: PYTHONPATH in the command makes them run this checkout's
    # package, as the operator does (not whichever checkout the venv's editable install points at).
    worker = f"env PYTHONPATH={REPO / 'operator'} {sys.executable} -m enginewright.worker"
    env = {
        **cluster.env,
        "ENGINEWRIGHT_WORKER_COMMAND": worker,
        "ENGINEWRIGHT_RECONCILE_INTERVAL": "1",
        "ENGINEWRIGHT_METRICS_PORT": str(metrics_port),
        "ENGINEWRIGHT_HEALTH_PORT": str(health_port),
        "ENGINEWRIGHT_RUNS_BUCKET": buckets,
        "ENGINEWRIGHT_CATALOG_BUCKET": buckets,
        **extra_env,
    }
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "operator"), env.get("PYTHONPATH", "")])
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "enginewright.controller"],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,
            cwd=REPO,
        )
    operator = OperatorProcess(process, log, metrics_port, health_port)
    if not wait_healthy:
        return operator

    def healthy():
        if process.poll() is not None:
            raise RuntimeError(f"the operator exited with {process.returncode}: {log.read_text()[-3000:]}")
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=2) as resp:
            return resp.status == 200

    try:
        wait_for(healthy, 60, "the operator's health endpoint", 0.2)
    except TimeoutError:
        operator.stop()
        raise
    return operator


EXAMPLE_FILES = ("mlp.onnx", "inputs-0.npz", "inputs-1.npz", "references-0.npz", "references-1.npz")


def upload_example(
    cluster, folder: Path, models_bucket: str = "enginewright-models", runs_bucket: str = "enginewright"
):
    """Write the example model and reference pairs into `folder` and the store (s3://<models_bucket>/
    example/...), creating both buckets; returns an S3 client of the store."""
    from minio import Minio

    sys.path.insert(0, str(REPO / "examples"))
    from make_example import write_example

    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY

    write_example(folder)
    s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
    for bucket in (models_bucket, runs_bucket):
        if not s3.bucket_exists(bucket):
            s3.make_bucket(bucket)
    for name in EXAMPLE_FILES:
        s3.fput_object(models_bucket, f"example/{name}", str(folder / name))
    return s3


def create_store_secret(cluster, namespace: str, name: str = "enginewright-store") -> None:
    """The Secret the operator's worker Jobs (or the operator) read the store credentials from."""
    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY

    cluster.kubectl(
        "create",
        "secret",
        "generic",
        name,
        "-n",
        namespace,
        f"--from-literal=AWS_ACCESS_KEY_ID={S3_ACCESS_KEY}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={S3_SECRET_KEY}",
    )
