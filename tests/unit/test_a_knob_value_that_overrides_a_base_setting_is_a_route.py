"""A base setting (`spec.compiler.settings`, `tune --setting`) that names a knob is what the default
route is built with: a knob value equal to the compiler's own default but not to the base is a route
of its own (planned, in every mode and in `spec.search.routes`), a value equal to the base is the
default route, and without such settings every route id is as before. A setting naming a knob with a
value the knob does not allow, or naming a knob of a compiler whose build does not read knobs from
its settings (Inductor, TensorRT), is refused when planning, naming the setting."""

import pytest

from enginewright.api.routes import Knob, route_id
from enginewright.search.flow import FlowSpec, Observed, RunBatches, first_step, next_step
from enginewright.search.planners import PlanError, as_built
from tests.unit.entries import measured

KNOBS = [
    Knob("graph_optimization_level", ("disable", "basic", "extended", "all"), "all"),
    Knob("enable_mem_pattern", ("1", "0"), "1"),
    Knob("intra_op_num_threads", None, "0", suggested=("0", "1", "2")),
]
BASE = {"graph_optimization_level": "disable"}


def planned(spec: FlowSpec) -> list[str]:
    return [route.canonical for batch in first_step(spec, KNOBS).batches for route in batch.routes]


def test_the_compilers_default_value_is_a_route_when_the_base_setting_differs():
    spec = FlowSpec(
        mode="fast", knobs=(("graph_optimization_level", ("basic", "all")),), settings=BASE, settings_are_knobs=True
    )
    assert planned(spec) == ["", "-graph_optimization_level=basic", "-graph_optimization_level=all"]
    full = FlowSpec(
        mode="full", knobs=spec.knobs + (("enable_mem_pattern", ("0",)),), settings=BASE, settings_are_knobs=True
    )
    assert "-enable_mem_pattern=0 -graph_optimization_level=all" in planned(full)
    assert len(set(planned(full))) == 3 * 2


def test_a_value_equal_to_the_base_setting_is_the_default_route():
    spec = FlowSpec(
        mode="fast", knobs=(("graph_optimization_level", ("disable", "all")),), settings=BASE, settings_are_knobs=True
    )
    assert planned(spec) == ["", "-graph_optimization_level=all"]
    step = first_step(spec, KNOBS)
    assert step.default.id == route_id("")


def test_listed_routes_are_kept_apart_from_the_default_as_the_base_has_them():
    spec = FlowSpec(
        routes=("-graph_optimization_level=all", "-graph_optimization_level=disable"),
        settings=BASE,
        settings_are_knobs=True,
    )
    assert planned(spec) == ["", "-graph_optimization_level=all"]


def test_the_default_space_sweeps_away_from_the_base_setting():
    threads = FlowSpec(mode="fast", settings={"intra_op_num_threads": "2"}, settings_are_knobs=True)
    routes = planned(threads)
    assert "-intra_op_num_threads=0" in routes and "-intra_op_num_threads=2" not in routes
    assert "-graph_optimization_level=all" in planned(FlowSpec(mode="fast", settings=BASE, settings_are_knobs=True))


def test_mixed_stage_two_combines_the_base_overriding_value():
    knobs = (("graph_optimization_level", ("all",)), ("enable_mem_pattern", ("0",)))
    spec = FlowSpec(mode="mixed", knobs=knobs, settings=BASE, settings_are_knobs=True)
    stage1 = [measured({}, 10.0), measured({"graph_optimization_level": "all"}, 6.0, baseline_ms=10.0)]
    stage1.append(measured({"enable_mem_pattern": "0"}, 8.0, baseline_ms=10.0))
    step = next_step(spec, Observed(KNOBS, {e.route_id: e for e in stage1}))
    assert isinstance(step, RunBatches) and step.stage == "stage2", step
    assert [r.canonical for b in step.batches for r in b.routes] == [
        "-enable_mem_pattern=0 -graph_optimization_level=all"
    ]


def test_without_settings_naming_knobs_the_routes_and_ids_are_unchanged():
    knobs = (("graph_optimization_level", ("basic", "all")), ("enable_mem_pattern", ("0",)))
    before = planned(FlowSpec(mode="full", knobs=knobs))
    assert before == [
        "",
        "-enable_mem_pattern=0",
        "-graph_optimization_level=basic",
        "-enable_mem_pattern=0 -graph_optimization_level=basic",
    ]
    other = {"session.intra_op.allow_spinning": "0", "optimized_model_filepath": "x.onnx"}  # no knob of this list
    assert planned(FlowSpec(mode="full", knobs=knobs, settings=other, settings_are_knobs=True)) == before
    assert as_built(KNOBS, other, settings_are_knobs=True) == KNOBS


def test_a_cluster_spec_brings_its_compiler_settings_to_the_flow():
    from enginewright.api.models import TuningRunSpec

    spec = TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/mlp.onnx"},
            "compiler": {"name": "onnxruntime", "settings": BASE},
            "search": {"mode": "fast", "knobs": [{"name": "graph_optimization_level", "values": ["all"]}]},
            "accuracy": {"disabled": True, "reason": "unit test of planning"},
            "targets": [{"gpuType": "cpu"}],
        }
    )
    step = next_step(FlowSpec.of(spec), Observed(KNOBS))
    assert isinstance(step, RunBatches)
    assert [r.canonical for b in step.batches for r in b.routes] == ["", "-graph_optimization_level=all"]


def inductor_spec(settings: dict[str, str]):
    from enginewright.api.models import TuningRunSpec

    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/block.pt2"},
            "compiler": {"name": "inductor", "settings": settings},
            "accuracy": {"disabled": True, "reason": "unit test of planning"},
            "targets": [{"gpuType": "h200"}],
        }
    )


INDUCTOR_KNOBS = [
    Knob("compile", ("true", "false"), "true"),
    Knob("max_autotune", ("true", "false"), "false"),
    Knob("triton.cudagraphs", ("true", "false"), "false"),
]


def test_an_inductor_setting_that_names_a_knob_is_refused_not_ignored():
    # Inductor's build reads device and input_dtype from the settings and nothing else: max_autotune
    # there would be planned as the default route's value while every build ran without it.
    with pytest.raises(PlanError, match=r"spec\.compiler\.settings\.max_autotune: .*spec\.search\.pinned"):
        next_step(FlowSpec.of(inductor_spec({"max_autotune": "true"})), Observed(INDUCTOR_KNOBS))
    step = next_step(FlowSpec.of(inductor_spec({"device": "cuda", "input_dtype": "float16"})), Observed(INDUCTOR_KNOBS))
    assert isinstance(step, RunBatches)


def test_a_setting_naming_a_knob_with_a_value_it_does_not_allow_names_the_setting():
    spec = FlowSpec(mode="fast", settings={"graph_optimization_level": "ALL"}, settings_are_knobs=True)
    with pytest.raises(PlanError, match=r"spec\.compiler\.settings\.graph_optimization_level: .*does not allow 'ALL'"):
        first_step(spec, KNOBS)


def test_a_listed_route_of_a_knob_the_space_does_not_sweep_is_the_default_when_the_base_has_it():
    knobs = [*KNOBS, Knob("inter_op_num_threads", None, "0")]  # open-ended, nothing suggested: not swept
    spec = FlowSpec(
        routes=("-inter_op_num_threads=2", "-inter_op_num_threads=3"),
        settings={"inter_op_num_threads": "2"},
        settings_are_knobs=True,
    )
    assert [r.canonical for b in first_step(spec, knobs).batches for r in b.routes] == ["", "-inter_op_num_threads=3"]
