"""A TuningPolicy through two driver changes, end to end: real worker Jobs (ONNX Runtime, the
example model) on a node of a GPU type of the test's own, run by a node agent of its own, publishing
to the real store, with an operator of its own (namespaces `p-*`, the policy checked every 0.5 s).

The first run, on driver 550, publishes its winner; the node's `nvidia.com/cuda.driver.major` then
becomes 560, and later 570. Whatever the measurements decide, the catalog ends with an entry per
stack, each older one kept and marked superseded by the run now current for the next stack, and
`enginewright fetch --driver-major N` hands a consumer on each driver that run's engine, byte for
byte as published (its sha256 in the run's status, the index and the provenance).

Which way the policy goes at each change is decided by real measurements (the template's default
route runs 4 intra-op threads on 2-core machines, its one knob value 2: usually faster, not always
on a busy machine):

- the current run published the default: nothing to re-measure, the full re-tune runs at once;
- else the re-measure run (the default and the winner only) decides: WinnerConfirmed, its own
  entry is the one for the new stack; or WinnerRegressed, the full re-tune runs and its entry is.

At 560 the template is as it was: the re-measure usually confirms. Before 570 the template's base
settings take the winner's knob (an edit starts no run), so the winner is the default route as the
template builds it now (`controller.policy.over_base`): there is nothing to re-measure it against and
the full re-tune starts at once, as for a published default (before, the re-measure measured the
default alone and called it a regression). The test prints the branch each change took. After a
regression the older entry's mark names the full re-tune, not the re-measure that published for the
stack before it (before `catalog.writer.superseded` moved a mark to a newer entry of the same stack,
it named the re-measure).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from enginewright.api.policy import Stack
from enginewright.api.routes import parse_route
from enginewright.controller.policy import over_base, remeasure_name, run_name, same_route
from enginewright.controller.settings import Settings
from tests.cluster.harness import wait_for
from tests.cluster.operator_process import create_store_secret
from tests.conftest import get_json
from tests.operator import (
    test_a_policy_retunes_when_a_nodes_driver_changes as driver_test,
    test_gpu_pools_that_scale_from_zero as pools_test,
)
from tests.operator.conftest import FAST_TIMING, RUNS_BUCKET, manifest, wait_condition
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import (
    DRIVER,
    policy,
    policy_doc,
    recorded,
    start_policy_operator,
)

p_namespace, new_node = driver_test.p_namespace, pools_test.new_node  # those tests' fixtures

SETTINGS = {"intra_op_num_threads": "4"}  # twice the cores of the machines the tests run on
KNOBS = [{"name": "intra_op_num_threads", "values": ["2"]}]


@pytest.fixture
def store_namespace(cluster, p_namespace, example_in_store):
    create_store_secret(cluster, p_namespace)
    return p_namespace


@pytest.fixture
def policy_operator(cluster, tmp_path):
    running = start_policy_operator(cluster, tmp_path / "operator.log")
    yield running
    running.stop()
    running.assert_clean()


def index(s3, model: str) -> dict[str, dict]:
    """The model's catalog index entries by the name of the run that published them."""
    doc = json.loads(s3.get_object(RUNS_BUCKET, f"catalog/{model}/index.json").read())
    return {e["run"].split("/", 1)[1]: e for e in doc["entries"]}


def fetch(cluster, dest, model: str, gpu_type: str, driver: str, *more: str) -> tuple[dict, bytes]:
    """`enginewright fetch` as a consumer on driver major `driver` runs it (`more`: its other
    arguments, e.g. --run): its JSON and the engine."""
    done = subprocess.run(
        [
            sys.executable, "-m", "enginewright", "fetch", "--catalog", f"s3://{RUNS_BUCKET}", "--model", model,
            "--gpu", gpu_type, "--driver-major", driver, "--dest", str(dest), "--json", *more,
        ],
        env=cluster.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), (dest / "engine.ort.tar").read_bytes()


def settled(cluster, namespace: str, runs: tuple[str, str]) -> tuple[dict, dict]:
    """The policy's target and its current run's target status, once that run is one of `runs` (the
    re-measure or the full re-tune for the new stack) and Ready, and no re-measure is pending: the
    policy has nothing left to do."""

    def done():
        (target,) = policy(cluster, namespace).get("status", {}).get("targets") or [{}]
        if target.get("run") not in runs or target.get("remeasure"):
            return None
        status = get_json(cluster, "trun", target["run"], "-n", namespace).get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        return (target, status["targets"][0]) if ready else None

    return wait_for(done, 240, f"the policy to settle on one of {runs}", 0.5)


def node_of_its_own(cluster, new_node, prefix: str, namespace: str) -> tuple[str, str]:
    """A node of a GPU type of the test's own (`<PREFIX>-<namespace>`), labelled with driver 550, its
    node agent started (`new_node`); (GPU type, node name). Registered before the policy's first
    check, so the first run is named for driver 550."""
    gpu_type, node = f"{prefix.upper()}-{namespace[2:].upper()}", f"{prefix}-{namespace[2:]}"
    new_node(node, {"nvidia.com/gpu.product": gpu_type, DRIVER: "550"}, gpus=0)
    wait_for(lambda: cluster.kubectl("get", "node", node, check=False).returncode == 0, 60, f"node {node}", 0.2)
    return gpu_type, node


def change_driver(
    cluster, namespace: str, node: str, gpu_type: str, before: tuple[str, dict], driver: str, base: dict[str, str]
):
    """Label the node with driver major `driver` and wait for the policy to settle; returns the branch it
    took, and the run now current for the new stack with its target status. `before`: the run current
    until now and its target status (what it published); `base`: the template's settings now."""
    winner = over_base(before[1]["winner"]["route"], base)
    stack = Stack(driver_major=driver, compiler_image=Settings().default_image("onnxruntime"))
    check, full = remeasure_name("mlp", gpu_type, stack), run_name("mlp", gpu_type, stack)
    cluster.kubectl("label", "node", node, f"{DRIVER}={driver}", "--overwrite")
    target, current = settled(cluster, namespace, (check, full))
    if not winner:
        branch = "the default was published: the full re-tune at once"  # (or the winner is now the base)
        assert target["run"] == full and target["reason"] == "DriverMajorChanged", target
        assert target["runs"][-2:] == [before[0], full], target
    elif target["reason"] == "WinnerConfirmed":
        branch = "the re-measure confirmed the winner"
        assert target["run"] == check and same_route(current["winner"]["route"]) == winner, (target, current)
        assert target["runs"][-2:] == [before[0], check], target
    else:
        branch = "the re-measure kept the default: the full re-tune"
        assert target["run"] == full and target["reason"] == "WinnerRegressed", target
        assert target["runs"][-3:] == [before[0], check, full], target
    now = current["winner"]["route"] or "(default)"
    print(f"\ndriver {driver}: {branch} (was {winner or '(default)'}, now {now}: {current['decision']})")
    return branch, target["run"], current


def test_a_policy_through_two_driver_changes_publishes_an_entry_per_stack(
    cluster, store_namespace, new_node, policy_operator, s3, tmp_path
):
    namespace = store_namespace
    gpu_type, node = node_of_its_own(cluster, new_node, "policy-e2e", namespace)
    model = f"policy-e2e-{namespace}"  # a catalog model of this namespace's own
    template = manifest("unused", knobs=KNOBS)["spec"]
    template.update(
        targets=[{"gpuType": gpu_type, "gpusPerJob": 0}],
        publish={"modelName": model},
        timing={**FAST_TIMING, "roundSeconds": 0.05},
    )
    template["compiler"]["settings"] = dict(SETTINGS)
    template["search"]["confirm"] = {"topK": 1, "rounds": 3, "loads": 4}
    doc = policy_doc(template)
    stack = Stack(driver_major="550", compiler_image=Settings().default_image("onnxruntime"))
    first = run_name("mlp", gpu_type, stack)  # (the test operator sets no worker image)
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
        recorded(cluster, namespace, first)
        (measured,) = wait_condition(cluster, namespace, first, "Ready", 240)["targets"]
        print(f"\ndriver 550: the first run: {measured['decision']}")
        entries = index(s3, model)
        assert list(entries) == [first] and entries[first]["stack"]["driverMajor"] == "550", entries
        current = {"550": (first, measured)}

        # 560, the template as it is: the winner usually keeps winning.
        _, run, status = change_driver(cluster, namespace, node, gpu_type, current["550"], "560", SETTINGS)
        current["560"] = (run, status)

        # 570, the default first given the winner's setting (an edit starts no run by itself): the
        # winner is then the default route as built, so the full re-tune starts at once.
        settings = {**SETTINGS, **parse_route(status["winner"]["route"])}
        cluster.kubectl(
            "patch", "tpol", "mlp", "-n", namespace, "--type=merge",
            "-p", json.dumps({"spec": {"template": {"compiler": {"settings": settings}}}}),
        )  # fmt: skip
        branch, run, status = change_driver(cluster, namespace, node, gpu_type, current["560"], "570", settings)
        current["570"] = (run, status)
        assert branch == "the default was published: the full re-tune at once", branch

        # The catalog: an entry per stack, each older one kept and marked superseded by the run now
        # current for the next stack (a re-measure that kept the default published for its stack
        # too, before its full re-tune: the mark names the re-tune).
        entries = index(s3, model)
        drivers = list(current)
        for older, newer in zip(drivers, drivers[1:] + [None]):
            run, status = current[older]
            entry = entries[run]
            assert entry["stack"]["driverMajor"] == older and entry["sha256"] == status["engineSha256"], entry
            if newer is None:
                assert "supersededBy" not in entry, entry
            else:
                mark = entry["supersededBy"]
                assert mark["run"] == f"{namespace}/{current[newer][0]}" and mark["stack"]["driverMajor"] == newer

        # A consumer gets the engine measured on its own driver, byte for byte as published.
        for driver, (run, status) in current.items():
            out, engine = fetch(cluster, tmp_path / driver, model, gpu_type, driver)
            assert out["driverMajor"] == driver and f"on driver major {driver}" in out["selection"], out
            assert hashlib.sha256(engine).hexdigest() == status["engineSha256"] == out["sha256"], out
            assert out["runUid"] == entries[run]["runUid"]
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", namespace, "--timeout=60s", check=False)
