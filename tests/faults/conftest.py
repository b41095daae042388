"""Fault tests: each test gets a namespace `f-*` with the store Secret, and starts (and kills and
restarts) operators of its own watching `f-*`, so the shared operator of tests/operator never sees
these runs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from enginewright.api.cache import CacheEntry
from tests.cluster.harness import wait_for
from tests.cluster.operator_process import OperatorProcess, create_store_secret, start_operator
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, TEST_INTERVAL, example_in_store  # noqa: F401 (fixture)


@pytest.fixture
def fault_namespace(cluster, crd_installed, example_in_store):  # noqa: F811
    name = f"f-{uuid.uuid4().hex[:8]}"
    cluster.create_namespace(name)
    create_store_secret(cluster, name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


class Operators:
    """Operators started by one test, one at a time; all stopped at the end."""

    def __init__(self, cluster, folder: Path):
        self.cluster, self.folder, self.started = cluster, folder, []

    def start(self, failpoints: str = "", worker_env: dict | None = None, **env: str) -> OperatorProcess:
        """An operator on f-*; one given a `kill` failpoint may die before its health endpoint is up."""
        extra = {
            "ENGINEWRIGHT_NAMESPACES": "f-*",
            "ENGINEWRIGHT_FAILPOINTS": failpoints,
            "ENGINEWRIGHT_RECONCILE_INTERVAL": TEST_INTERVAL,
            "ENGINEWRIGHT_FAILPOINT_DIR": str(self.folder / "failpoints"),
            **env,
        }
        if worker_env:
            extra["ENGINEWRIGHT_WORKER_ENV"] = json.dumps(worker_env)
        operator = start_operator(
            self.cluster,
            self.folder / f"operator-{len(self.started)}.log",
            RUNS_BUCKET,
            wait_healthy="kill" not in failpoints,
            **extra,
        )
        self.started.append(operator)
        return operator

    def log_text(self) -> str:
        """Every operator's log, one after another (tests/conftest.py shows it when a test fails)."""
        return "\n".join(o.log_text() for o in self.started)

    def stop_all(self) -> None:
        for operator in self.started:
            operator.stop()


@pytest.fixture
def operators(cluster, tmp_path):
    running = Operators(cluster, tmp_path)
    yield running
    running.stop_all()


def wait_killed(operator: OperatorProcess, timeout: float) -> None:
    wait_for(
        lambda: operator.process.poll() is not None,
        timeout,
        "the operator to be killed",
        interval=0.2,
        detail=lambda: operator.log_text()[-2000:],
    )
    assert operator.process.returncode == -9, operator.log_text()[-2000:]


def cached_entries(cluster, namespace: str, status: dict) -> list[CacheEntry]:
    """Every entry in the run's cache ConfigMaps (all shards, all targets)."""
    out = []
    for target in status["targets"]:
        for name in target["cacheConfigMaps"]:
            data = get_json(cluster, "configmap", name, "-n", namespace).get("data") or {}
            out += [CacheEntry.from_json(v) for v in data.values()]
    return out


def job_creations(cluster, namespace: str) -> dict[str, int]:
    """Successful Job creations per name in `namespace`, from the API server's audit log."""
    counts: dict[str, int] = {}
    for event in cluster.audit_events():
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == "create"
            and ref.get("resource") == "jobs"
            and ref.get("namespace") == namespace
            and event.get("stage") == "ResponseComplete"
            and (event.get("responseStatus") or {}).get("code") == 201
        ):
            counts[ref.get("name")] = counts.get(ref.get("name"), 0) + 1
    return counts
