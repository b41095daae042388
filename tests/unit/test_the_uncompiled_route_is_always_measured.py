"""Not compiling is a route: Inductor's compile=false is measured in stage 1 as the default is, also
when the user names the knobs to sweep or pins some, unless they pin it or leave it out
(`spec.search.measureUncompiled: false`, `tune --no-uncompiled`)."""

from types import SimpleNamespace

import pytest

from enginewright.api.models import TuningRunSpec
from enginewright.backends.inductor import discover_knobs
from enginewright.search.flow import FlowSpec, Observed, RunBatches, next_step


def knobs():
    config = SimpleNamespace(
        max_autotune=False,
        max_autotune_gemm_backends="ATEN,TRITON",
        epilogue_fusion=True,
        freezing=False,
        coordinate_descent_tuning=False,
        triton=SimpleNamespace(cudagraphs=False),
    )
    return discover_knobs(config, "cuda")


def stage1(spec: FlowSpec) -> list[dict]:
    step = next_step(spec, Observed(knobs()))
    assert isinstance(step, RunBatches)
    return [r.as_dict for b in step.batches for r in b.routes]


@pytest.mark.parametrize("mode", ["fast", "mixed", "full"])
def test_named_knobs_still_measure_the_uncompiled_route(mode):
    routes = stage1(FlowSpec(mode=mode, knobs=(("triton.cudagraphs", ("true",)), ("freezing", ("true",)))))
    assert {"compile": "false"} in routes
    assert not any("compile" in r and len(r) > 1 for r in routes)  # never combined with other options


def test_pins_do_not_leave_it_out_and_it_carries_none_of_them():
    routes = stage1(FlowSpec(mode="fast", knobs=(("triton.cudagraphs", ("true",)),), pinned={"freezing": "true"}))
    assert {"compile": "false"} in routes and {"freezing": "true"} in routes


def test_pinning_it_or_turning_it_off_leaves_it_out():
    assert {"compile": "false"} not in stage1(
        FlowSpec(mode="fast", knobs=(("freezing", ("true",)),), pinned={"compile": "true"})
    )
    assert {"compile": "false"} not in stage1(
        FlowSpec(mode="fast", knobs=(("freezing", ("true",)),), measure_uncompiled=False)
    )
    assert {"compile": "false"} not in stage1(FlowSpec(mode="fast", measure_uncompiled=False))


def test_the_tuning_run_field_reaches_the_flow():
    spec = TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/m.pt2", "format": "torch-export"},
            "compiler": {"name": "inductor"},
            "accuracy": {"disabled": True, "reason": "test"},
            "targets": [{"gpuType": "NVIDIA-H200"}],
            "search": {"knobs": [{"name": "freezing", "values": ["true"]}], "measureUncompiled": False},
        }
    )
    assert FlowSpec.of(spec).measure_uncompiled is False
    assert (
        FlowSpec.of(
            spec.model_copy(update={"search": spec.search.model_copy(update={"measure_uncompiled": True})})
        ).measure_uncompiled
        is True
    )
