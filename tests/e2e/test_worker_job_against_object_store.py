"""A tuning Job runs the worker on a CPU node through the real scheduler and Job controller: it reads
the model and reference pairs from the S3 server, writes one cache entry per route there, and keeps
the default engine. It runs with no Kubernetes token, S3 credentials from a Secret. A digest that
does not match the pin fails the Job with a message that says so."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from enginewright.api.cache import CacheEntry
from enginewright.api.models import TuningRunSpec
from enginewright.api.routes import Route, parse_route
from enginewright.measure.paired import load_key
from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY
from tests.conftest import assert_stopped_where_settled, get_json, wait_for

SPEC = yaml.safe_load(Path("examples/tuningrun-onnx-fast.yaml").read_text())["spec"]


@pytest.fixture(scope="module")
def uploaded(s3, tmp_path_factory):
    sys.path.insert(0, str(Path("examples").resolve()))
    from make_example import write_example

    folder = tmp_path_factory.mktemp("example")
    write_example(folder)
    if not s3.bucket_exists("enginewright-models"):
        s3.make_bucket("enginewright-models")
    if not s3.bucket_exists("enginewright"):
        s3.make_bucket("enginewright")
    for name in ("mlp.onnx", "inputs-0.npz", "inputs-1.npz", "references-0.npz", "references-1.npz"):
        s3.fput_object("enginewright-models", f"example/{name}", str(folder / name))
    return folder


def worker_job(cluster, namespace, name, spec, routes):
    batch = {
        "target": "cpu",
        "stage": "stage1",
        "batch": "stage1-b000",
        "bucket": "enginewright",
        "prefix": f"runs/{namespace}/{name}/cpu",
        "routes": routes,
        "defaultRoute": "",
        "spec": spec,
    }
    env = [
        {"name": "ENGINEWRIGHT_BATCH", "value": json.dumps(batch)},
        {"name": "ENGINEWRIGHT_S3_ENDPOINT", "value": cluster.s3_endpoint},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "access"}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "secret"}}},
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"nvidia.com/gpu.product": "cpu"},
                    "containers": [
                        {
                            "name": "worker",
                            "image": "enginewright/worker:dev",
                            "command": [sys.executable, "-m", "enginewright.worker"],
                            "env": env,
                        }
                    ],
                }
            },
        },
    }


def finished(cluster, namespace, name):
    conditions = get_json(cluster, "job", name, "-n", namespace).get("status", {}).get("conditions", [])
    return next((c["type"] for c in conditions if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None)


def test_worker_job_writes_entries_and_engines_to_the_store(cluster, namespace, s3, uploaded):
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "s3",
        "-n",
        namespace,
        f"--from-literal=access={S3_ACCESS_KEY}",
        f"--from-literal=secret={S3_SECRET_KEY}",
    )
    spec = {**SPEC, "timing": {"warmupIterations": 2, "roundSeconds": 0.01, "minRounds": 2, "maxRounds": 3}}
    routes = ["", "-enable_mem_pattern=0", "-graph_optimization_level=basic"]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(worker_job(cluster, namespace, "tune-b000", spec, routes)))
    assert (
        wait_for(lambda: finished(cluster, namespace, "tune-b000"), 180, "the worker Job to finish", 0.5) == "Complete"
    )

    prefix = f"runs/{namespace}/tune-b000/cpu/"
    keys = sorted(o.object_name for o in s3.list_objects("enginewright", prefix=prefix, recursive=True))
    ids = [Route.of(parse_route(r)).id for r in routes]
    assert [k for k in keys if "/entries/" in k] == sorted(f"{prefix}entries/{i}.json" for i in ids)
    assert f"{prefix}engines/{ids[0]}.ort.tar" in keys  # the default engine is always kept
    for i in ids:
        entry = CacheEntry.from_json(s3.get_object("enginewright", f"{prefix}entries/{i}.json").read())
        assert entry.outcome.value == "ok" and entry.timing.median_ms > 0
        assert entry.versions.node == "cpu-0"
        assert entry.baseline_ms > 0 and max(entry.loss.values()) < 0.001
    pod = get_json(cluster, "pods", "-n", namespace, "-l", "job-name=tune-b000")["items"][0]
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_a_model_that_does_not_match_its_pin_fails_the_job_clearly(cluster, namespace, s3, uploaded):
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "s3",
        "-n",
        namespace,
        f"--from-literal=access={S3_ACCESS_KEY}",
        f"--from-literal=secret={S3_SECRET_KEY}",
    )
    spec = {**SPEC, "model": {**SPEC["model"], "sha256": "0" * 64}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(worker_job(cluster, namespace, "pinned", spec, [""])))
    assert wait_for(lambda: finished(cluster, namespace, "pinned"), 120, "the Job to finish", 0.5) == "Failed"
    pod = get_json(cluster, "pods", "-n", namespace, "-l", "job-name=pinned")["items"][0]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 2
    log = (cluster.pod_logs / f"{namespace}_{pod['metadata']['name']}_worker.log").read_text()
    assert "spec.model.sha256 pins 0000" in log
    assert not list(s3.list_objects("enginewright", prefix=f"runs/{namespace}/pinned/", recursive=True))


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing model", "no object s3://enginewright-models/example/nothing.onnx (NoSuchKey)"),
        ("corrupt model", "is not a valid onnx model"),
        ("inputs do not fit", "dimension 0 must be 8"),
    ],
)
def test_bad_inputs_fail_fast_with_a_message_naming_them(cluster, s3, uploaded, tmp_path, case, message):
    import io
    import subprocess

    import numpy as np

    spec = json.loads(json.dumps(SPEC))
    if case == "missing model":
        spec["model"]["uri"] = "s3://enginewright-models/example/nothing.onnx"
    elif case == "corrupt model":
        s3.put_object("enginewright-models", "example/corrupt.onnx", io.BytesIO(b"\x08garbage" * 100), 800)
        spec["model"]["uri"] = "s3://enginewright-models/example/corrupt.onnx"
    else:
        buffer = io.BytesIO()
        np.savez(buffer, image=np.zeros((2, 3, 32, 32), dtype=np.float32))
        s3.put_object(
            "enginewright-models", "example/small-inputs.npz", io.BytesIO(buffer.getvalue()), len(buffer.getvalue())
        )
        spec["accuracy"]["pairs"][0]["inputs"] = "s3://enginewright-models/example/small-inputs.npz"
    batch = {
        "target": "cpu",
        "batch": "stage1-b000",
        "bucket": "enginewright",
        "prefix": "runs/bad/x/cpu",
        "routes": [""],
        "spec": spec,
    }
    env = {**cluster.env, "ENGINEWRIGHT_BATCH": json.dumps(batch)}
    done = subprocess.run(
        [sys.executable, "-m", "enginewright.worker", "--workdir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "bad input" in done.stderr and message in done.stderr
    assert "Traceback" not in done.stderr


def test_confirm_mode_interleaves_kept_engines_and_writes_the_rounds(cluster, s3, uploaded, tmp_path):
    import subprocess

    spec = {
        **SPEC,
        "timing": {"warmupIterations": 2, "roundSeconds": 0.01, "minRounds": 2, "maxRounds": 3},
        "search": {**SPEC["search"], "saveAllEngines": True, "confirm": {"topK": 2, "rounds": 4, "loads": 3}},
    }
    routes = ["-enable_mem_pattern=0", "-enable_cpu_mem_arena=0"]
    batch = {
        "target": "cpu",
        "batch": "stage1-b000",
        "bucket": "enginewright",
        "prefix": "runs/confirm/r/cpu",
        "routes": ["", *routes],
        "spec": spec,
    }

    def worker(request):
        env = {**cluster.env, "ENGINEWRIGHT_BATCH": json.dumps(request)}
        return subprocess.run(
            [sys.executable, "-m", "enginewright.worker", "--workdir", str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    swept = worker(batch)
    assert swept.returncode == 0, swept.stderr
    confirmed = worker({**batch, "mode": "confirm", "batch": "confirm-0", "routes": routes})
    assert confirmed.returncode == 0, confirmed.stderr
    from enginewright.api.contracts import ConfirmationResult

    result = ConfirmationResult.model_validate_json(
        s3.get_object("enginewright", "runs/confirm/r/cpu/confirm/confirm-0.json").read()
    )
    ids = {Route.of(parse_route(r)).id for r in ["", *routes]}
    # every engine, the default too, loaded `confirm.loads` times and every load timed in every round
    assert set(result.rounds) == {load_key(i, n) for i in ids for n in range(3)}
    assert len({len(v) for v in result.rounds.values()}) == 1
    # all 4 rounds, or 3 when no candidate could still be confirmed by then (the worker's early stop)
    margin = TuningRunSpec.model_validate(spec).search.noise_margin
    assert assert_stopped_where_settled(result.rounds, Route.of({}).id, margin, 4) in (3, 4)
    # the rounds only: the controller's flow decides from them (test_tuning_flow_steps.py)
    assert set(result.model_dump()) == {"batch", "rounds"}
