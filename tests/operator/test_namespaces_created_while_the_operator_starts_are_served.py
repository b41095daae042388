"""A namespace created while the operator starts is served like any other.

With namespace patterns (ENGINEWRIGHT_NAMESPACES=n-*) kopf lists the namespaces, then starts a watch
stream that lists them again and watches from there. Its namespace processor skips the items of that
second listing, so a namespace created between the two listings was never served: its TuningRuns got
no status, ever (CI: a run applied right after the operator came up waited 300 s with an empty status).
Here namespaces are created one after another while an operator starts, until it has been up a
while; then each gets a run the operator can only stall (no store Secret: it names the Secret at
once, without Jobs or the store). Every run must get that status."""

from __future__ import annotations

import threading
import time
import uuid

from enginewright.api.names import GROUP, PLURAL, VERSION
from tests.cluster.harness import wait_for
from tests.cluster.operator_process import start_operator
from tests.operator.conftest import RUNS_BUCKET, condition, manifest

PREFIX = "n-"
EVERY = 0.02  # seconds between namespaces
AFTER_UP = 2.0  # keep creating them this long after the health endpoint answers


def test_runs_in_namespaces_created_while_the_operator_starts_get_a_status(cluster, api, crd_installed, tmp_path):
    from kubernetes import client

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    created: list[str] = []
    stop = threading.Event()

    def create_namespaces() -> None:
        while not stop.is_set():
            name = f"{PREFIX}{uuid.uuid4().hex[:8]}"
            core.create_namespace({"metadata": {"name": name}})
            created.append(name)
            stop.wait(EVERY)

    creator = threading.Thread(target=create_namespaces, daemon=True)
    creator.start()
    operator = start_operator(cluster, tmp_path / "operator.log", RUNS_BUCKET, ENGINEWRIGHT_NAMESPACES=f"{PREFIX}*")
    try:
        # namespaces keep coming for a fixed while after the operator is up: not a wait for a state
        time.sleep(AFTER_UP)
        stop.set()
        creator.join(timeout=30)
        assert len(created) > 20, created
        for name in created:
            custom.create_namespaced_custom_object(GROUP, VERSION, name, PLURAL, manifest("served", knobs=[]))

        def unserved() -> list[str]:
            left = []
            for name in created:
                run = custom.get_namespaced_custom_object(GROUP, VERSION, name, PLURAL, "served")
                if condition(run.get("status") or {}, "Stalled").get("status") != "True":
                    left.append(name)
            return left

        try:
            wait_for(lambda: not unserved(), 180, "every run to be stalled for its missing store Secret", 1.0)
        except TimeoutError:
            left = unserved()
            raise AssertionError(f"{len(left)} of {len(created)} namespaces' runs got no status: {left[:10]}") from None
        run = custom.get_namespaced_custom_object(GROUP, VERSION, created[0], PLURAL, "served")
        assert "enginewright-store" in condition(run["status"], "Stalled")["message"], run["status"]
    finally:
        stop.set()
        for name in created:  # the runs first, while the operator can still remove its finalizer
            try:
                custom.delete_namespaced_custom_object(GROUP, VERSION, name, PLURAL, "served")
            except client.ApiException as exc:
                if exc.status != 404:
                    raise

        def runs_left() -> list[str]:
            items = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
            return [r["metadata"]["namespace"] for r in items if r["metadata"]["namespace"] in created]

        try:  # gone before the operator stops: else their namespaces stay Terminating in the shared cluster
            wait_for(lambda: not runs_left(), 120, "the runs' finalizers to be removed", 0.5)
        finally:
            for name in created:
                core.delete_namespace(name)
            operator.stop()
