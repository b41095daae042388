"""The ONNX Runtime backend reads a model's signature with an ORT session of it, not with the onnx
package: importing onnx (ml_dtypes first) took 1.2-2.4 s of every `tune`'s and probe Job's start on
2 cores (issue 19, ask 7: fixed costs). What it reads agrees with the onnx package's reading
(scalars, bfloat16 and dynamic sizes included), and a file ORT cannot load raises."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from enginewright.accuracy.signature import TensorSpec
from enginewright.backends.base import onnx_signature
from enginewright.backends.onnxruntime import OnnxRuntimeBackend

OPERATOR = Path(__file__).resolve().parents[2] / "operator"


def test_reading_the_signature_imports_neither_onnx_nor_ml_dtypes(example):
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from enginewright.backends.onnxruntime import OnnxRuntimeBackend\n"
        f"found = OnnxRuntimeBackend().signature(Path({str(example / 'mlp.onnx')!r}), {{}})\n"
        "print(found.describe())\n"
        "print(sorted(m for m in ('onnx', 'ml_dtypes') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env={"PYTHONPATH": str(OPERATOR)}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    described, imported = done.stdout.strip().splitlines()
    assert described == (
        "the model takes image float32[8, 3, 32, 32] and gives logits float32[8, 10], features float32[8, 512]"
    )
    assert imported == "[]"


def test_it_reads_what_the_onnx_package_reads(example):
    model = example / "mlp.onnx"
    assert OnnxRuntimeBackend().signature(model, {}) == onnx_signature(model)


def dynamic_model(path: Path) -> Path:
    """Inputs of a named and an unnamed dynamic size, an int64 input, an initializer listed among the
    inputs, a scalar, a bfloat16 input; outputs of a dynamic size, an inferred shape and a scalar."""
    value = helper.make_tensor_value_info
    inputs = [
        value("x", TensorProto.FLOAT, ["batch", 4]),
        value("ids", TensorProto.INT64, [None, 3]),
        value("bias", TensorProto.FLOAT, [4]),
        value("scale", TensorProto.FLOAT, []),
        value("half", TensorProto.BFLOAT16, [2]),
    ]
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["shifted"]),
        helper.make_node("Mul", ["shifted", "scale"], ["y"]),
        helper.make_node("Shape", ["ids"], ["ids_shape"]),
        helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0),
        helper.make_node("Cast", ["half"], ["widened"], to=TensorProto.FLOAT),
    ]
    outputs = [
        value("y", TensorProto.FLOAT, ["batch", 4]),
        value("ids_shape", TensorProto.INT64, [2]),
        value("total", TensorProto.FLOAT, []),
        value("widened", TensorProto.FLOAT, [2]),
    ]
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [4], np.ones(4, np.float32))
    built = helper.make_model(
        helper.make_graph(nodes, "dynamic", inputs, outputs, initializer=[bias]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    built.ir_version = 8
    onnx.save(built, str(path))
    return path


def test_dynamic_sizes_scalars_and_dtypes_are_read_and_initializers_left_out(tmp_path):
    model = dynamic_model(tmp_path / "dynamic.onnx")
    found = OnnxRuntimeBackend().signature(model, {})
    assert found.inputs == (
        TensorSpec("x", "float32", ("batch", 4)),
        TensorSpec("ids", "int64", (None, 3)),
        TensorSpec("scale", "float32", ()),  # a scalar: data of another rank is refused
        TensorSpec("half", "bfloat16", (2,)),  # named as the onnx package (ml_dtypes) names it
    )
    assert found.outputs == (
        TensorSpec("y", "float32", ("batch", 4)),
        TensorSpec("ids_shape", "int64", (2,)),
        TensorSpec("total", "float32", ()),
        TensorSpec("widened", "float32", (2,)),
    )
    assert found == onnx_signature(model)


def test_a_file_onnxruntime_cannot_load_raises(tmp_path):
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08garbage" * 100)
    with pytest.raises(Exception):
        OnnxRuntimeBackend().signature(corrupt, {})
