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

THRESHOLD = 1e-4
PAIRS = 2  # reference pairs (the API asks for at least two)
KNOBS = [{"name": "compile", "values": ["false"]}, {"name": "freezing", "values": ["true"]}]
# Two paired rounds a route: their interval is wide, so the sweep places nothing and the candidates go
# to the confirmation round (what this test is about, not the speed of a tiny MLP on a shared CPU).
TIMING = {"warmupIterations": 2, "roundSeconds": 0.005, "minRounds": 2, "maxRounds": 2}


@pytest.fixture(scope="module")
def mlp_in_store(s3, tmp_path_factory):
    """A tiny exported MLP and one reference pair, in the store under inductor/."""
    try:
        import torch
    except ImportError:
        pytest.fail("no torch in the test venv: `make setup` (or `make torch`) installs CPU torch")
    folder = tmp_path_factory.mktemp("inductor-mlp")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    exported = torch.export.export(model, (torch.zeros(4, 8),))
    (name,) = [s.arg.name for s in exported.graph_signature.input_specs
               if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    torch.export.save(exported, str(folder / "model.pt2"))
    for i in range(PAIRS):
        x = np.random.default_rng(i).standard_normal((4, 8)).astype(np.float32)
        with torch.no_grad():
            y = model(torch.from_numpy(x)).numpy()
        np.savez(folder / f"inputs-{i}.npz", **{name: x})
        np.savez(folder / f"references-{i}.npz", output=y)
    for bucket in (MODELS_BUCKET, RUNS_BUCKET):
        if not s3.bucket_exists(bucket):
            s3.make_bucket(bucket)
    for file in ["model.pt2", *(f"{kind}-{i}.npz" for kind in ("inputs", "references") for i in range(PAIRS))]:
        s3.fput_object(MODELS_BUCKET, f"inductor/{file}", str(folder / file))
    return folder


def inductor_run(name: str, mode: str, **search) -> dict:
    return {"apiVersion": "tuning.enginewright.io/v1alpha1", "kind": "TuningRun", "metadata": {"name": name},
            "spec": {
                "model": {"uri": f"s3://{MODELS_BUCKET}/inductor/model.pt2", "format": "torch-export"},
                "compiler": {"name": "inductor", "settings": {"device": "cpu"}},
                "search": {"mode": mode, "knobs": KNOBS, "routesPerJob": 8, "confirm": {"topK": 2, "rounds": 3},
                           **search},
                "accuracy": {"metric": "cosine", "threshold": THRESHOLD, "pairs": [
                    {"inputs": f"s3://{MODELS_BUCKET}/inductor/inputs-{i}.npz",
                     "references": f"s3://{MODELS_BUCKET}/inductor/references-{i}.npz"} for i in range(PAIRS)]},
                "timing": TIMING,
                "publish": {"modelName": name},
                "targets": [{"gpuType": "cpu", "gpusPerJob": 0}]}}


def probe_of(s3, run_namespace: str, name: str) -> ProbeResult:
    (key,) = [o.object_name for o in s3.list_objects(RUNS_BUCKET, f"runs/{run_namespace}/{name}-", recursive=True)
              if o.object_name.endswith("/probe.json")]
    return ProbeResult.model_validate_json(s3.get_object(RUNS_BUCKET, key).read())


def test_full_search_never_combines_the_exclusive_eager_route(cluster, operator, run_namespace, s3, mlp_in_store):
    apply(cluster, run_namespace, inductor_run("inductor-plan", "full", dryRun=True))
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
    apply(cluster, run_namespace, inductor_run("inductor-mlp", "mixed"))
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
