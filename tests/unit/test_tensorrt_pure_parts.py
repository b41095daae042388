"""The pure parts of the TensorRT backend (TensorRT itself cannot be installed here: the backend has
never been executed; see README)."""

import pytest

from enginewright.api.models import InputShape
from enginewright.backends import BackendUnavailable, get_backend
from enginewright.backends.tensorrt import build_route_string, builder_settings, profile_shapes
from enginewright.search.planners import build_space, plan_fast

KNOB_JSON = """{"tuner_version": "2.19.15", "tuner_options": [
  {"option": "-conv_use_long_w", "allowed_values": "-conv_use_long_w=[on|off]", "default_value": "on", "help": ""},
  {"option": "-kgen:codegen:cuda_tile", "allowed_values": "-kgen:codegen:cuda_tile=[0|1|2|3]", "default_value": "1"},
  {"option": "-max_regs", "allowed_values": "-max_regs=int32_t", "default_value": "0"}]}"""


def test_route_string_is_canonical_tokens():
    assert (
        build_route_string({"kgen:codegen:cuda_tile": "2", "conv_use_long_w": "off"})
        == "-conv_use_long_w=off -kgen:codegen:cuda_tile=2"
    )
    assert build_route_string({}) == ""


def test_knobs_from_all_build_routes_drive_the_planners_without_tensorrt():
    backend = get_backend("tensorrt", knobs_json=KNOB_JSON)
    space = build_space(backend.knobs(), [], {})
    routes = [build_route_string(r.as_dict) for r in plan_fast(space)]
    assert routes == [
        "",
        "-conv_use_long_w=off",
        "-kgen:codegen:cuda_tile=0",
        "-kgen:codegen:cuda_tile=2",
        "-kgen:codegen:cuda_tile=3",
    ]


def test_empty_all_build_routes_means_the_feature_is_unavailable():
    with pytest.raises(BackendUnavailable, match="no build-route knobs"):
        get_backend("tensorrt", knobs_json="").knobs()


def test_builder_settings_are_validated_and_named():
    parsed = builder_settings({"builder_optimization_level": "5", "tf32": "false", "workspace_bytes": "1073741824"})
    assert parsed.ints == {"builder_optimization_level": 5}
    assert parsed.flags == {"TF32": False}
    assert parsed.pools == {"WORKSPACE": 1 << 30}
    with pytest.raises(ValueError, match=r"settings.builder_optimization_level must be in \[0, 5\] \(got 7\)"):
        builder_settings({"builder_optimization_level": "7"})
    with pytest.raises(ValueError, match="settings.fp16 is not a TensorRT builder setting"):
        builder_settings({"fp16": "true"})  # TensorRT 11 networks are strongly typed
    with pytest.raises(ValueError, match="must be true or false"):
        builder_settings({"tf32": "maybe"})


def test_profile_shapes_from_spec_and_static_inputs():
    shapes = [InputShape(name="input", min=[1, 3, 224, 224], opt=[16, 3, 224, 224], max=[32, 3, 224, 224])]
    profile = profile_shapes({"input": (-1, 3, 224, 224), "mask": (1, 10)}, shapes)
    assert profile == [
        ("input", [1, 3, 224, 224], [16, 3, 224, 224], [32, 3, 224, 224]),
        ("mask", [1, 10], [1, 10], [1, 10]),
    ]


@pytest.mark.parametrize(
    "inputs,shapes,message",
    [
        ({"input": (-1, 3)}, [], "dynamic shape"),
        ({"input": (8, 3)}, [InputShape(name="other", min=[1], opt=[1], max=[1])], "not inputs of the network"),
        ({"input": (8, 3)}, [InputShape(name="input", min=[1, 3], opt=[4, 3], max=[8, 3])], "dimension 0 is static"),
        ({"input": (-1, 3)}, [InputShape(name="input", min=[1], opt=[1], max=[1])], "rank 2"),
    ],
)
def test_profile_errors_name_the_input(inputs, shapes, message):
    with pytest.raises(ValueError, match=message):
        profile_shapes(inputs, shapes)


def test_build_without_tensorrt_says_it_is_unavailable(tmp_path):
    from enginewright.backends.base import BuildRequest

    with pytest.raises(BackendUnavailable, match="not installable"):
        get_backend("tensorrt", knobs_json=KNOB_JSON).build(BuildRequest(model_path=tmp_path / "m.onnx"), {})
