"""An Inductor TuningRun through the operator on CPU nodes, with the real PyTorch: a tiny MLP exported
with torch.export, mixed search with the eager route (`compile=false`) beside a compiled knob, a
confirmation round, the winner published; `enginewright fetch` brings the engine back from the
catalog and the fetched engine, loaded, reproduces the reference outputs.

The planner sees the compiler's knobs only through the probe Job's result: a full-search dry run
shows that the eager route, an exclusive knob, is never combined with another knob (the controller
used to drop `exclusive` when it read the probe)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from enginewright.api.cache import CacheEntry
from enginewright.api.contracts import ConfirmationResult, ProbeResult, Provenance
from tests.conftest import get_json
from tests.operator.conftest import MODELS_BUCKET, RUNS_BUCKET, apply, jobs, wait_condition
from tests.operator.inductor_mlp import PAIRS, THRESHOLD, inductor_run, put_mlp

KNOBS = [{"name": "compile", "values": ["false"]}, {"name": "freezing", "values": ["true"]}]


@pytest.fixture(scope="module")
def mlp_in_store(s3, tmp_path_factory):
    return put_mlp(s3, tmp_path_factory.mktemp("inductor-mlp"), MODELS_BUCKET, RUNS_BUCKET)


def probe_of(s3, run_namespace: str, name: str) -> ProbeResult:
    (key,) = [o.object_name for o in s3.list_objects(RUNS_BUCKET, f"runs/{run_namespace}/{name}-", recursive=True)
              if o.object_name.endswith("/probe.json")]
    return ProbeResult.model_validate_json(s3.get_object(RUNS_BUCKET, key).read())


def test_full_search_never_combines_the_exclusive_eager_route(cluster, operator, run_namespace, s3, mlp_in_store):
    apply(cluster, run_namespace, inductor_run("inductor-plan", "full", KNOBS, MODELS_BUCKET, dryRun=True))
    wait_condition(cluster, run_namespace, "inductor-plan", "Ready", 180)
    plan = get_json(cluster, "cm", "inductor-plan-plan-cpu", "-n", run_namespace)["data"]["routes.txt"]
    routes = [line.split(" ", 2)[2] for line in plan.splitlines() if line]
    assert sorted(routes) == ["(default)", "-compile=false", "-freezing=true"], plan
    probe = probe_of(s3, run_namespace, "inductor-plan")
    assert next(k for k in probe.knobs if k.name == "compile").exclusive
    operator.assert_clean()


def test_mixed_run_with_the_eager_route_publishes_an_engine_that_fetch_brings_back_and_serves(
        cluster, operator, run_namespace, s3, mlp_in_store, tmp_path):
    from enginewright.accuracy.metrics import loss
    from enginewright.backends import get_backend
    apply(cluster, run_namespace, inductor_run("inductor-mlp", "mixed", KNOBS, MODELS_BUCKET))
    status = wait_condition(cluster, run_namespace, "inductor-mlp", "Ready", 420)
    assert status["phase"] == "Succeeded"
    (target,) = status["targets"]
    assert target["stage"] == "done" and target["engineUri"].endswith(".inductor.tar"), target

    # every stage-1 route was built and measured, the eager one included, each in its own entry
    prefix = f"runs/{run_namespace}/inductor-mlp-"
    entries = [CacheEntry.from_json(s3.get_object(RUNS_BUCKET, o.object_name).read())
               for o in s3.list_objects(RUNS_BUCKET, prefix, recursive=True) if "/entries/" in o.object_name]
    outcomes = {e.route: e.outcome.value for e in entries}
    assert outcomes == {"": "ok", "-compile=false": "ok", "-freezing=true": "ok"}, outcomes
    assert next(e for e in entries if e.route == "-compile=false").load_info.get("compiled") == 0

    # a confirmation round ran as a Job and wrote its rounds for every engine it timed
    stages = sorted(j["metadata"]["labels"]["tuning.enginewright.io/stage"] for j in jobs(cluster, run_namespace))
    assert stages.count("confirm") == 1, stages
    (confirm_key,) = [o.object_name for o in s3.list_objects(RUNS_BUCKET, prefix, recursive=True)
                      if "/confirm/" in o.object_name]
    confirmation = ConfirmationResult.model_validate_json(s3.get_object(RUNS_BUCKET, confirm_key).read())
    assert len(confirmation.rounds) >= 3 and all(len(r) == 3 for r in confirmation.rounds.values())

    # fetch: the catalog's engine for a CPU node with this torch, verified, with its provenance
    dest = tmp_path / "fetched"
    fetched = subprocess.run([sys.executable, "-m", "enginewright", "fetch", "--catalog", f"s3://{RUNS_BUCKET}",
                              "--model", "inductor-mlp", "--gpu", "cpu", "--dest", str(dest)],
                             env=cluster.env, capture_output=True, text=True, timeout=120)
    assert fetched.returncode == 0, fetched.stderr
    (engine_file,) = [p for p in dest.iterdir() if p.name.startswith("engine")]
    provenance = Provenance.model_validate_json((dest / "provenance.json").read_text())
    engine = engine_file.read_bytes()
    assert hashlib.sha256(engine).hexdigest() == provenance.engine.sha256 == target["engineSha256"]
    assert provenance.route.route == target["winner"]["route"]
    assert provenance.compiler.name == "inductor" and provenance.search.mode == "mixed"

    # the fetched engine, loaded in this process, reproduces the reference outputs
    runner = get_backend("inductor").load(engine, tmp_path / "load")
    try:
        worst = 0.0
        for i in range(PAIRS):
            with np.load(mlp_in_store / f"inputs-{i}.npz") as inputs, \
                    np.load(mlp_in_store / f"references-{i}.npz") as refs:
                outputs = runner.run({k: inputs[k] for k in inputs.files})
                worst = max(worst, *(loss(outputs[name], refs[name], "cosine") for name in refs.files))
    finally:
        runner.close()
    assert worst < THRESHOLD
    assert "fetched s3://" in fetched.stdout
    operator.assert_clean()
