"""A TuningPolicy through a driver change, end to end: real worker Jobs (ONNX Runtime, the example
model) on a node of a GPU type of the test's own, run by a node agent of its own, publishing to the
real store, with an operator of its own (namespaces `p-*`, the policy checked every 0.5 s).

The first run, on driver 550, publishes its winner; the node's `nvidia.com/cuda.driver.major` then
becomes 560, and whatever the measurements decide, the catalog ends with an entry per stack: the 550
entry kept and marked superseded by the run now current for 560, and `enginewright fetch` handing a
consumer on 550 the first run's engine and one on 560 the new run's, byte for byte as published.

Which way the policy goes is decided by real measurements (the template's default route runs 4
intra-op threads on 2-core machines, its one knob value 2: usually faster, not always on a busy one):

- the first run keeps the default: nothing to re-measure, the full re-tune for 560 runs at once;
- else the re-measure run (the default and the winner only) decides: WinnerConfirmed, its own
  entry is the one for 560; or WinnerRegressed, the full re-tune runs and its entry is.

`test_a_winner_the_default_has_caught_up_with_is_re_tuned` makes the winner lose honestly: before
the driver changes, the template's base settings take the winner's knob, so the re-measure compares
two identical settings and the winner cannot be confirmed faster (WinnerRegressed, unless the first
run kept the default). `test_a_winner_that_keeps_winning_...` leaves the template as it is, so the
re-measure usually confirms. Each test prints the branch it took. In the regressed branch the 550
entry's mark names the full re-tune, not the re-measure that published for 560 before it (before
`catalog.writer.superseded` moved a mark to a newer entry of the same stack, it named the re-measure).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from enginewright.api.policy import Stack
from enginewright.api.routes import parse_route
from enginewright.controller.policy import remeasure_name, run_name, same_route
from enginewright.controller.settings import Settings
from tests.cluster.harness import wait_for
from tests.cluster.operator_process import create_store_secret, start_operator
from tests.conftest import get_json
from tests.operator import (
    test_a_policy_retunes_when_a_nodes_driver_changes as driver_test,
    test_gpu_pools_that_scale_from_zero as pools_test,
)
from tests.operator.conftest import FAST_TIMING, RUNS_BUCKET, TEST_INTERVAL, Operator, manifest, wait_condition
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import DRIVER, policy, recorded

p_namespace, new_node = driver_test.p_namespace, pools_test.new_node  # those tests' fixtures

SETTINGS = {"intra_op_num_threads": "4"}  # twice the cores of the machines the tests run on
KNOBS = [{"name": "intra_op_num_threads", "values": ["2"]}]


@pytest.fixture
def store_namespace(cluster, p_namespace, example_in_store):
    create_store_secret(cluster, p_namespace)
    return p_namespace


@pytest.fixture
def policy_operator(cluster, tmp_path):
    started = start_operator(
        cluster,
        tmp_path / "operator.log",
        RUNS_BUCKET,
        ENGINEWRIGHT_NAMESPACES="p-*",
        ENGINEWRIGHT_RECONCILE_INTERVAL=TEST_INTERVAL,
        ENGINEWRIGHT_POLICY_INTERVAL="0.5",
    )
    running = Operator(started.process, started.log, started.metrics_port, started.health_port)
    yield running
    running.stop()
    running.assert_clean()


def index(s3, model: str) -> dict[str, dict]:
    """The model's catalog index entries by the name of the run that published them."""
    doc = json.loads(s3.get_object(RUNS_BUCKET, f"catalog/{model}/index.json").read())
    return {e["run"].split("/", 1)[1]: e for e in doc["entries"]}


def fetch(cluster, dest, model: str, gpu_type: str, driver: str) -> tuple[dict, bytes]:
    """`enginewright fetch` as a consumer on driver major `driver` runs it: its JSON and the engine."""
    done = subprocess.run(
        [
            sys.executable, "-m", "enginewright", "fetch", "--catalog", f"s3://{RUNS_BUCKET}", "--model", model,
            "--gpu", gpu_type, "--driver-major", driver, "--dest", str(dest), "--json",
        ],
        env=cluster.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), (dest / "engine.ort.tar").read_bytes()


def settled(cluster, namespace: str, runs: tuple[str, str]) -> dict:
    """The policy's target once its current run is one of `runs` (the re-measure or the full re-tune for
    the new stack), that run is Ready, and no re-measure is pending: the policy has nothing left to do."""

    def done():
        (target,) = policy(cluster, namespace).get("status", {}).get("targets") or [{}]
        if target.get("run") not in runs or target.get("remeasure"):
            return None
        status = get_json(cluster, "trun", target["run"], "-n", namespace).get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        return (target, status["targets"][0]) if ready else None

    return wait_for(done, 240, f"the policy to settle on one of {runs}", 0.5)


def through_a_driver_change(cluster, namespace, new_node, s3, tmp_path, *, winner_catches_up: bool) -> str:
    """Run the policy through 550 -> 560 and check the catalog and fetch; returns the branch taken."""
    gpu_type = f"POLICY-E2E-{namespace[2:].upper()}"
    node = f"policy-e2e-{namespace[2:]}"
    new_node(node, {"nvidia.com/gpu.product": gpu_type, DRIVER: "550"}, gpus=0)
    # Registered before the policy's first check, so the first run is named for driver 550.
    wait_for(lambda: cluster.kubectl("get", "node", node, check=False).returncode == 0, 60, f"node {node}", 0.2)
    model = f"policy-e2e-{namespace}"  # a catalog model of this namespace's own
    template = manifest("unused", knobs=KNOBS)["spec"]
    template.update(
        targets=[{"gpuType": gpu_type, "gpusPerJob": 0}],
        publish={"modelName": model},
        timing={**FAST_TIMING, "roundSeconds": 0.05},
    )
    template["compiler"]["settings"] = dict(SETTINGS)
    template["search"]["confirm"] = {"topK": 1, "rounds": 3, "loads": 4}
    doc = {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningPolicy",
        "metadata": {"name": "mlp"},
        "spec": {"template": template},
    }
    image = Settings().default_image("onnxruntime")  # the test operator sets no worker image
    old = Stack(driver_major="550", compiler_image=image, model_digest=None)
    new = old.model_copy(update={"driver_major": "560"})
    first, check, full = (
        run_name("mlp", gpu_type, old),
        remeasure_name("mlp", gpu_type, new),
        run_name("mlp", gpu_type, new),
    )
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
        recorded(cluster, namespace, first)
        (measured,) = wait_condition(cluster, namespace, first, "Ready", 240)["targets"]
        winner = same_route(measured["winner"]["route"])
        entries = index(s3, model)
        assert list(entries) == [first] and entries[first]["stack"]["driverMajor"] == "550", entries
        assert entries[first]["sha256"] == measured["engineSha256"] and same_route(entries[first]["route"]) == winner

        if winner_catches_up:  # the default takes the winner's setting: an edit starts no run by itself
            settings = {**SETTINGS, **parse_route(winner)}
            cluster.kubectl(
                "patch", "tpol", "mlp", "-n", namespace, "--type=merge",
                "-p", json.dumps({"spec": {"template": {"compiler": {"settings": settings}}}}),
            )  # fmt: skip
        cluster.kubectl("label", "node", node, f"{DRIVER}=560", "--overwrite")
        target, current = settled(cluster, namespace, (check, full))
        started = [r["metadata"]["name"] for r in get_json(cluster, "trun", "-n", namespace)["items"]]

        if not winner:
            branch = "the first run kept the default: the full re-tune at once"
            assert target["run"] == full and target["reason"] == "DriverMajorChanged", target
            assert sorted(started) == sorted([first, full])
        elif target["reason"] == "WinnerConfirmed":
            branch = "the re-measure confirmed the winner on 560"
            assert target["run"] == check and same_route(current["winner"]["route"]) == winner, (target, current)
            assert sorted(started) == sorted([first, check])
        else:
            branch = "the re-measure kept the default: the full re-tune"
            assert target["run"] == full and target["reason"] == "WinnerRegressed", target
            assert target["runs"] == [first, check, full] and sorted(started) == sorted([first, check, full])
        print(f"\n{branch}; first run: {measured['decision']}; now {current['winner']['route'] or '(default)'}")

        # The catalog: the 550 entry kept, marked superseded by the run now current for 560.
        entries = index(s3, model)
        latest = entries[target["run"]]
        assert latest["stack"]["driverMajor"] == "560" and latest["sha256"] == current["engineSha256"], entries
        kept = entries[first]
        assert kept["sha256"] == measured["engineSha256"] and kept["stack"]["driverMajor"] == "550"
        assert kept["supersededBy"]["run"] == f"{namespace}/{target['run']}", kept
        assert kept["supersededBy"]["stack"]["driverMajor"] == "560" and "supersededBy" not in latest

        # A consumer gets the engine measured on its own driver, as published.
        for driver, want in (("550", measured), ("560", current)):
            out, engine = fetch(cluster, tmp_path / driver, model, gpu_type, driver)
            assert out["driverMajor"] == driver and f"on driver major {driver}" in out["selection"], out
            assert hashlib.sha256(engine).hexdigest() == want["engineSha256"] == out["sha256"], out
            assert out["runUid"] == entries[first if driver == "550" else target["run"]]["runUid"]
        return branch
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", namespace, "--timeout=60s", check=False)


def test_a_winner_that_keeps_winning_is_published_again_for_the_new_driver(
    cluster, store_namespace, new_node, policy_operator, s3, tmp_path
):
    through_a_driver_change(cluster, store_namespace, new_node, s3, tmp_path, winner_catches_up=False)


def test_a_winner_the_default_has_caught_up_with_is_re_tuned(
    cluster, store_namespace, new_node, policy_operator, s3, tmp_path
):
    branch = through_a_driver_change(cluster, store_namespace, new_node, s3, tmp_path, winner_catches_up=True)
    assert "confirmed" not in branch  # the same settings twice: never confirmed faster than themselves
