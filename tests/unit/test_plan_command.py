"""`enginewright plan` lists the candidate routes of fast and full manifests and refuses mixed."""

import subprocess
import sys

from enginewright.api.routes import route_id


def plan(*args):
    return subprocess.run([sys.executable, "-m", "enginewright", "plan", *args], capture_output=True, text=True)


def test_plan_lists_fast_routes_in_job_batches():
    done = plan("examples/tuningrun-onnx-fast.yaml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "fast search, 6 routes per target (2 jobs of up to 4) for cpu" in lines[0]
    assert lines[1].split() == ["stage1-b000", route_id(""), "(default)"]
    assert sum(line.strip().startswith("stage1-b001") for line in lines) == 2


def test_plan_lists_every_combination_of_a_full_search():
    done = plan("examples/tuningrun-onnx-full.yaml")
    assert done.returncode == 0, done.stderr
    assert "full search, 12 routes per target" in done.stdout
    assert "-enable_mem_pattern=0 -graph_optimization_level=basic -session.disable_prepacking=1" in done.stdout


def test_plan_refuses_mixed_with_a_reason():
    done = plan("examples/tuningrun-tensorrt-mixed.yaml")
    assert done.returncode == 2
    assert "mode mixed cannot be listed in advance" in done.stderr


def test_plan_of_tensorrt_uses_a_knob_file_when_tensorrt_is_absent(tmp_path):
    manifest = tmp_path / "trt.yaml"
    manifest.write_text(open("examples/tuningrun-tensorrt-mixed.yaml").read().replace("mode: mixed", "mode: full"))
    knobs = tmp_path / "knobs.json"
    knobs.write_text(
        '{"tuner_version": "2.19.15", "tuner_options": ['
        '{"option": "-conv_use_long_w", "allowed_values": "-conv_use_long_w=[on|off]", "default_value": "on"},'
        '{"option": "-kgen:codegen:cuda_tile", "allowed_values": "-kgen:codegen:cuda_tile=[0|1|2|3]",'
        ' "default_value": "1"}]}'
    )
    done = plan(str(manifest), "--knobs", str(knobs))
    assert done.returncode == 0, done.stderr
    assert "full search, 8 routes per target" in done.stdout and "NVIDIA-H200, NVIDIA-L40S" in done.stdout
    without = plan(str(manifest))
    assert without.returncode == 2 and "TensorRT" in without.stderr


def test_plan_names_the_field_of_an_invalid_manifest(tmp_path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(open("examples/tuningrun-onnx-fast.yaml").read().replace("threshold: 0.001", "threshold: -1"))
    done = plan(str(manifest))
    assert done.returncode != 0
    assert "spec.accuracy.threshold: Input should be greater than 0" in done.stderr
