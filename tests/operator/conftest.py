"""The operator as users run it: `python -m enginewright.controller` as a process of its own against
the real local cluster and S3 server, worker Jobs run by the node agent. One operator per test
session; each test gets its own namespace with the store Secret, and the example model in the store."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.cluster.harness import wait_for
from tests.cluster.operator_process import OperatorProcess, create_store_secret, start_operator, upload_example
from tests.conftest import get_json

RUNS_BUCKET = "enginewright"
MODELS_BUCKET = "enginewright-models"
TEST_INTERVAL = "0.5"  # seconds between reconcile passes: tests wait on the operator, keep it short
ALLOWED_IMAGES = "registry.example.com/allowed/*"  # tenancy.allowedImages of the tests' operator
PUBLISH_BUCKETS = ("enginewright-absent", "enginewright-vanishing")  # tenancy.publishBuckets (the first never created)
FAST_TIMING = {"warmupIterations": 2, "roundSeconds": 0.005, "minRounds": 2, "maxRounds": 3}


class Operator(OperatorProcess):
    def assert_clean(self) -> None:
        """No handler raised: kopf logs every exception of a handler with its traceback."""
        text = self.log_text()
        assert "Traceback" not in text, text[-4000:]
        assert "failed with an exception" not in text, text[-4000:]


@pytest.fixture(scope="session")
def example_in_store(cluster, tmp_path_factory):
    folder = tmp_path_factory.mktemp("example")
    upload_example(cluster, folder, MODELS_BUCKET, RUNS_BUCKET)
    return folder


@pytest.fixture(scope="session")
def operator(cluster, crd_installed, example_in_store, tmp_path_factory):
    # Namespaces t-* (the `namespace` fixture's); the fault tests run operators of their own on f-*.
    started = start_operator(
        cluster,
        tmp_path_factory.mktemp("operator") / "operator.log",
        RUNS_BUCKET,
        ENGINEWRIGHT_NAMESPACES="t-*",
        ENGINEWRIGHT_RECONCILE_INTERVAL=TEST_INTERVAL,
        ENGINEWRIGHT_ALLOWED_IMAGES=ALLOWED_IMAGES,
        ENGINEWRIGHT_PUBLISH_BUCKETS=",".join(PUBLISH_BUCKETS),
    )
    running = Operator(started.process, started.log, started.metrics_port, started.health_port)
    yield running
    running.stop()
    running.assert_clean()


@pytest.fixture
def other_namespace(cluster, api):
    """A second tenant: another namespace the operator watches, with its own store Secret."""
    import uuid

    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    create_store_secret(cluster, name)
    yield name
    client.CoreV1Api(api).delete_namespace(name)


@pytest.fixture
def run_namespace(cluster, namespace):
    """A namespace holding the store Secret the worker Jobs read."""
    create_store_secret(cluster, namespace)
    return namespace


def manifest(name: str, *, mode: str = "fast", targets=("cpu",), knobs=None, **spec_changes) -> dict:
    """The example TuningRun with short timing; `spec_changes` replace top-level spec fields."""
    doc = yaml.safe_load(Path("examples/tuningrun-onnx-fast.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": name}
    spec = doc["spec"]
    spec["timing"] = dict(FAST_TIMING)
    spec["search"]["mode"] = mode
    spec["search"]["confirm"] = {"topK": 2, "rounds": 3, "loads": 2}  # (the default 5 would double the tests' time)
    if knobs is not None:
        spec["search"]["knobs"] = knobs
    spec["targets"] = [{"gpuType": t, "gpusPerJob": 0 if t == "cpu" else 1} for t in targets]
    for key, value in spec_changes.items():
        spec[key] = value
    return doc


def pod_log(cluster, namespace: str, job: str) -> str:
    """The node agent's log files of the Job's pods."""
    return "".join(p.read_text() for p in sorted(cluster.pod_logs.glob(f"{namespace}_{job}-*")))


def apply(cluster, namespace: str, doc: dict) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))


def run_status(cluster, namespace: str, name: str) -> dict:
    return get_json(cluster, "trun", name, "-n", namespace).get("status") or {}


def condition(status: dict, kind: str) -> dict:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def wait_condition(cluster, namespace: str, name: str, kind: str, timeout: float) -> dict:
    """Poll until condition `kind` is True; fail early (with the status) when the run stalls instead."""

    def reached() -> dict | None:
        status = run_status(cluster, namespace, name)
        if condition(status, kind).get("status") == "True":
            return status
        if kind != "Stalled" and condition(status, "Stalled").get("status") == "True":
            raise AssertionError(f"{namespace}/{name} stalled: {json.dumps(status, indent=1)[:3000]}")
        return None

    return wait_for(
        reached,
        timeout,
        f"{namespace}/{name}: {kind}",
        interval=0.5,
        detail=lambda: json.dumps(run_status(cluster, namespace, name), indent=1)[:3000],
    )


def events(cluster, namespace: str, name: str) -> list[dict]:
    items = get_json(cluster, "events", "-n", namespace)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def posted(read, matches, what: str, timeout: float = 30) -> list[dict]:
    """The events `read()` returns once one `matches`, waited for with a deadline: kopf posts an event
    after the status patch it goes with, so a test that has just read that status can be early (CI at
    03f0779 read no event yet, once the tests read the cluster in their own process)."""
    found: list[dict] = []

    def seen() -> bool:
        found[:] = read()
        return any(matches(e) for e in found)

    wait_for(seen, timeout, what, interval=0.3, detail=lambda: [(e["type"], e["reason"]) for e in found])
    return found


def event_posted(cluster, namespace: str, name: str, matches, timeout: float = 30) -> list[dict]:
    """The events of `namespace`/`name` once one `matches` (`posted`)."""
    return posted(lambda: events(cluster, namespace, name), matches, f"{namespace}/{name}: its event", timeout)


def jobs(cluster, namespace: str) -> list[dict]:
    return get_json(cluster, "jobs", "-n", namespace)["items"]
