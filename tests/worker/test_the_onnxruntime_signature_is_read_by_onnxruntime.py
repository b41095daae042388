"""The ONNX Runtime backend reads a model's signature with an ORT session of it, not with the onnx
package: importing onnx (ml_dtypes first) took 1.2-2.4 s of every `tune`'s and probe Job's start on
2 cores (issue 19, ask 7: fixed costs). What it reads agrees with the onnx package's reading wherever
the model declares it; a graph input with no shape is read as a rank not declared (ORT gives it as
it gives a scalar), and a file ORT cannot load raises."""

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
    inputs, an input with no shape declared; two outputs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [None, 3])
    bias = helper.make_tensor_value_info("bias", TensorProto.FLOAT, [4])
    free = helper.make_tensor_value_info("free", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["shifted"]),
        helper.make_node("Add", ["shifted", "free"], ["y"]),
        helper.make_node("Shape", ["ids"], ["ids_shape"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamic",
        [x, ids, bias, free],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("ids_shape", TensorProto.INT64, [2]),
        ],
        initializer=[helper.make_tensor("bias", TensorProto.FLOAT, [4], np.ones(4, np.float32))],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    built.ir_version = 8
    onnx.save(built, str(path))
    return path


def test_dynamic_sizes_and_dtypes_are_read_and_initializers_left_out(tmp_path):
    found = OnnxRuntimeBackend().signature(dynamic_model(tmp_path / "dynamic.onnx"), {})
    assert found.inputs == (
        TensorSpec("x", "float32", ("batch", 4)),
        TensorSpec("ids", "int64", (None, 3)),
        TensorSpec("free", "float32", None),  # no shape declared: any rank
    )
    assert found.outputs == (TensorSpec("y", "float32", ("batch", 4)), TensorSpec("ids_shape", "int64", (2,)))


def test_a_file_onnxruntime_cannot_load_raises(tmp_path):
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08garbage" * 100)
    with pytest.raises(Exception):
        OnnxRuntimeBackend().signature(corrupt, {})
