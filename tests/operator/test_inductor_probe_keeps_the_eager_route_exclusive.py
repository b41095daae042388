"""The operator plans an Inductor run from what its probe Job found, `exclusive` included: a full-search
dry run of a tiny exported MLP (real PyTorch on CPU, the probe run as a host process) lists the eager
route (`compile=false`) alone and never combined with another knob, while the other knobs are. The
controller used to rebuild the probe's knobs field by field and drop `exclusive`, and planned
`-compile=false -freezing=true`, a route that fails to build."""

from __future__ import annotations

import pytest

from enginewright.api.contracts import ProbeResult
from tests.conftest import get_json
from tests.operator.conftest import MODELS_BUCKET, RUNS_BUCKET, apply, wait_condition
from tests.operator.inductor_mlp import inductor_run, put_mlp

KNOBS = [
    {"name": "compile", "values": ["false"]},
    {"name": "freezing", "values": ["true"]},
    {"name": "shape_padding", "values": ["false"]},
]


@pytest.fixture(scope="module")
def mlp_in_store(s3, tmp_path_factory):
    return put_mlp(s3, tmp_path_factory.mktemp("inductor-mlp"), MODELS_BUCKET, RUNS_BUCKET)


def probe_of(s3, run_namespace: str, name: str) -> ProbeResult:
    (key,) = [
        o.object_name
        for o in s3.list_objects(RUNS_BUCKET, f"runs/{run_namespace}/{name}-", recursive=True)
        if o.object_name.endswith("/probe.json") and "/requests/" not in o.object_name
    ]  # (not the probe's request)
    return ProbeResult.model_validate_json(s3.get_object(RUNS_BUCKET, key).read())


def test_full_search_never_combines_the_exclusive_eager_route(cluster, operator, run_namespace, s3, mlp_in_store):
    apply(cluster, run_namespace, inductor_run("inductor-plan", "full", KNOBS, MODELS_BUCKET, dryRun=True))
    wait_condition(cluster, run_namespace, "inductor-plan", "Ready", 180)
    plan = get_json(cluster, "cm", "inductor-plan-plan-cpu", "-n", run_namespace)["data"]["routes.txt"]
    routes = [line.split(" ", 2)[2] for line in plan.splitlines() if line]
    assert sorted(routes) == [
        "(default)",
        "-compile=false",
        "-freezing=true",
        "-freezing=true -shape_padding=false",
        "-shape_padding=false",
    ], plan
    probe = probe_of(s3, run_namespace, "inductor-plan")
    assert next(k for k in probe.knobs if k.name == "compile").exclusive
    operator.assert_clean()
